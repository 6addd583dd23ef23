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
  AvailabilityScore,       // 0..1
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
  std::string_view unit;         // "%", "MiB", "°C", "W", "MHz", "mJ"; empty when unitless
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
    // The field's old name (DCGM 3.3 renamed it DCGM_FI_DEV_CLOCKS_EVENT_REASONS and kept this one as an
    // alias); the old name is the one existing dashboards and alerts query. DCGM's bits are NVML's.
    {Field::ClockEventReasons, "clock_event_reasons", JsonForm::ClockEventNames, 0, "", "clock event reasons",
     "Why the clocks are held down (NVML clock event reasons)",
     "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bit mask of NVML clock event reasons).",
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

}  // namespace gf::core
