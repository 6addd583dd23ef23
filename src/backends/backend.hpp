#pragma once
// The one interface every GPU vendor backend implements. Adding a vendor: a folder under backends/
// (with an open_<vendor>() factory) and one row in registry.cpp (with its include). CMake, the layering
// check (the `backends/*/` row) and the unit tests (tests/unit/backends/<vendor>/) find the folder by
// themselves; the CLI's choices and help text and the fleet's Kubernetes resource come from the row.
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ports/clock.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/topology.hpp"

namespace gf::backends {

// Where each backend looks. Defaults are the real system; from_environment() applies
// GPUFLEET_NVML_LIBRARY, GPUFLEET_NVIDIA_SMI, GPUFLEET_SYSFS_ROOT, GPUFLEET_PROC_ROOT and GPUFLEET_KMSG.
struct BackendOptions {
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string nvidia_smi = "nvidia-smi";
  std::chrono::milliseconds nvidia_smi_timeout{5000};
  std::string sysfs_root = "/";          // replaces "/" for /sys/class/drm/...
  std::string proc_root = "/proc";       // /proc for fdinfo, names, users, containers
  std::string kernel_log = "/dev/kmsg";  // where the nvidia-smi backend reads the kernel's XID lines
  std::string sim_scenario;              // JSON file for the sim backend; empty: built-in demo
  unsigned sim_gpus = 0;                 // 0: as many as the scenario says (built-in: 4)
  const core::Clock* clock = nullptr;    // nullptr: the system clock
  // Listen for XID events on a thread of their own (NVML). For long-running users (the agent, monitor,
  // watch): a one-shot command would only pay the thread's start and stop (up to one 1 s wait) and
  // could never see an XID that came before it started. Off: last_xid is absent, "not queried".
  // The nvidia-smi backend reads XIDs from kernel_log instead, under the same switch.
  bool xid_events = false;
  // NVML GPM (profiling metrics, Hopper and later): the least time between two GPM samples of a GPU.
  // Each reading is the average over the time between two samples, so a longer interval loses time
  // resolution, not coverage; collections in between keep the last values. 0: GPM off. NVML wants
  // more than 100 ms between samples. See docs/profiling.md for what it costs.
  std::chrono::milliseconds gpm_interval{10'000};

  static BackendOptions from_environment();
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Its registry name: "nvml", "nvidia-smi", "amdgpu", "intel", "sim".
  virtual std::string_view name() const noexcept = 0;
  // One reading of every GPU. Processes carry pid, memory and kind (and a name when the vendor tool
  // gives one); the caller resolves names, users and containers from /proc. A failure of one GPU is
  // reported in that GPU's health; an error result means no reading at all.
  // Thread-safety: not required to be re-entrant; the owner (sampler::Monitor) serialises calls.
  virtual Result<core::Snapshot> snapshot() = 0;
  // The next snapshot() reads afresh every counter the backend otherwise reads on a slower cadence than
  // its snapshots (NVML's energy and violation counters: every 30 s, nvml_device.hpp), so that its values are exact at
  // that moment: a job's first and last sample. The default: nothing to do (every value is read each time).
  virtual void fresh_counters() {}
  // How the GPUs are connected, indexed by GPU index. The default: nothing known (every pair
  // Unknown), which the allocator treats as "no preference".
  virtual Result<core::Topology> topology() { return core::Topology{}; }
};

// One row of the registry (registry.cpp), in its order.
struct BackendInfo {
  std::string_view name;  // what --backend takes
  bool in_auto;           // tried by auto-detection, in the registry's order
  // The Kubernetes extended resource its GPUs are requested by ("nvidia.com/gpu"); empty when none is
  // assumed. The fleet reads an agent's GPUs as this resource (cluster/agent_source.cpp).
  std::string_view kubernetes_resource;
};
std::span<const BackendInfo> registered_backends() noexcept;
// The kubernetes_resource of the registered backend named `name`; empty for any other name.
std::string_view kubernetes_resource(std::string_view name) noexcept;

// "auto" or a registered backend's name (as the registry spells it, so it outlives the argument);
// otherwise an error that lists the choices.
Result<std::string_view> parse_backend_name(std::string_view text);
// "auto, nvml, nvidia-smi, amdgpu, intel or sim": the choices, for help texts and errors.
std::string backend_choices();
// "nvml, then nvidia-smi, then amdgpu, then intel": what auto-detection tries, in order.
std::string auto_detection_order();

struct DetectionStep {
  std::string backend;
  bool chosen = false;
  std::string detail;  // what was found, or why it was not usable
};

struct OpenedBackend {
  std::unique_ptr<Backend> backend;  // null when nothing could be opened
  std::vector<DetectionStep> steps;  // what was tried, in order
  // Auto-detection reads the GPUs once to see that there are any; that reading, so the caller need
  // not query the driver again at once.
  std::optional<core::Snapshot> probe;
};

// Opens the backend named (a registered name, or "auto"; anything else opens nothing and says so).
// "auto" tries the registry's in_auto rows in order (auto_detection_order()) and takes the first that
// opens and sees at least one GPU; it never falls back to the simulated backend.
OpenedBackend open_backend(std::string_view name, const BackendOptions& opts);

}  // namespace gf::backends
