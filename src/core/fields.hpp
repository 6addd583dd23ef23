#pragma once
// The metric fields of a GpuReading, named once. Every place that names, encodes, stores or shows a
// metric (JSON, Prometheus, history, the terminal, OpenAPI, the dashboard) looks the field up here
// instead of spelling it again. Pure data: no I/O, no allocation; safe to use from any thread.
//
// Adding a field: one enumerator, one GpuReading member, and one row in kFields (in enumerator order; a
// static_assert checks it) naming that member for its reader and marker. The encoders pick the row up by themselves;
// the history store's on-disk columns change only through a schema migration (see store/history.cpp).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "core/reading.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

// One value per metric a GpuReading carries. The order is the order documents list them in.
enum class Field : std::uint8_t {
  Utilization,             // GPU (SM) busy, %
  MemoryUtilization,       // memory bandwidth busy, % (not capacity)
  MemoryTotal,             // MiB
  MemoryUsed,              // MiB
  MemoryFree,              // MiB
  MemoryUnattributed,      // MiB used that no process accounts for
  Temperature,             // °C
  PowerDraw,               // W
  PowerLimit,              // W
  Fan,                     // %
  SmClock,                 // MHz (NVML's graphics clock)
  MemClock,                // MHz
  ClockEventReasons,       // NVML bit mask
  PerformanceState,        // 0 = P0 .. 15
  MigMode,                 // bool
  EccUncorrectedVolatile,  // count
  PersistenceMode,         // bool
  Energy,                  // mJ, counter since driver load
  // Health.
  EccCorrectedVolatile,       // count
  EccCorrectedAggregate,      // count
  EccUncorrectedAggregate,    // count
  RetiredPagesSbe,            // pages
  RetiredPagesDbe,            // pages
  RetiredPagesPending,        // bool
  RemappedRowsCorrectable,    // rows
  RemappedRowsUncorrectable,  // rows
  RemappedRowsPending,        // bool
  RemappedRowsFailure,        // bool
  PcieReplay,                 // count
  PowerViolation,             // µs
  ThermalViolation,           // µs
  LastXid,                    // XID number
  // Profiling (NVML GPM).
  ProfGraphicsActive,  // ratio
  ProfSmActive,        // ratio
  ProfSmOccupancy,     // ratio
  ProfTensorActive,    // ratio
  ProfDramActive,      // ratio
  ProfFp64Active,      // ratio
  ProfFp32Active,      // ratio
  ProfFp16Active,      // ratio
  ProfPcieTxBytes,     // B/s
  ProfPcieRxBytes,     // B/s
  ProfNvlinkTxBytes,   // B/s
  ProfNvlinkRxBytes,   // B/s
  SmClockMax,          // MHz (after the others: added later)
  AvailabilityScore,   // 0..1
};

inline constexpr std::size_t kFieldCount = static_cast<std::size_t>(Field::AvailabilityScore) + 1;

// A field's value as read from a GpuReading: an exact integer (unsigned or signed, so a 64-bit counter
// never passes through a double), a double, or the reason there is none. Booleans read as 0/1.
struct FieldValue {
  enum class Kind : std::uint8_t { Absent, Unsigned, Signed, Double };
  Kind kind = Kind::Absent;
  Absent why = Absent::NotQueried;  // meaningful only when kind == Absent
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double d = 0;

  constexpr bool has_value() const noexcept { return kind != Kind::Absent; }
  // The value as a double (history, charts); 0 when absent — check has_value() first.
  constexpr double as_double() const noexcept {
    switch (kind) {
      case Kind::Unsigned: return static_cast<double>(u);
      case Kind::Signed: return static_cast<double>(i);
      case Kind::Double: return d;
      case Kind::Absent: break;
    }
    return 0;
  }
};

constexpr FieldValue unsigned_field(std::uint64_t v) {
  return {FieldValue::Kind::Unsigned, Absent::NotQueried, v, 0, 0};
}
constexpr FieldValue signed_field(std::int64_t v) { return {FieldValue::Kind::Signed, Absent::NotQueried, 0, v, 0}; }
constexpr FieldValue double_field(double v) { return {FieldValue::Kind::Double, Absent::NotQueried, 0, 0, v}; }
constexpr FieldValue absent_field(Absent why) { return {FieldValue::Kind::Absent, why, 0, 0, 0}; }

inline FieldValue field_value(const Reading<unsigned>& r) { return r ? unsigned_field(*r) : absent_field(r.why()); }
inline FieldValue field_value(const Reading<std::uint64_t>& r) {
  return r ? unsigned_field(*r) : absent_field(r.why());
}
inline FieldValue field_value(const Reading<int>& r) { return r ? signed_field(*r) : absent_field(r.why()); }
inline FieldValue field_value(const Reading<double>& r) { return r ? double_field(*r) : absent_field(r.why()); }
inline FieldValue field_value(const Reading<bool>& r) { return r ? unsigned_field(*r ? 1 : 0) : absent_field(r.why()); }

enum class MetricType : std::uint8_t { Gauge, Counter };
std::string_view to_string(MetricType t) noexcept;  // "gauge", "counter"

// How the JSON document writes a present value (absent is always null).
enum class JsonForm : std::uint8_t {
  Number,            // the number as read (integers stay integers); json_decimals > 0 rounds a double
  Boolean,           // true / false
  PerformanceState,  // "P0".."P15"
  EnabledDisabled,   // "enabled" / "disabled"
  ClockEventNames,   // the names of the set bits, e.g. ["gpu_idle"] (see clock_event_names)
};

// How `gpufleet status` shows a field on each GPU's line (app/render.cpp): the value right-aligned to
// `width` characters, doubles with `decimals` decimals; width 0: not on the line. The renderer lays out
// a few columns itself (temperature with utilization, memory and power as "used / limit" pairs); every
// other field with a cell follows them as " | label value unit", in table order, when it has a value,
// and the line's n/a legend names the fields of every cell.
struct StatusCell {
  std::uint8_t width;
  std::uint8_t decimals;
};
inline constexpr StatusCell kNotOnStatusLine{0, 0};

struct FieldInfo {
  Field id;
  // Where the value sits in the GPU's JSON object, "." between nesting levels ("memory.used").
  std::string_view json_key;
  JsonForm json_form;
  int json_decimals;             // > 0: doubles are rounded to this many decimals in JSON
  std::string_view unit;         // "%", "MiB", "°C", "W", "MHz", "mJ", "µs", "B/s"; empty when unitless
  std::string_view label;        // short name for people: table headers, chart titles, legends
  std::string_view description;  // one line
  // Prometheus: DCGM's field name where dcgm-exporter has one, else gpufleet_gpu_*; HELP text as written.
  std::string_view prometheus_name;
  std::string_view prometheus_help;
  MetricType prometheus_type;
  // History: the metric name the history API takes (empty: not queryable) and the SQLite column of
  // samples_raw (empty: not stored). Both are part of stored data and URLs: never rename them.
  std::string_view history_metric;
  std::string_view history_column;
  FieldValue (*read)(const GpuReading&);
  // Makes the field absent for `why` (a backend that cannot read it, a GPU that is gone).
  void (*mark_absent)(GpuReading&, Absent why);
  StatusCell status;  // the terminal's status line
};

// Reader and marker of a GpuReading member, for the rows below.
template <auto Member>
FieldValue read_member(const GpuReading& g) {
  return field_value(g.*Member);
}
template <auto Member>
void mark_member(GpuReading& g, Absent why) {
  g.*Member = std::remove_reference_t<decltype(g.*Member)>::absent(why);
}

// clang-format off
inline constexpr std::array<FieldInfo, kFieldCount> kFields{{
    {Field::Utilization, "utilization", JsonForm::Number, 0, "%", "utilization",
     "GPU (SM) busy time over the driver's last sample period",
     "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", MetricType::Gauge, "utilization", "util",
     &read_member<&GpuReading::utilization_pct>, &mark_member<&GpuReading::utilization_pct>, StatusCell{5, 0}},
    {Field::MemoryUtilization, "memory_utilization", JsonForm::Number, 0, "%", "memory bandwidth",
     "Memory bandwidth busy time (not capacity)",
     "DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", MetricType::Gauge, "memory_utilization", "mem_util",
     &read_member<&GpuReading::memory_utilization_pct>, &mark_member<&GpuReading::memory_utilization_pct>,
     kNotOnStatusLine},
    {Field::MemoryTotal, "memory.total", JsonForm::Number, 0, "MiB", "memory total",
     "Framebuffer memory installed",
     "gpufleet_gpu_memory_total_mib", "Framebuffer memory total (in MiB).", MetricType::Gauge, "", "mem_total",
     &read_member<&GpuReading::memory_total_mib>, &mark_member<&GpuReading::memory_total_mib>, StatusCell{6, 0}},
    {Field::MemoryUsed, "memory.used", JsonForm::Number, 0, "MiB", "memory used",
     "Framebuffer memory in use",
     "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", MetricType::Gauge, "memory_used", "mem_used",
     &read_member<&GpuReading::memory_used_mib>, &mark_member<&GpuReading::memory_used_mib>, StatusCell{6, 0}},
    {Field::MemoryFree, "memory.free", JsonForm::Number, 0, "MiB", "memory free",
     "Framebuffer memory free",
     "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::memory_free_mib>, &mark_member<&GpuReading::memory_free_mib>, kNotOnStatusLine},
    {Field::MemoryUnattributed, "memory.unattributed", JsonForm::Number, 0, "MiB", "memory not attributed",
     "Used memory that no visible process accounts for; a lower bound",
     "gpufleet_gpu_memory_unattributed_mib", "Used memory that no visible process accounts for (in MiB); a lower bound.",
     MetricType::Gauge, "", "",
     &read_member<&GpuReading::memory_unattributed_mib>, &mark_member<&GpuReading::memory_unattributed_mib>,
     kNotOnStatusLine},
    {Field::Temperature, "temperature", JsonForm::Number, 0, "°C", "temperature",
     "GPU core temperature",
     "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", MetricType::Gauge, "temperature", "temp",
     &read_member<&GpuReading::temperature_c>, &mark_member<&GpuReading::temperature_c>, StatusCell{5, 0}},
    {Field::PowerDraw, "power_usage", JsonForm::Number, 2, "W", "power",
     "Power draw of the board",
     "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", MetricType::Gauge, "power", "power",
     &read_member<&GpuReading::power_draw_w>, &mark_member<&GpuReading::power_draw_w>, StatusCell{4, 0}},
    // The NVML backend reads nvmlDeviceGetEnforcedPowerLimit, which is this DCGM field, not
    // DCGM_FI_DEV_POWER_MGMT_LIMIT (the administrator's limit; the two differ when another limiter is lower).
    {Field::PowerLimit, "power_limit", JsonForm::Number, 2, "W", "power limit",
     "Power limit the driver enforces",
     "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
     "Effective power limit that the driver enforces after taking into account all limiters (in W).",
     MetricType::Gauge, "", "",
     &read_member<&GpuReading::power_limit_w>, &mark_member<&GpuReading::power_limit_w>, StatusCell{4, 0}},
    {Field::Fan, "fan_speed", JsonForm::Number, 0, "%", "fan",
     "Fan speed as a share of its maximum",
     "DCGM_FI_DEV_FAN_SPEED", "Fan speed for the device in percent 0-100.", MetricType::Gauge, "fan", "fan",
     &read_member<&GpuReading::fan_pct>, &mark_member<&GpuReading::fan_pct>, StatusCell{3, 0}},
    // We read NVML's graphics clock; DCGM's SM clock reads NVML_CLOCK_SM. On current NVIDIA GPUs the SM and
    // graphics clocks are one domain and read the same, so the graphics clock stands in for it.
    {Field::SmClock, "clock_speeds.graphics", JsonForm::Number, 0, "MHz", "SM clock",
     "Graphics (SM) clock",
     "DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", MetricType::Gauge, "sm_clock", "sm_clock",
     &read_member<&GpuReading::clock_graphics_mhz>, &mark_member<&GpuReading::clock_graphics_mhz>, kNotOnStatusLine},
    {Field::MemClock, "clock_speeds.memory", JsonForm::Number, 0, "MHz", "memory clock",
     "Memory clock",
     "DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", MetricType::Gauge, "mem_clock", "mem_clock",
     &read_member<&GpuReading::clock_memory_mhz>, &mark_member<&GpuReading::clock_memory_mhz>, kNotOnStatusLine},
    // DCGM's current name; /metrics serves the same samples under the old DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
    // too (wire/prometheus.cpp), which existing dashboards and alerts query. DCGM's bits are NVML's.
    {Field::ClockEventReasons, "clock_event_reasons", JsonForm::ClockEventNames, 0, "", "clock event reasons",
     "Why the clocks are held down (NVML clock event reasons)",
     "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Why the clocks are held down now (bit mask of NVML clock event reasons).",
     MetricType::Gauge, "", "",
     &read_member<&GpuReading::clock_event_reasons>, &mark_member<&GpuReading::clock_event_reasons>, kNotOnStatusLine},
    {Field::PerformanceState, "performance_state", JsonForm::PerformanceState, 0, "", "performance state",
     "Performance state, P0 (fastest) to P15",
     "DCGM_FI_DEV_PSTATE", "Performance state (P-State) 0-15. 0=highest.", MetricType::Gauge, "", "",
     &read_member<&GpuReading::performance_state>, &mark_member<&GpuReading::performance_state>, kNotOnStatusLine},
    {Field::MigMode, "mig_mode", JsonForm::EnabledDisabled, 0, "", "MIG mode",
     "Whether Multi-Instance GPU mode is on",
     "DCGM_FI_DEV_MIG_MODE", "MIG mode for the device (1 = enabled, 0 = disabled).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::mig_enabled>, &mark_member<&GpuReading::mig_enabled>, kNotOnStatusLine},
    // Volatile uncorrected = DCGM's volatile double-bit total (the same NVML call).
    {Field::EccUncorrectedVolatile, "ecc_errors_uncorrected_volatile", JsonForm::Number, 0, "", "ECC errors",
     "Uncorrected ECC errors since the driver was loaded",
     "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", MetricType::Counter, "", "",
     &read_member<&GpuReading::ecc_uncorrected_volatile>, &mark_member<&GpuReading::ecc_uncorrected_volatile>,
     kNotOnStatusLine},
    {Field::PersistenceMode, "persistence_mode", JsonForm::Boolean, 0, "", "persistence mode",
     "Whether the driver stays loaded without clients",
     "DCGM_FI_DEV_PERSISTENCE_MODE", "Persistence mode for the device (1 = enabled, 0 = disabled).",
     MetricType::Gauge, "", "",
     &read_member<&GpuReading::persistence_mode>, &mark_member<&GpuReading::persistence_mode>, kNotOnStatusLine},
    // NVML's counter starts when the driver loads; DCGM's help says "since boot", meaning the same.
    {Field::Energy, "energy_consumption_mj", JsonForm::Number, 0, "mJ", "energy",
     "Energy used since the driver was loaded",
     "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since the driver was loaded (in mJ).",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::energy_mj>, &mark_member<&GpuReading::energy_mj>, kNotOnStatusLine},
    // Health. ECC counts: volatile since the driver loaded, aggregate over the board's life. Single-bit errors
    // are the corrected ones, double-bit the uncorrected (DCGM's SBE/DBE names; the same NVML counters).
    {Field::EccCorrectedVolatile, "ecc_errors_corrected_volatile", JsonForm::Number, 0, "", "ECC corrected",
     "Corrected ECC errors since the driver was loaded",
     "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Single-bit (corrected) ECC errors since the driver was loaded.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::ecc_corrected_volatile>, &mark_member<&GpuReading::ecc_corrected_volatile>,
     kNotOnStatusLine},
    {Field::EccCorrectedAggregate, "ecc_errors_corrected_aggregate", JsonForm::Number, 0, "", "ECC corrected (lifetime)",
     "Corrected ECC errors over the board's life",
     "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Single-bit (corrected) ECC errors over the board's life.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::ecc_corrected_aggregate>, &mark_member<&GpuReading::ecc_corrected_aggregate>,
     kNotOnStatusLine},
    {Field::EccUncorrectedAggregate, "ecc_errors_uncorrected_aggregate", JsonForm::Number, 0, "",
     "ECC uncorrected (lifetime)",
     "Uncorrected ECC errors over the board's life",
     "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Double-bit (uncorrected) ECC errors over the board's life.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::ecc_uncorrected_aggregate>, &mark_member<&GpuReading::ecc_uncorrected_aggregate>,
     kNotOnStatusLine},
    // Page retirement is how GPUs before Ampere's A100 handle bad memory; later ones remap rows instead and
    // answer "not supported" here.
    {Field::RetiredPagesSbe, "retired_pages.single_bit", JsonForm::Number, 0, "", "retired pages (SBE)",
     "Memory pages retired after repeated single-bit errors",
     "DCGM_FI_DEV_RETIRED_SBE", "Memory pages retired because of single-bit errors.", MetricType::Counter, "", "",
     &read_member<&GpuReading::retired_pages_sbe>, &mark_member<&GpuReading::retired_pages_sbe>, kNotOnStatusLine},
    {Field::RetiredPagesDbe, "retired_pages.double_bit", JsonForm::Number, 0, "", "retired pages (DBE)",
     "Memory pages retired after a double-bit error",
     "DCGM_FI_DEV_RETIRED_DBE", "Memory pages retired because of double-bit errors.", MetricType::Counter, "", "",
     &read_member<&GpuReading::retired_pages_dbe>, &mark_member<&GpuReading::retired_pages_dbe>, kNotOnStatusLine},
    {Field::RetiredPagesPending, "retired_pages.pending", JsonForm::Boolean, 0, "", "page retirement pending",
     "Whether a page retirement waits for the next driver reload",
     "DCGM_FI_DEV_RETIRED_PENDING", "Whether a page retirement is pending (1) or not (0).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::retired_pages_pending>, &mark_member<&GpuReading::retired_pages_pending>,
     kNotOnStatusLine},
    {Field::RemappedRowsCorrectable, "remapped_rows.correctable", JsonForm::Number, 0, "", "remapped rows (corrected)",
     "Memory rows remapped after correctable errors",
     "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Memory rows remapped because of correctable errors.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::remapped_rows_correctable>, &mark_member<&GpuReading::remapped_rows_correctable>,
     kNotOnStatusLine},
    {Field::RemappedRowsUncorrectable, "remapped_rows.uncorrectable", JsonForm::Number, 0, "",
     "remapped rows (uncorrected)",
     "Memory rows remapped after uncorrectable errors",
     "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Memory rows remapped because of uncorrectable errors.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::remapped_rows_uncorrectable>, &mark_member<&GpuReading::remapped_rows_uncorrectable>,
     kNotOnStatusLine},
    {Field::RemappedRowsPending, "remapped_rows.pending", JsonForm::Boolean, 0, "", "row remap pending",
     "Whether a row remap waits for a GPU reset",
     "DCGM_FI_DEV_ROW_REMAP_PENDING", "Whether a row remap waits for a GPU reset (1) or not (0).", MetricType::Gauge,
     "", "",
     &read_member<&GpuReading::remapped_rows_pending>, &mark_member<&GpuReading::remapped_rows_pending>,
     kNotOnStatusLine},
    {Field::RemappedRowsFailure, "remapped_rows.failure", JsonForm::Boolean, 0, "", "row remap failure",
     "Whether a row remap failed (the GPU needs service)",
     "DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether a row remap has failed (1) or not (0).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::remapped_rows_failure>, &mark_member<&GpuReading::remapped_rows_failure>,
     kNotOnStatusLine},
    {Field::PcieReplay, "pcie_replay_counter", JsonForm::Number, 0, "", "PCIe replays",
     "PCIe transfers the link had to send again",
     "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "PCIe replays (retried transfers) since the driver was loaded.",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::pcie_replay_count>, &mark_member<&GpuReading::pcie_replay_count>, kNotOnStatusLine},
    {Field::PowerViolation, "clock_event_time.power_us", JsonForm::Number, 0, "µs", "held by power",
     "Time the clocks were held down by the power limit",
     "DCGM_FI_DEV_POWER_VIOLATION", "Time the clocks were held down by the power limit (in us).",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::power_violation_us>, &mark_member<&GpuReading::power_violation_us>, kNotOnStatusLine},
    {Field::ThermalViolation, "clock_event_time.thermal_us", JsonForm::Number, 0, "µs", "held by temperature",
     "Time the clocks were held down by temperature",
     "DCGM_FI_DEV_THERMAL_VIOLATION", "Time the clocks were held down by temperature (in us).",
     MetricType::Counter, "", "",
     &read_member<&GpuReading::thermal_violation_us>, &mark_member<&GpuReading::thermal_violation_us>,
     kNotOnStatusLine},
    {Field::LastXid, "last_xid", JsonForm::Number, 0, "", "last XID",
     "The last XID error the driver reported; 0 when none since the agent started",
     "DCGM_FI_DEV_XID_ERRORS", "The last XID error the driver reported (0: none seen).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::last_xid>, &mark_member<&GpuReading::last_xid>, kNotOnStatusLine},
    // Profiling (NVML GPM, Hopper and later), in dcgm-exporter's units: activity as a ratio 0..1 (NVML gives
    // percent), throughput in bytes per second (NVML gives MiB/s), over the interval between two samples.
    {Field::ProfGraphicsActive, "profiling.graphics_active", JsonForm::Number, 4, "", "graphics engine active",
     "Share of time the graphics engine was busy (0..1)",
     "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Share of time the graphics engine was busy (ratio 0..1).",
     MetricType::Gauge, "graphics_active", "prof_gr",
     &read_member<&GpuReading::prof_graphics_active>, &mark_member<&GpuReading::prof_graphics_active>,
     kNotOnStatusLine},
    {Field::ProfSmActive, "profiling.sm_active", JsonForm::Number, 4, "", "SM active",
     "Share of cycles an SM had at least one warp (0..1)",
     "DCGM_FI_PROF_SM_ACTIVE", "Share of cycles an SM had at least one warp resident (ratio 0..1).",
     MetricType::Gauge, "sm_active", "prof_sm",
     &read_member<&GpuReading::prof_sm_active>, &mark_member<&GpuReading::prof_sm_active>, kNotOnStatusLine},
    {Field::ProfSmOccupancy, "profiling.sm_occupancy", JsonForm::Number, 4, "", "SM occupancy",
     "Resident warps as a share of an SM's maximum (0..1)",
     "DCGM_FI_PROF_SM_OCCUPANCY", "Resident warps as a share of the SM maximum (ratio 0..1).",
     MetricType::Gauge, "sm_occupancy", "prof_occ",
     &read_member<&GpuReading::prof_sm_occupancy>, &mark_member<&GpuReading::prof_sm_occupancy>, kNotOnStatusLine},
    {Field::ProfTensorActive, "profiling.tensor_active", JsonForm::Number, 4, "", "tensor active",
     "Share of cycles any tensor pipe was busy (0..1)",
     "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Share of cycles any tensor pipe was busy (ratio 0..1).",
     MetricType::Gauge, "tensor_active", "prof_tensor",
     &read_member<&GpuReading::prof_tensor_active>, &mark_member<&GpuReading::prof_tensor_active>,
     kNotOnStatusLine},
    {Field::ProfDramActive, "profiling.dram_active", JsonForm::Number, 4, "", "DRAM active",
     "Share of cycles the memory interface was moving data (0..1)",
     "DCGM_FI_PROF_DRAM_ACTIVE", "Share of cycles the device memory interface was busy (ratio 0..1).",
     MetricType::Gauge, "dram_active", "prof_dram",
     &read_member<&GpuReading::prof_dram_active>, &mark_member<&GpuReading::prof_dram_active>, kNotOnStatusLine},
    {Field::ProfFp64Active, "profiling.fp64_active", JsonForm::Number, 4, "", "FP64 active",
     "Share of cycles the FP64 pipe was busy (0..1)",
     "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "Share of cycles the FP64 pipe was busy (ratio 0..1).",
     MetricType::Gauge, "fp64_active", "prof_fp64",
     &read_member<&GpuReading::prof_fp64_active>, &mark_member<&GpuReading::prof_fp64_active>, kNotOnStatusLine},
    {Field::ProfFp32Active, "profiling.fp32_active", JsonForm::Number, 4, "", "FP32 active",
     "Share of cycles the FP32 pipe was busy (0..1)",
     "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "Share of cycles the FP32 pipe was busy (ratio 0..1).",
     MetricType::Gauge, "fp32_active", "prof_fp32",
     &read_member<&GpuReading::prof_fp32_active>, &mark_member<&GpuReading::prof_fp32_active>, kNotOnStatusLine},
    {Field::ProfFp16Active, "profiling.fp16_active", JsonForm::Number, 4, "", "FP16 active",
     "Share of cycles the FP16 pipe was busy (0..1)",
     "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "Share of cycles the FP16 pipe was busy (ratio 0..1).",
     MetricType::Gauge, "fp16_active", "prof_fp16",
     &read_member<&GpuReading::prof_fp16_active>, &mark_member<&GpuReading::prof_fp16_active>, kNotOnStatusLine},
    {Field::ProfPcieTxBytes, "profiling.pcie_tx_bytes", JsonForm::Number, 0, "B/s", "PCIe sent",
     "Bytes per second sent over PCIe",
     "DCGM_FI_PROF_PCIE_TX_BYTES", "Bytes per second sent over PCIe, headers included.",
     MetricType::Gauge, "pcie_tx_bytes", "prof_pcie_tx",
     &read_member<&GpuReading::prof_pcie_tx_bytes>, &mark_member<&GpuReading::prof_pcie_tx_bytes>, kNotOnStatusLine},
    {Field::ProfPcieRxBytes, "profiling.pcie_rx_bytes", JsonForm::Number, 0, "B/s", "PCIe received",
     "Bytes per second received over PCIe",
     "DCGM_FI_PROF_PCIE_RX_BYTES", "Bytes per second received over PCIe, headers included.",
     MetricType::Gauge, "pcie_rx_bytes", "prof_pcie_rx",
     &read_member<&GpuReading::prof_pcie_rx_bytes>, &mark_member<&GpuReading::prof_pcie_rx_bytes>, kNotOnStatusLine},
    {Field::ProfNvlinkTxBytes, "profiling.nvlink_tx_bytes", JsonForm::Number, 0, "B/s", "NVLink sent",
     "Bytes per second sent over NVLink",
     "DCGM_FI_PROF_NVLINK_TX_BYTES", "Bytes per second sent over NVLink.",
     MetricType::Gauge, "nvlink_tx_bytes", "prof_nvlink_tx",
     &read_member<&GpuReading::prof_nvlink_tx_bytes>, &mark_member<&GpuReading::prof_nvlink_tx_bytes>,
     kNotOnStatusLine},
    {Field::ProfNvlinkRxBytes, "profiling.nvlink_rx_bytes", JsonForm::Number, 0, "B/s", "NVLink received",
     "Bytes per second received over NVLink",
     "DCGM_FI_PROF_NVLINK_RX_BYTES", "Bytes per second received over NVLink.",
     MetricType::Gauge, "nvlink_rx_bytes", "prof_nvlink_rx",
     &read_member<&GpuReading::prof_nvlink_rx_bytes>, &mark_member<&GpuReading::prof_nvlink_rx_bytes>,
     kNotOnStatusLine},
    // DCGM's field 110. Filled by the intel backend (the GT's max_freq: the limit now in force, which an
    // administrator may have lowered below the hardware's).
    {Field::SmClockMax, "clock_speeds.graphics_max", JsonForm::Number, 0, "MHz", "max SM clock",
     "Highest graphics clock allowed now",
     "DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum supported SM clock for the device (in MHz).", MetricType::Gauge, "", "",
     &read_member<&GpuReading::clock_graphics_max_mhz>, &mark_member<&GpuReading::clock_graphics_max_mhz>,
     kNotOnStatusLine},
    {Field::AvailabilityScore, "availability_score", JsonForm::Number, 4, "", "availability score",
     "How free the GPU is for new work, 0..1: 0.6 free memory share + 0.4 idle share",
     "gpufleet_gpu_availability_score", "How free the GPU is for new work, 0..1 (free memory and idle time, weighted).",
     MetricType::Gauge, "", "",
     &read_member<&GpuReading::availability_score>, &mark_member<&GpuReading::availability_score>, kNotOnStatusLine},
}};
// clang-format on

constexpr bool fields_in_order() {
  for (std::size_t i = 0; i < kFields.size(); ++i)
    if (static_cast<std::size_t>(kFields[i].id) != i) return false;
  return true;
}
static_assert(fields_in_order(), "kFields must list every Field once, in enumerator order");

constexpr const FieldInfo& info(Field f) noexcept { return kFields[static_cast<std::size_t>(f)]; }

// The fields a MIG instance has of its own: rows of kFields (name, JSON key, units, Prometheus family all
// come from the row), read from a MigInstance member instead. A MIG instance's JSON object lists these
// under the row's json_key; /metrics adds one sample per instance, with GPU_I_PROFILE and GPU_I_ID, to the
// families marked `per_instance_series` (as dcgm-exporter does for the framebuffer and profiling fields).
// Adding a per-instance field: one MigInstance member and one row here.
struct MigFieldInfo {
  Field id;
  FieldValue (*read)(const MigInstance&);
  bool per_instance_series;
};
template <auto Member>
FieldValue read_mig_member(const MigInstance& m) {
  return field_value(m.*Member);
}
// clang-format off
inline constexpr std::array kMigFields{
    MigFieldInfo{Field::MemoryTotal, &read_mig_member<&MigInstance::memory_total_mib>, false},
    MigFieldInfo{Field::MemoryUsed, &read_mig_member<&MigInstance::memory_used_mib>, true},
    MigFieldInfo{Field::MemoryFree, &read_mig_member<&MigInstance::memory_free_mib>, true},
    MigFieldInfo{Field::ProfGraphicsActive, &read_mig_member<&MigInstance::prof_graphics_active>, true},
    MigFieldInfo{Field::ProfSmActive, &read_mig_member<&MigInstance::prof_sm_active>, true},
    MigFieldInfo{Field::ProfSmOccupancy, &read_mig_member<&MigInstance::prof_sm_occupancy>, true},
    MigFieldInfo{Field::ProfTensorActive, &read_mig_member<&MigInstance::prof_tensor_active>, true},
    MigFieldInfo{Field::ProfDramActive, &read_mig_member<&MigInstance::prof_dram_active>, true},
    MigFieldInfo{Field::ProfFp64Active, &read_mig_member<&MigInstance::prof_fp64_active>, true},
    MigFieldInfo{Field::ProfFp32Active, &read_mig_member<&MigInstance::prof_fp32_active>, true},
    MigFieldInfo{Field::ProfFp16Active, &read_mig_member<&MigInstance::prof_fp16_active>, true},
    MigFieldInfo{Field::ProfPcieTxBytes, &read_mig_member<&MigInstance::prof_pcie_tx_bytes>, true},
    MigFieldInfo{Field::ProfPcieRxBytes, &read_mig_member<&MigInstance::prof_pcie_rx_bytes>, true},
    MigFieldInfo{Field::ProfNvlinkTxBytes, &read_mig_member<&MigInstance::prof_nvlink_tx_bytes>, true},
    MigFieldInfo{Field::ProfNvlinkRxBytes, &read_mig_member<&MigInstance::prof_nvlink_rx_bytes>, true},
};
// clang-format on

// The per-instance row of `f`; null when a MIG instance has no value of its own for it.
constexpr const MigFieldInfo* mig_field(Field f) noexcept {
  for (const auto& m : kMigFields)
    if (m.id == f) return &m;
  return nullptr;
}
inline FieldValue read(Field f, const GpuReading& g) { return info(f).read(g); }

// Sets every field of `g` absent for `why` (identity, health and processes are left alone): for a GPU
// that could not be read at all, so each field says why it is missing.
inline void mark_all_absent(GpuReading& g, Absent why) {
  for (const auto& f : kFields) f.mark_absent(g, why);
}

// Lookups; nullopt when no field has that name.
std::optional<Field> field_by_json_key(std::string_view key) noexcept;
std::optional<Field> field_by_history_metric(std::string_view metric) noexcept;

// The queryable history metric names, comma-separated in table order ("utilization, memory_utilization, …").
std::string_view history_metric_list() noexcept;
// The field of a history metric name (the history API's `metric`); the error names them all:
// "unknown metric 'gpu_temp' (expected one of utilization, memory_utilization, …)".
Result<Field> parse_history_metric(std::string_view name);

}  // namespace gf::core
