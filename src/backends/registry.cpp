#include <functional>
#include <utility>

#include "backends/amdgpu/amdgpu_backend.hpp"
#include "backends/backend.hpp"
#include "backends/nvidia_smi/nvidia_smi_backend.hpp"
#include "backends/nvml/nvml_backend.hpp"
#include "backends/sim/sim_backend.hpp"
#include "platform/fs.hpp"

namespace gf::backends {
namespace {

using Factory = Result<std::unique_ptr<Backend>> (*)(const BackendOptions&);

struct Entry {
  BackendKind kind;
  std::string_view name;
  Factory open;
  bool in_auto;  // tried by auto-detection, in this order
};

// The registry: one line per backend.
constexpr Entry kBackends[] = {
    {BackendKind::Nvml, "nvml", &open_nvml, true},
    {BackendKind::NvidiaSmi, "nvidia-smi", &open_nvidia_smi, true},
    {BackendKind::Amdgpu, "amdgpu", &open_amdgpu, true},
    {BackendKind::Sim, "sim", &open_sim, false},
};

}  // namespace

BackendOptions BackendOptions::from_environment() {
  BackendOptions o;
  if (auto v = platform::env("GPUFLEET_NVML_LIBRARY")) o.nvml_library = *v;
  if (auto v = platform::env("GPUFLEET_NVIDIA_SMI")) o.nvidia_smi = *v;
  if (auto v = platform::env("GPUFLEET_SYSFS_ROOT")) o.sysfs_root = *v;
  if (auto v = platform::env("GPUFLEET_PROC_ROOT")) o.proc_root = *v;
  if (auto v = platform::env("GPUFLEET_SIM_SCENARIO")) o.sim_scenario = *v;
  return o;
}

Result<BackendKind> parse_backend_kind(std::string_view text) {
  if (text == "auto") return BackendKind::Auto;
  for (const auto& e : kBackends)
    if (e.name == text) return e.kind;
  return make_error("unknown backend '" + std::string(text) + "' (expected auto, nvml, nvidia-smi, amdgpu or sim)");
}

std::string_view to_string(BackendKind k) noexcept {
  if (k == BackendKind::Auto) return "auto";
  for (const auto& e : kBackends)
    if (e.kind == k) return e.name;
  return "auto";
}

OpenedBackend open_backend(BackendKind kind, const BackendOptions& opts) {
  OpenedBackend out;
  for (const auto& e : kBackends) {
    if (kind == BackendKind::Auto ? !e.in_auto : e.kind != kind) continue;
    auto b = e.open(opts);
    if (!b) {
      out.steps.push_back({std::string(e.name), false, b.error().message});
      continue;
    }
    if (kind == BackendKind::Auto) {
      // A backend that opens but sees no GPU (NVML on a machine whose GPUs are all AMD) is not chosen.
      auto s = (*b)->snapshot();
      if (!s || s->gpus.empty()) {
        out.steps.push_back({std::string(e.name), false, s ? "loaded, but reports no GPU" : s.error().message});
        continue;
      }
      out.probe = std::move(*s);
    }
    out.steps.push_back({std::string(e.name), true, "opened"});
    out.backend = std::move(*b);
    break;
  }
  return out;
}

}  // namespace gf::backends
