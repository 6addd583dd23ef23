#include "backends/nvml/nvml_backend.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "backends/nvml/nvml_device.hpp"
#include "backends/nvml/nvml_events.hpp"
#include "backends/nvml/nvml_gpm.hpp"
#include "backends/nvml/nvml_topology.hpp"
#include "platform/clock.hpp"
#include "platform/dynlib.hpp"

namespace gf::backends {
namespace {

using nvml::Api;
using nvml::Device;
using nvml::Return;

// "12.4" from NVML's 1000 * major + 10 * minor (12040).
std::string format_cuda_version(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

std::string init_failure(const Api& api, const std::string& path, Return code) {
  switch (code) {
    case nvml::kErrorLibRmVersionMismatch:
      return fmt::format(
          "nvml: {} does not match the loaded NVIDIA kernel module ({}): the NVIDIA driver was upgraded but the "
          "old kernel module is still loaded; reload the nvidia kernel module (stop GPU users, then "
          "`rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia`) or reboot",
          path, nvml::describe(api, code));
    case nvml::kErrorDriverNotLoaded:
      return fmt::format(
          "nvml: {} loaded, but the NVIDIA kernel driver is not running ({}); load it with "
          "`modprobe nvidia` or check the driver installation",
          path, nvml::describe(api, code));
    default: return fmt::format("nvml: nvmlInit failed in {}: {}", path, nvml::describe(api, code));
  }
}

class NvmlBackend final : public Backend {
 public:
  NvmlBackend(platform::DynamicLibrary lib, Api api, const core::Clock& clock, bool xid_events,
              std::chrono::milliseconds gpm_interval)
      : lib_(std::move(lib)),
        api_(api),
        clock_(clock),
        xid_events_(xid_events),
        events_(api_, clock_),
        gpm_(api_, gpm_interval) {}
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  // Pairs the one successful nvmlInit with its nvmlShutdown; the library closes after (lib_ is
  // declared first, so it is destroyed last).
  ~NvmlBackend() override {
    events_.stop();  // the event thread waits on NVML: it ends before nvmlShutdown
    gpm_.clear();    // GPM sample buffers go back to NVML while it is still initialised
    if (initialised_) api_.shutdown();
  }

  Result<void> start() {
    const Return r = api_.init();
    if (r != nvml::kSuccess) return make_error(init_failure(api_, lib_.path(), r));
    initialised_ = true;
    // Versions cannot change while the library is initialised: read them once.
    if (api_.driver_version) {
      char buffer[nvml::kDriverVersionLength] = {};
      if (api_.driver_version(buffer, sizeof buffer) == nvml::kSuccess)
        driver_version_.assign(buffer, strnlen(buffer, sizeof buffer));
    }
    int cuda = 0;
    if (api_.cuda_driver_version && api_.cuda_driver_version(&cuda) == nvml::kSuccess && cuda > 0)
      cuda_driver_version_ = format_cuda_version(cuda);
    // XID events for the GPUs present now; their handles stay valid until shutdown. A GPU that
    // appears later is not registered (NVML keeps its device list from init).
    if (xid_events_) {
      unsigned count = 0;
      if (api_.device_count(&count) == nvml::kSuccess) {
        event_devices_.assign(count, nullptr);
        for (unsigned index = 0; index < count; ++index)
          if (api_.device_handle(index, &event_devices_[index]) != nvml::kSuccess) event_devices_[index] = nullptr;
      }
      events_.start(event_devices_);
    }
    return {};
  }

  std::string_view name() const noexcept override { return "nvml"; }

  Result<core::Snapshot> snapshot() override {
    core::Snapshot snap;
    snap.timestamp = clock_.wall_now();
    snap.backend = "nvml";
    snap.driver_version = driver_version_;
    snap.cuda_driver_version = cuda_driver_version_;

    // Count and handles every time: a GPU can fall off the bus between two snapshots.
    unsigned count = 0;
    if (const Return r = api_.device_count(&count); r != nvml::kSuccess)
      return make_error(fmt::format("nvml: cannot count GPUs: {}", nvml::describe(api_, r)));

    const auto now = clock_.now();
    const bool fresh = std::exchange(fresh_counters_, false);
    std::vector<unsigned> persistence_off;
    std::vector<std::string> process_problems;
    snap.gpus.reserve(count);
    for (unsigned index = 0; index < count; ++index) {
      Device device = nullptr;
      if (const Return r = api_.device_handle(index, &device); r != nvml::kSuccess || device == nullptr) {
        auto gone = nvml::unreachable_device(api_, index, r == nvml::kSuccess ? nvml::kErrorUnknown : r,
                                             "cannot get a handle for the GPU");
        // The XIDs seen before it went (79: fallen off the bus) are still its story.
        if (index < event_devices_.size() && event_devices_[index] != nullptr)
          events_.fill(event_devices_[index], gone);
        snap.gpus.push_back(std::move(gone));
        continue;
      }
      auto& state = devices_[device];
      // The slow fields every kSlowReadInterval, and at once after an XID on this GPU (an uncorrectable
      // ECC error or a row remap raises one): a health change is not left waiting for the period.
      const std::uint64_t xids = xid_events_ ? events_.count(device) : 0;
      const bool read_slow =
          !state.slow || now - state.slow_read_at >= nvml::kSlowReadInterval || xids != state.slow_xids;
      // The costly counters (energy, violation times: ~5.6 ms of CPU on an H100) every
      // kCounterReadInterval, and when a caller asked for exact counters now (a job's first and last sample).
      const bool counters_due = !state.counters_read || now - state.counters_read_at >= nvml::kCounterReadInterval;
      const bool had_counters = state.counters_read;
      auto result = nvml::read_device(api_, device, index, state, read_slow, fresh || counters_due);
      if (read_slow && state.slow) {  // read (not lost mid-read): the period starts again
        state.slow_read_at = now;
        state.slow_xids = xids;
      }
      if (counters_due && state.counters_read) {
        // The GPUs' periods are staggered (GPU i of n starts i/n of a period early), so that 8 GPUs cost
        // one read at most per collection rather than eight in one collection every period. A fresh read
        // leaves the period as it was.
        state.counters_read_at = now;
        if (!had_counters && count > 1) state.counters_read_at -= nvml::kCounterReadInterval * index / count;
      }
      if (xid_events_) events_.fill(device, result.reading);  // else last_xid stays "not queried"
      if (result.reading.health == core::Health::Ok) gpm_.read(device, now, result.reading);
      if (result.reading.persistence_mode.has_value() && !*result.reading.persistence_mode)
        persistence_off.push_back(index);
      for (auto& p : result.process_problems) process_problems.push_back(std::move(p));
      for (auto& p : result.mig_problems) snap.warnings.push_back(std::move(p));
      snap.gpus.push_back(std::move(result.reading));
    }

    if (!persistence_off.empty()) {
      snap.warnings.push_back(fmt::format(
          "persistence mode is off on GPU {}: the driver re-initialises on every first query after idle, which "
          "makes queries slow; enable it with `nvidia-smi -pm 1` or nvidia-persistenced",
          fmt::join(persistence_off, ", ")));
    }
    if (auto problem = events_.problem(); !problem.empty()) snap.warnings.push_back(std::move(problem));
    if (!process_problems.empty()) {
      snap.process_visibility.complete = false;
      snap.process_visibility.message = fmt::format("{}", fmt::join(process_problems, "; "));
    }
    return snap;
  }

  void fresh_counters() override { fresh_counters_ = true; }

  // Asked afresh each time (see nvml_topology.hpp for the cost): a GPU or an NvLink can fail while
  // we run. Only a failure to count GPUs is an error; everything else degrades to Unknown.
  Result<core::Topology> topology() override {
    unsigned count = 0;
    if (const Return r = api_.device_count(&count); r != nvml::kSuccess)
      return make_error(fmt::format("nvml: cannot count GPUs: {}", nvml::describe(api_, r)));
    std::vector<Device> devices(count, nullptr);
    for (unsigned index = 0; index < count; ++index)
      if (api_.device_handle(index, &devices[index]) != nvml::kSuccess) devices[index] = nullptr;
    return nvml::read_topology(api_, devices);
  }

 private:
  platform::DynamicLibrary lib_;
  Api api_;
  const core::Clock& clock_;
  bool initialised_ = false;
  bool xid_events_ = false;      // BackendOptions::xid_events
  bool fresh_counters_ = false;  // fresh_counters() was called: the next snapshot reads every counter
  std::string driver_version_;
  std::string cuda_driver_version_;
  // What each device has told us (unsupported fields, identity), by handle; handles stay valid
  // until nvmlShutdown.
  std::unordered_map<Device, nvml::DeviceState> devices_;
  // The handles registered for XID events, by NVML index at start.
  std::vector<Device> event_devices_;
  nvml::XidEvents events_;  // after api_ and clock_, which it uses
  // GPM profiling per device (its own interval; see nvml_gpm.hpp). After api_: it keeps a reference.
  nvml::GpmCollector gpm_;
};

}  // namespace

Result<std::unique_ptr<Backend>> open_nvml(const BackendOptions& opts) {
  auto lib = platform::DynamicLibrary::open(opts.nvml_library);
  if (!lib) return make_error(fmt::format("nvml: {} (is the NVIDIA driver installed?)", lib.error().message));
  auto api = nvml::load_api(*lib);
  if (!api) return api.error();
  const core::Clock& clock = opts.clock ? *opts.clock : platform::system_clock();
  auto backend = std::make_unique<NvmlBackend>(std::move(*lib), *api, clock, opts.xid_events, opts.gpm_interval);
  if (auto started = backend->start(); !started) return started.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gf::backends
