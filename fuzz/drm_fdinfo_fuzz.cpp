// libFuzzer target for DRM fdinfo as the intel backend reads it: the vendor-neutral parser
// (backends/drm/fdinfo), the client tally, and the intel backend's engine-busy and memory
// arithmetic over two collections. The text is the kernel's, but a container's /proc (or a future
// kernel, or a foreign driver) can put anything there. Crashes, sanitizer reports and the invariant
// traps below are findings. The input is split at the first "\n--\n" into two collections.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backends/drm/drm_clients.hpp"
#include "backends/drm/fdinfo.hpp"
#include "backends/intel/engine_usage.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_bounds(const gf::backends::drm::DrmFdinfo& f) {
  namespace drm = gf::backends::drm;
  check(!f.driver.empty() && f.driver.size() <= drm::kMaxTextValue);
  check(f.pdev.size() <= drm::kMaxTextValue);
  for (const auto* m :
       {&f.total_bytes, &f.engine_busy_ns, &f.engine_cycles, &f.engine_total_cycles, &f.engine_capacity}) {
    check(m->size() <= drm::kMaxKeysPerMap);
    for (const auto& [name, v] : *m) check(!name.empty() && name.size() <= drm::kMaxTextValue);
  }
  for (const auto& [name, v] : f.engine_capacity) check(v > 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace drm = gf::backends::drm;
  namespace intel = gf::backends::intel;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = all.find("\n--\n");
  const std::string_view first = all.substr(0, cut);
  const std::string_view second = cut == std::string_view::npos ? first : all.substr(cut + 4);

  intel::EngineUsage usage;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::seconds(1);
  const std::uint32_t pid = 1;
  int step = 1;
  for (const std::string_view text : {first, second}) {
    drm::DrmClientTally tally({"i915", "xe"});
    if (const auto f = drm::parse_drm_fdinfo(text)) {
      check_bounds(*f);
      // The same record through two fds is one client.
      tally.add(pid, *f);
      tally.add(pid, *f);
      check(tally.size() <= 1);
    }
    usage.update(tally, t0 + std::chrono::seconds(step++), true);
    for (const auto& pdev : tally.pdevs()) {
      const auto g = usage.gpu_utilization(pdev);
      check(!g || *g <= 100);
      for (const auto& pc : tally.processes_on(pdev)) {
        const auto p = usage.process_utilization(pdev, pc.pid);
        check(!p || *p <= 100);
        (void)intel::process_memory_mib(pc);
      }
    }
  }
  (void)drm::parse_drm_memory_bytes(all);
  return 0;
}
