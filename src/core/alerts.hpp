#pragma once
// Alert engine: threshold rules over the collected snapshots, with pending, firing and resolved states.
// Pure: no I/O, no clock, no JSON. The caller feeds every snapshot with the steady time it was taken
// (durations) — the snapshot's own wall timestamp stamps started_at / resolved_at — and publishes the
// returned events (the server pushes them on the WebSocket as {"event": event_name(kind), "data": …},
// see wire/alert_json.hpp).
//
// Thread-safety: none. One AlertEngine belongs to one thread (the server's collection loop); firing()
// returns copies, so the loop may hand them to other threads.
//
// The rules and their defaults (default_alert_rules(); every threshold, duration, severity and enabled
// flag is configurable, see config::parse_alert_rules):
//
//   config key      event                    condition                            default
//   high_gpu_usage  high_gpu_usage_alert     utilization_pct >  threshold %       50,   30 s, warning
//   temperature     high_temperature_alert   temperature_c   >= threshold °C      85,   60 s, critical
//   memory_usage    high_memory_usage_alert  used/total      >= threshold %       95,   60 s, warning
//   power_limit     power_limit_alert        draw/limit      >= threshold %       95,   60 s, warning
//   gpu_lost        gpu_lost_alert           health == Health::Lost               -,     0 s, critical
//   ecc_errors      ecc_error_alert          volatile uncorrected count rose by   1,   300 s quiet, critical
//                                            >= threshold since the last sample
//   throttling      throttling_alert         clock_event_reasons & threshold      0xE4, 60 s, warning
//                                            (threshold is the reason bit mask)
//   xid_errors      xid_error_alert          a critical XID listed (48, 62, 64,   -,     0 s, critical
//                                            74, 79, 95, 119, 120: core/gpu_health.hpp)
//   row_remap_failure row_remap_failure_alert remapped_rows_failure is true       -,     0 s, critical
// (kinds in that order: HighGpuUsage, HighTemperature, HighMemoryUsage, PowerNearLimit, GpuLost, EccErrors,
// Throttling, XidErrors, RowRemapFailure).
//
// ecc_errors watches the volatile uncorrected count; on a GPU that reports no volatile count it watches
// the aggregate (lifetime) uncorrected count instead. xid_errors holds while the GPU's reading lists a
// critical XID — the backend keeps those until they are cleared (an operator's health clear, a GPU back
// from lost, an agent restart: core/gpu_health.hpp), so the alert stays firing until then (value: the
// newest critical XID); application faults (13, 31, 43, …) never fire it.
//
// high_gpu_usage keeps the seed's rule (strictly above 50 %, matching the inclusive 50 % ceiling that
// still counts as available), but waits 30 s: the seed pushed a message on every 5-second update and
// had no state; with state, a 0 s duration would fire and resolve on every dip of a bursty load.
// Configure duration_s: 0 for the seed's immediacy.
// Throttling watches sw_power_cap (0x4), sw_thermal_slowdown (0x20), hw_thermal_slowdown (0x40) and
// hw_power_brake_slowdown (0x80): the reasons that mean the GPU is slower than it should be.
//
// Semantics:
// - Pending: a condition must be seen to hold in every sample from its first sighting until `duration`
//   has passed (steady time) before the alert fires; a sample where it does not hold resets it.
//   duration 0 fires on the first sample that meets the condition.
// - One Fired event per episode, then one Resolved event when a sample shows the condition no longer
//   holds. No hysteresis: after a resolve the condition must hold for the whole duration again, so a
//   value hovering at the threshold opens at most one episode per `duration`.
// - Unknown is not fine: a sample where the needed reading is absent (or the GPU is not Health::Ok)
//   neither fires, resolves nor resets a pending condition. Its clock keeps running, so a condition
//   seen at t0 and again at t0 + duration fires even if the samples between had no value.
// - EccErrors fires when the count rose by at least `threshold` since the previous sample that had one
//   (the first sample only sets the baseline; a drop — driver reload, reset — re-baselines), and
//   resolves once `duration` has passed without a further rise, judged on a sample that has the count.
//   Any rise while firing adds to the alert's value and restarts the quiet period.
// - GpuLost fires at once (its duration is honoured if configured) on Health::Lost, and resolves when the
//   GPU is reported with any other health (Error included: it answers again). Health::Error alone (a
//   failed query, "requires reset") does not fire it; for the other rules it is unknown, as above.
// - A GPU missing from a snapshot has its alerts resolved (resolved_at = that snapshot's timestamp) and
//   its pending and ECC state forgotten — except GpuLost, which stays firing until the GPU comes back.
// - GPUs are told apart by uuid (by "gpu-<index>" when the uuid is empty); gpu_index follows the latest
//   snapshot.
// - While firing, value and message follow the latest sample that still meets the condition. A Resolved
//   event carries the value that ended it (when there is one) and a message saying so.
// - started_at is the wall time of the sample on which the alert fired (as Prometheus' StartsAt).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/snapshot.hpp"

namespace gf::core {

enum class AlertKind : unsigned char {
  HighGpuUsage,
  HighTemperature,
  HighMemoryUsage,
  PowerNearLimit,
  GpuLost,
  EccErrors,
  Throttling,
  XidErrors,
  RowRemapFailure,
};
inline constexpr std::array<AlertKind, 9> kAlertKinds{
    AlertKind::HighGpuUsage,   AlertKind::HighTemperature, AlertKind::HighMemoryUsage,
    AlertKind::PowerNearLimit, AlertKind::GpuLost,         AlertKind::EccErrors,
    AlertKind::Throttling,     AlertKind::XidErrors,       AlertKind::RowRemapFailure};

// The WebSocket event name: "high_gpu_usage_alert", "high_temperature_alert", …
std::string_view event_name(AlertKind k) noexcept;
// The key of the rule in the config file's "alerts" section: "high_gpu_usage", "temperature", …
std::string_view rule_name(AlertKind k) noexcept;
// Accepts the config key and the event name with or without "_alert" ("high_temperature").
std::optional<AlertKind> alert_kind_from_name(std::string_view name) noexcept;

// Reason bits watched by the default throttling rule: sw/hw thermal slowdown, sw power cap, hw power brake.
inline constexpr std::uint64_t kThrottleReasonsMask = 0x20 | 0x40 | 0x4 | 0x80;

struct AlertRule {
  AlertKind kind = AlertKind::HighGpuUsage;
  bool enabled = true;
  // Units by kind: % (HighGpuUsage, HighMemoryUsage; PowerNearLimit: % of the limit), °C (HighTemperature),
  // new errors per sample (EccErrors), reason bit mask (Throttling, an integer); unused by GpuLost,
  // XidErrors and RowRemapFailure.
  double threshold = 0;
  // Hold time before firing; for EccErrors the quiet time before resolving.
  std::chrono::milliseconds duration{0};
  std::string severity = "warning";  // "warning" | "critical"
};

// One rule per kind, in kAlertKinds order, with the defaults tabled above.
std::vector<AlertRule> default_alert_rules();
AlertRule default_alert_rule(AlertKind k);

struct Alert {
  std::string id;  // "<event name>:<gpu uuid>" — the same for every episode of this rule on this GPU
  AlertKind kind = AlertKind::HighGpuUsage;
  unsigned gpu_index = 0;
  std::string gpu_uuid;
  std::string severity;
  std::string message;  // for people, with the value: "GPU 0 temperature 88 °C, at or above 85 °C for 60 s"
  double value = 0;     // in the rule's unit (GpuLost: 1 lost, 0 back; EccErrors: new errors this episode;
                        // XidErrors: the newest critical XID; RowRemapFailure: 1)
  double threshold = 0;
  std::chrono::system_clock::time_point started_at{};
  std::optional<std::chrono::system_clock::time_point> resolved_at;  // set on the Resolved event only
};

// Which alert episodes a read wants: the newest `limit` of one GPU (or all) that overlap [since, until).
// An episode overlaps when it started before `until` and had not ended before `since`; one still firing
// overlaps every range that ends after its start. A bound left out is open.
struct AlertQuery {
  std::size_t limit = 100;
  std::optional<unsigned> gpu;
  std::optional<std::chrono::system_clock::time_point> since;
  std::optional<std::chrono::system_clock::time_point> until;

  // The newest n episodes of every GPU, at any time.
  static AlertQuery newest(std::size_t n) {
    AlertQuery q;
    q.limit = n;
    return q;
  }
  bool matches(const Alert& a) const noexcept;
};

struct AlertEvent {
  enum class Type : unsigned char { Fired, Resolved };
  Type type = Type::Fired;
  Alert alert;
};

class AlertEngine {
 public:
  // Throws std::invalid_argument for two rules of one kind or a negative duration (programming errors;
  // config input is validated by config::parse_alert_rules). Missing kinds are simply not evaluated.
  explicit AlertEngine(std::vector<AlertRule> rules = default_alert_rules());

  // Feeds one snapshot taken at `now` (steady; s.timestamp is its wall time). Returns what changed:
  // Fired and Resolved events, in snapshot GPU order and rule order, then those of GPUs that went missing.
  // Feed only snapshots that were collected: a failed collection is not an empty snapshot (which would
  // resolve every GPU's alerts) — skip it. `now` should not go backwards; if it does, pending conditions
  // simply wait longer.
  std::vector<AlertEvent> evaluate(const Snapshot& s, std::chrono::steady_clock::time_point now);

  // Alerts firing now, by GPU index then rule order.
  std::vector<Alert> firing() const;
  const std::vector<AlertRule>& rules() const noexcept { return rules_; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  struct RuleState {
    std::optional<SteadyTime> pending_since;
    std::optional<Alert> firing;
  };
  struct GpuState {
    unsigned index = 0;
    std::string key;  // uuid, or "gpu-<index>"
    std::array<RuleState, kAlertKinds.size()> rules;
    std::optional<std::uint64_t> ecc_last;        // last known volatile uncorrected count
    std::optional<SteadyTime> ecc_last_increase;  // when it last rose by >= threshold
  };
  struct Verdict;  // what one sample says about one rule (alerts.cpp)

  static Verdict judge(const AlertRule& rule, const GpuReading& g);
  static void apply(const AlertRule& rule, const Verdict& v, const GpuReading& g, GpuState& st, const Snapshot& s,
                    SteadyTime now, std::vector<AlertEvent>& out);
  static void apply_ecc(const AlertRule& rule, const GpuReading& g, GpuState& st, const Snapshot& s, SteadyTime now,
                        std::vector<AlertEvent>& out);

  std::vector<AlertRule> rules_;
  std::array<std::size_t, kAlertKinds.size()> rule_pos_{};  // position in rules_ by kind (size(): none)
  std::map<std::string, GpuState> gpus_;                    // by uuid (or "gpu-<index>")
};

}  // namespace gf::core
