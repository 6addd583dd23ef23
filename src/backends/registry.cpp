#include <array>
#include <functional>
#include <iterator>
#include <string>
#include <utility>

#include <fmt/core.h>

#include "backends/amdgpu/amdgpu_backend.hpp"
#include "backends/backend.hpp"
#include "backends/intel/intel_backend.hpp"
#include "backends/nvidia_smi/nvidia_smi_backend.hpp"
#include "backends/nvml/nvml_backend.hpp"
#include "backends/sim/sim_backend.hpp"
#include "platform/fs.hpp"

namespace gf::backends {
namespace {

using Factory = Result<std::unique_ptr<Backend>> (*)(const BackendOptions&);

struct Entry {
  BackendInfo info;
  Factory open;
};

// The registry: one line per backend. Auto-detection tries the in_auto rows in this order; the CLI's
// --backend choices and help text list them in this order too.
// A new vendor is its folder (src/backends/<vendor>/, which CMake and the layering check find by
// themselves) and one row here, with the include of its factory above.
constexpr Entry kBackends[] = {
    {{"nvml", true, "nvidia.com/gpu"}, &open_nvml},
    {{"nvidia-smi", true, "nvidia.com/gpu"}, &open_nvidia_smi},
    {{"amdgpu", true, "amd.com/gpu"}, &open_amdgpu},
    {{"intel", true, ""}, &open_intel},
    {{"sim", false, ""}, &open_sim},
};

constexpr std::array<BackendInfo, std::size(kBackends)> infos() {
  std::array<BackendInfo, std::size(kBackends)> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = kBackends[i].info;
  return out;
}
constexpr auto kInfos = infos();

}  // namespace

BackendOptions BackendOptions::from_environment() {
  BackendOptions o;
  if (auto v = platform::env("GPUFLEET_NVML_LIBRARY")) o.nvml_library = *v;
  if (auto v = platform::env("GPUFLEET_NVIDIA_SMI")) o.nvidia_smi = *v;
  if (auto v = platform::env("GPUFLEET_SYSFS_ROOT")) o.sysfs_root = *v;
  if (auto v = platform::env("GPUFLEET_PROC_ROOT")) o.proc_root = *v;
  if (auto v = platform::env("GPUFLEET_KMSG")) o.kernel_log = *v;
  if (auto v = platform::env("GPUFLEET_SIM_SCENARIO")) o.sim_scenario = *v;
  return o;
}

std::span<const BackendInfo> registered_backends() noexcept { return kInfos; }

std::string_view kubernetes_resource(std::string_view name) noexcept {
  for (const auto& e : kBackends)
    if (e.info.name == name) return e.info.kubernetes_resource;
  return {};
}

Result<std::string_view> parse_backend_name(std::string_view text) {
  if (text == "auto") return std::string_view("auto");
  for (const auto& e : kBackends)
    if (e.info.name == text) return e.info.name;
  return make_error(fmt::format("unknown backend '{}' (expected {})", text, backend_choices()));
}

std::string backend_choices() {
  std::string out = "auto";
  for (std::size_t i = 0; i < std::size(kBackends); ++i)
    out += fmt::format("{}{}", i + 1 == std::size(kBackends) ? " or " : ", ", kBackends[i].info.name);
  return out;
}

std::string auto_detection_order() {
  std::string out;
  for (const auto& e : kBackends)
    if (e.info.in_auto) out += fmt::format("{}{}", out.empty() ? "" : ", then ", e.info.name);
  return out;
}

OpenedBackend open_backend(std::string_view name, const BackendOptions& opts) {
  OpenedBackend out;
  const bool automatic = name == "auto";
  if (!automatic && !parse_backend_name(name)) {
    out.steps.push_back({std::string(name), false, parse_backend_name(name).error().message});
    return out;
  }
  for (const auto& e : kBackends) {
    if (automatic ? !e.info.in_auto : e.info.name != name) continue;
    auto b = e.open(opts);
    if (!b) {
      out.steps.push_back({std::string(e.info.name), false, b.error().message});
      continue;
    }
    if (automatic) {
      // A backend that opens but sees no GPU (NVML on a machine whose GPUs are all AMD) is not chosen.
      auto s = (*b)->snapshot();
      if (!s || s->gpus.empty()) {
        out.steps.push_back({std::string(e.info.name), false, s ? "loaded, but reports no GPU" : s.error().message});
        continue;
      }
      out.probe = std::move(*s);
    }
    out.steps.push_back({std::string(e.info.name), true, "opened"});
    out.backend = std::move(*b);
    break;
  }
  return out;
}

}  // namespace gf::backends
