#pragma once
// The config file's "alerts" section in: alert rules (their JSON out is wire/alert_json.hpp).
// Pure functions: no I/O, numbers locale-independent.
#include <nlohmann/json.hpp>
#include <vector>

#include "core/alerts.hpp"
#include "core/result.hpp"

namespace gf::config {

// Reads the "alerts" section of the config file, e.g.
//   {"high_gpu_usage": {"enabled": true, "threshold": 50, "duration_s": 30, "severity": "warning"},
//    "temperature": {"threshold": 90}, "gpu_lost": false,
//    "throttling": {"reasons": ["sw_thermal_slowdown", "hw_thermal_slowdown"], "duration_s": 120}}
// Keys are rule names (core::rule_name: high_gpu_usage, temperature, memory_usage, power_limit, gpu_lost,
// ecc_errors, throttling), or the event name with or without "_alert". A rule is an object with any of
//   enabled     bool
//   threshold   number in the rule's unit (see core/alerts.hpp): 0..100 for high_gpu_usage and
//               memory_usage, > 0 for power_limit, an integer >= 1 for ecc_errors, a positive integer bit
//               mask for throttling; gpu_lost takes none
//   duration_s  number >= 0 (fractions allowed, kept to the millisecond)
//   severity    "warning" | "critical"
//   reasons     throttling only, instead of threshold: clock-event reason names (core::clock_event_names)
// or a bare bool, short for {"enabled": bool}. Omitted rules and fields keep their defaults; a null
// section gives the defaults. Returns one rule per kind, in core::kAlertKinds order.
// Unknown rule names, unknown fields, wrong types and out-of-range values are errors naming the key:
//   "alerts.temperature.threshold: expected a number, got string".
Result<std::vector<core::AlertRule>> parse_alert_rules(const nlohmann::json& alerts_section);

}  // namespace gf::config
