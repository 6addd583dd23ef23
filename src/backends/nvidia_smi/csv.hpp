#pragma once
// Pure parsers for nvidia-smi's `--format=csv,noheader,nounits` output. No I/O, no exceptions out,
// linear in the input: they are fed untrusted text (and random bytes by the fuzz target).
//
// Thread-safety: every function here is pure and may be called from any thread.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvidia_smi {

// The --query-gpu fields this backend knows. ClockThrottleReasons is the pre-535 name of
// ClockEventReasons; both fill GpuReading::clock_event_reasons.
enum class Field : unsigned char {
  Index,
  Uuid,
  PciBusId,
  MemoryTotal,
  MemoryUsed,
  MemoryFree,
  UtilizationGpu,
  UtilizationMemory,
  TemperatureGpu,
  PowerDraw,
  PowerLimit,
  FanSpeed,
  ClocksGraphics,
  ClocksMemory,
  PState,
  ClockEventReasons,
  ClockThrottleReasons,
  MigModeCurrent,
  EccUncorrectedVolatileTotal,
  PersistenceMode,
  // Health (issue 21): the ECC totals and retired pages nvidia-smi's --query-gpu knows. Remapped rows
  // need --query-remapped-rows (a second process per collection: not read), XIDs have no query.
  EccCorrectedVolatileTotal,
  EccCorrectedAggregateTotal,
  EccUncorrectedAggregateTotal,
  RetiredPagesSbe,
  RetiredPagesDbe,
  RetiredPagesPending,
  DriverVersion,
  Name,
};

// The name nvidia-smi knows the field by ("memory.used").
std::string_view field_name(Field f) noexcept;
std::optional<Field> field_from_name(std::string_view name) noexcept;

// The query lists, in the order they are tried: newest driver first. Each ends with Name (free text
// that may contain commas, so it must be the last column).
std::span<const Field> current_fields() noexcept;   // clocks_event_reasons.active (drivers >= 535)
std::span<const Field> throttle_fields() noexcept;  // clocks_throttle_reasons.active (older drivers)
std::span<const Field> basic_fields() noexcept;     // no reasons, MIG or ECC (very old drivers)

// "index,uuid,…,name" for --query-gpu=.
std::string join_fields(std::span<const Field> columns);

struct GpuTable {
  std::vector<core::GpuReading> gpus;
  std::string driver_version;  // from the first GPU that reports it; empty when none does
};

// Parses --query-gpu output whose columns are `columns`, in that order. When the last column is Name,
// the line is split at the first columns.size()-1 commas and the rest is the name. Blank lines are
// skipped. Values in brackets become absent readings ([N/A] Unavailable, [Not Supported] NotSupported,
// [Insufficient Permissions] NoPermission); [GPU requires reset] and [Unknown Error] mark the GPU's
// health Error, [GPU is lost] marks it Lost. Anything else that is not a valid value (a wrong number
// of columns, text in a number) is an error naming the line.
Result<GpuTable> parse_gpu_lines(std::string_view text, std::span<const Field> columns);

// The columns of --query-compute-apps, name last for the same reason as above.
inline constexpr std::string_view kComputeAppsQuery = "gpu_uuid,pid,used_memory,process_name";

struct ComputeApp {
  std::string gpu_uuid;
  core::GpuProcess process;  // kind Compute; name is the basename of process_name
};

// Parses --query-compute-apps output (columns as in kComputeAppsQuery). "No running processes found"
// and empty text give no processes. used_memory in brackets gives nullopt; a row whose pid is in
// brackets is skipped (it cannot be attributed to anything).
Result<std::vector<ComputeApp>> parse_compute_apps(std::string_view text);

// The field named in nvidia-smi's `Field "x" is not a valid field to query.`: nullopt when `text`
// holds no such complaint, an empty string when it does but the name cannot be read.
std::optional<std::string> rejected_field(std::string_view text);

}  // namespace gf::backends::nvidia_smi
