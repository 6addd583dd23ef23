#include "core/snapshot.hpp"

#include <array>
#include <utility>

namespace gf::core {

std::string_view to_string(Health h) noexcept {
  switch (h) {
    case Health::Ok: return "ok";
    case Health::Lost: return "lost";
    case Health::Error: return "error";
  }
  return "error";
}

std::string_view to_string(ProcessKind k) noexcept {
  switch (k) {
    case ProcessKind::Compute: return "compute";
    case ProcessKind::Graphics: return "graphics";
    case ProcessKind::ComputeGraphics: return "compute+graphics";
    case ProcessKind::Mps: return "mps";
  }
  return "compute";
}

std::vector<std::string_view> clock_event_names(std::uint64_t mask) {
  // Bit values of NVML's nvmlClocksEventReason* constants.
  static constexpr std::array<std::pair<std::uint64_t, std::string_view>, 9> kNames{{
      {0x1, "gpu_idle"},
      {0x2, "applications_clocks_setting"},
      {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},
      {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"},
      {0x80, "hw_power_brake_slowdown"},
      {0x100, "display_clock_setting"},
  }};
  std::vector<std::string_view> out;
  for (const auto& [bit, name] : kNames)
    if (mask & bit) out.push_back(name);
  return out;
}

}  // namespace gf::core
