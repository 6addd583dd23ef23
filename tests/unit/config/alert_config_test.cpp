#include "config/alert_config.hpp"

#include <gtest/gtest.h>

#include <locale>

namespace gf::config {
namespace {

using namespace std::chrono_literals;
using core::AlertKind;
using nlohmann::json;

const core::AlertRule& rule(const std::vector<core::AlertRule>& rules, AlertKind k) {
  for (const auto& r : rules)
    if (r.kind == k) return r;
  throw std::runtime_error("no rule of that kind");
}

// The error of parsing `section`, or a note that it parsed.
std::string error_of(const json& section) {
  auto r = parse_alert_rules(section);
  return r ? std::string("(parsed)") : r.error().message;
}

TEST(AlertConfig, AbsentOrEmptySectionGivesTheDefaults) {
  for (const json& section : {json(nullptr), json::object()}) {
    auto r = parse_alert_rules(section);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->size(), core::kAlertKinds.size());
    for (std::size_t i = 0; i < r->size(); ++i) {
      const auto d = core::default_alert_rule(core::kAlertKinds[i]);
      EXPECT_EQ((*r)[i].kind, d.kind);
      EXPECT_EQ((*r)[i].enabled, d.enabled);
      EXPECT_EQ((*r)[i].threshold, d.threshold);
      EXPECT_EQ((*r)[i].duration, d.duration);
      EXPECT_EQ((*r)[i].severity, d.severity);
    }
  }
}

TEST(AlertConfig, OverridesWhatIsGivenAndKeepsTheRest) {
  auto r = parse_alert_rules(json::parse(R"({
    "high_gpu_usage": {"enabled": true, "threshold": 70, "duration_s": 0, "severity": "critical"},
    "temperature": {"threshold": 90.5, "duration_s": 1.5},
    "gpu_lost": false,
    "ecc_error_alert": {"threshold": 2},
    "throttling": {"reasons": ["sw_thermal_slowdown", "hw_power_brake_slowdown"], "duration_s": 120}
  })"));
  ASSERT_TRUE(r) << r.error().message;
  const auto& usage = rule(*r, AlertKind::HighGpuUsage);
  EXPECT_TRUE(usage.enabled);
  EXPECT_EQ(usage.threshold, 70);
  EXPECT_EQ(usage.duration, 0ms);
  EXPECT_EQ(usage.severity, "critical");
  const auto& temp = rule(*r, AlertKind::HighTemperature);
  EXPECT_EQ(temp.threshold, 90.5);
  EXPECT_EQ(temp.duration, 1500ms);
  EXPECT_EQ(temp.severity, "critical");  // kept
  EXPECT_FALSE(rule(*r, AlertKind::GpuLost).enabled);
  EXPECT_EQ(rule(*r, AlertKind::EccErrors).threshold, 2);
  EXPECT_EQ(rule(*r, AlertKind::EccErrors).duration, 300s);
  const auto& thr = rule(*r, AlertKind::Throttling);
  EXPECT_EQ(thr.threshold, 0x20 | 0x80);
  EXPECT_EQ(thr.duration, 120s);
  const auto& mem = rule(*r, AlertKind::HighMemoryUsage);  // not mentioned: the default
  EXPECT_EQ(mem.threshold, 95);
  EXPECT_EQ(mem.duration, 60s);
  EXPECT_TRUE(mem.enabled);
  // The result is a valid engine configuration.
  EXPECT_NO_THROW(core::AlertEngine{*r});
}

TEST(AlertConfig, ThrottlingTakesABitMaskToo) {
  auto r = parse_alert_rules(json{{"throttling", {{"threshold", 8}}}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(rule(*r, AlertKind::Throttling).threshold, 8);
}

TEST(AlertConfig, ErrorsNameTheKey) {
  EXPECT_EQ(error_of(json::array()), "alerts: expected an object, got array");
  EXPECT_EQ(error_of(json{{"temprature", {{"threshold", 90}}}}),
            "alerts.temprature: unknown alert rule (known: high_gpu_usage, temperature, memory_usage, power_limit, "
            "gpu_lost, ecc_errors, throttling, xid_errors, row_remap_failure)");
  EXPECT_EQ(error_of(json{{"xid_errors", {{"threshold", 79}}}}),
            "alerts.xid_errors.threshold: xid_errors has no threshold (it fires on XID 48, 62, 64, 74, 79, 95, 119 "
            "or 120)");
  EXPECT_EQ(error_of(json{{"temperature", {{"threshold", "90"}}}}),
            "alerts.temperature.threshold: expected a number, got string");
  EXPECT_EQ(error_of(json{{"temperature", 90}}), "alerts.temperature: expected an object or a boolean, got number");
  EXPECT_EQ(error_of(json{{"high_gpu_usage", {{"enabled", "yes"}}}}),
            "alerts.high_gpu_usage.enabled: expected a boolean, got string");
  EXPECT_EQ(error_of(json{{"high_gpu_usage", {{"duration_s", "30s"}}}}),
            "alerts.high_gpu_usage.duration_s: expected a number of seconds, got string");
  EXPECT_EQ(error_of(json{{"high_gpu_usage", {{"duration_s", -1}}}}),
            "alerts.high_gpu_usage.duration_s: seconds, 0 or more (at most ten years), got -1");
  EXPECT_EQ(error_of(json{{"memory_usage", {{"severity", "loud"}}}}),
            "alerts.memory_usage.severity: \"warning\" or \"critical\", got \"loud\"");
  EXPECT_EQ(error_of(json{{"temperature", {{"treshold", 90}}}}),
            "alerts.temperature.treshold: unknown field (known: enabled, threshold, duration_s, severity)");
  EXPECT_EQ(error_of(json{{"temperature", {{"reasons", json::array({"sw_power_cap"})}}}}),
            "alerts.temperature.reasons: unknown field (known: enabled, threshold, duration_s, severity)");
}

TEST(AlertConfig, OutOfRangeThresholdsAreErrors) {
  EXPECT_EQ(error_of(json{{"high_gpu_usage", {{"threshold", 150}}}}),
            "alerts.high_gpu_usage.threshold: a percentage, 0 to 100, got 150");
  EXPECT_EQ(error_of(json{{"memory_usage", {{"threshold", -5}}}}),
            "alerts.memory_usage.threshold: a percentage, 0 to 100, got -5");
  EXPECT_EQ(error_of(json{{"power_limit", {{"threshold", 0}}}}),
            "alerts.power_limit.threshold: a percentage of the power limit above 0, got 0");
  EXPECT_EQ(error_of(json{{"gpu_lost", {{"threshold", 1}}}}),
            "alerts.gpu_lost.threshold: gpu_lost has no threshold (it fires when the driver reports the GPU lost)");
  EXPECT_EQ(error_of(json{{"ecc_errors", {{"threshold", 0.5}}}}),
            "alerts.ecc_errors.threshold: a whole number of new errors, at least 1, got 0.5");
  EXPECT_EQ(error_of(json{{"throttling", {{"threshold", 2.5}}}}),
            "alerts.throttling.threshold: a clock-event reason bit mask (a positive integer), got 2.5");
  EXPECT_EQ(error_of(json{{"power_limit", {{"threshold", 105}}}}), "(parsed)");  // above the limit is allowed
}

TEST(AlertConfig, ThrottlingReasonsAreChecked) {
  EXPECT_EQ(error_of(json{{"throttling", {{"reasons", json::array({"sw_power_cap", "too_hot"})}}}})
                .rfind("alerts.throttling.reasons[1]: unknown reason \"too_hot\" (known: gpu_idle, ", 0),
            0u);
  EXPECT_EQ(error_of(json{{"throttling", {{"reasons", json::array({"sw_power_cap", 4})}}}}),
            "alerts.throttling.reasons[1]: expected a string, got number");
  EXPECT_EQ(error_of(json{{"throttling", {{"reasons", "sw_power_cap"}}}}),
            "alerts.throttling.reasons: expected an array of reason names, got string");
  EXPECT_EQ(error_of(json{{"throttling", {{"reasons", json::array()}}}}),
            "alerts.throttling.reasons: name at least one reason (or disable the rule)");
  EXPECT_EQ(error_of(json{{"throttling", {{"reasons", json::array({"sw_power_cap"})}, {"threshold", 4}}}}),
            "alerts.throttling: give either threshold or reasons, not both");
}

TEST(AlertConfig, AliasesOfOneRuleMayNotBothBeGiven) {
  auto r = parse_alert_rules(json{{"high_temperature_alert", {{"threshold", 88}}}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(rule(*r, AlertKind::HighTemperature).threshold, 88);
  // nlohmann orders object keys, so "high_temperature" is met before "temperature".
  EXPECT_EQ(error_of(json{{"temperature", {{"threshold", 80}}}, {"high_temperature", {{"threshold", 90}}}}),
            "alerts.temperature: the same rule as alerts.high_temperature; give it once");
}

}  // namespace
}  // namespace gf::config
