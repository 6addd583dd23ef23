#pragma once
// The metric fields of a GpuReading, named once. Every place that names, encodes, stores or shows a
// metric (JSON, Prometheus, history, the terminal, OpenAPI, the dashboard) looks the field up here
// instead of spelling it again. Pure data: no I/O.
#include <cstdint>
#include <optional>
#include <string_view>

namespace gf::core {

// One value per metric a GpuReading carries. The order is the order documents list them in.
enum class Field : std::uint8_t {
  Utilization,          // GPU (SM) busy, %
  MemoryUtilization,    // memory bandwidth busy, % (not capacity)
  MemoryTotal,          // MiB
  MemoryUsed,           // MiB
  MemoryFree,           // MiB
  MemoryUnattributed,   // MiB used that no process accounts for
  Temperature,          // °C
  PowerDraw,            // W
  PowerLimit,           // W
  Fan,                  // %
  SmClock,              // MHz (NVML's graphics clock)
  MemClock,             // MHz
  ClockEventReasons,    // NVML bit mask
  PerformanceState,     // 0 = P0 .. 15
  MigMode,              // bool
  EccUncorrectedVolatile,  // count
  PersistenceMode,      // bool
  Energy,               // mJ, counter since driver load
  AvailabilityScore,    // 0..1
};

inline constexpr std::size_t kFieldCount = static_cast<std::size_t>(Field::AvailabilityScore) + 1;

}  // namespace gf::core
