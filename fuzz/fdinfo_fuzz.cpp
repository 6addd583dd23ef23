// libFuzzer target for the amdgpu backend's pure parsers: DRM fdinfo (backends/drm/, and the tally
// and amdgpu's reading of it),
// pp_dpm_* clock tables and RAS error counts. All read text the kernel writes, which we do not
// control (a future kernel, a foreign driver, a corrupt or hostile /proc in a container).
// Crashes, sanitizer reports and the invariant traps below are findings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backends/amdgpu/drm_clients.hpp"
#include "backends/amdgpu/sysfs_text.hpp"
#include "backends/drm/fdinfo.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace amd = gf::backends::amdgpu;
  namespace drm = gf::backends::drm;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (const auto f = drm::parse_drm_fdinfo(text)) {
    // The bounds the parser promises, whatever the input.
    check(!f->driver.empty() && f->driver.size() <= 64);
    check(f->pdev.size() <= 64);
    check(f->engine_busy_ns.size() <= 64);
    for (const char c : f->pdev) check(!(c >= 'A' && c <= 'Z'));
    // Twice the same record is still one client.
    drm::DrmClientTally tally({"amdgpu"});
    tally.add(1, *f);
    tally.add(1, *f);
    const auto procs = amd::processes_on(tally, f->pdev);
    check(procs.size() <= 1);
    if (!procs.empty() && f->memory_vram_bytes) check(procs[0].used_memory_mib == (*f->memory_vram_bytes >> 20));
  }
  (void)drm::parse_drm_memory_bytes(text);
  (void)amd::parse_dpm_current_mhz(text);
  (void)amd::parse_ras_uncorrectable(text);
  return 0;
}
