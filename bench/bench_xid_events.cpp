// What the XID event thread costs (issue 21): the NVML backend's XidEvents on the fake NVML with the
// 8-GPU scenario, every GPU registered for XID events, for a number of seconds while a collection
// reads all eight GPUs at 1 Hz beside it. Prints the event thread's own CPU time (its thread CPU clock),
// the process's, and the load average, idle (no XID) and under an XID storm (one XID per GPU per
// second, injected through the fake's hook).
//
//   gf_bench_xid_events [seconds per phase, default 20]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "backends/nvml/nvml_backend.hpp"
#include "backends/nvml/nvml_events.hpp"
#include "core/text.hpp"
#include "platform/clock.hpp"
#include "platform/dynlib.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace gf;
using Clock = std::chrono::steady_clock;

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

int fail(const std::string& why) {
  std::fprintf(stderr, "gf_bench_xid_events: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto given = argc > 1 ? gf::core::parse_uint(argv[1], 1, 86400) : gf::Result<std::uint64_t>(20);
  if (!given) {
    std::fprintf(stderr, "usage: %s [SECONDS]\n", argv[0]);
    return 2;
  }
  const int seconds = static_cast<int>(*given);
  const std::string scenario = std::string(GF_FIXTURES_DIR) + "/nvml/eight_gpus.json";
  ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);

  // The collection beside it: the real backend, 1 Hz. It runs its own event thread too; the one measured
  // here is a second XidEvents on the same library, whose thread CPU clock we can read.
  backends::BackendOptions opts;
  opts.nvml_library = GF_FAKE_NVML;
  opts.xid_events = true;  // as the agent runs it
  auto backend = backends::open_nvml(opts);
  if (!backend) return fail(backend.error().message);

  auto lib = platform::DynamicLibrary::open(GF_FAKE_NVML);
  if (!lib) return fail(lib.error().message);
  auto api = backends::nvml::load_api(*lib);
  if (!api) return fail(api.error().message);
  if (api->init() != backends::nvml::kSuccess) return fail("nvmlInit failed");
  unsigned count = 0;
  api->device_count(&count);
  std::vector<backends::nvml::Device> devices(count, nullptr);
  for (unsigned i = 0; i < count; ++i) api->device_handle(i, &devices[i]);
  auto inject = lib->function<int (*)(unsigned, unsigned long long)>("fake_nvml_inject_xid");
  if (!inject) return fail("the fake NVML lacks fake_nvml_inject_xid");

  {
    backends::nvml::XidEvents events(*api, platform::system_clock());
    events.start(devices);
    if (!events.running()) return fail("no GPU was registered for XID events: " + events.problem());

    auto phase = [&](const char* name, bool storm) {
      const auto cpu0 = events.cpu_time();
      const double proc0 = process_cpu_s();
      const auto t0 = Clock::now();
      for (int s = 0; s < seconds; ++s) {
        if (storm)
          for (unsigned i = 0; i < count; ++i) inject(i, 13);
        (void)(*backend)->snapshot();  // the 1 Hz collection of all GPUs
        std::this_thread::sleep_until(t0 + std::chrono::seconds(s + 1));
      }
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      const double thread_ms = std::chrono::duration<double, std::milli>(events.cpu_time() - cpu0).count();
      const double proc_ms = (process_cpu_s() - proc0) * 1000;
      std::printf(
          "%-26s %d GPUs, %.1f s: event thread %.3f ms CPU (%.4f %% of a core), process %.1f ms "
          "(%.3f %%), loadavg %s\n",
          name, static_cast<int>(count), wall, thread_ms, thread_ms / wall / 10.0, proc_ms, proc_ms / wall / 10.0,
          loadavg().c_str());
    };
    phase("idle (no XID)", false);
    phase("storm (1 XID/GPU/s)", true);
  }
  api->shutdown();
  return 0;
}
