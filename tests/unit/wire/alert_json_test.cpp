#include "wire/alert_json.hpp"

#include <gtest/gtest.h>

#include <locale>

#include "config/alert_config.hpp"

namespace gf::wire {
namespace {

using core::AlertKind;
using nlohmann::json;

core::Alert sample_alert() {
  core::Alert a;
  a.id = "high_memory_usage_alert:GPU-a";
  a.kind = AlertKind::HighMemoryUsage;
  a.gpu_index = 3;
  a.gpu_uuid = "GPU-a";
  a.severity = "warning";
  a.message = "GPU 3 memory 97.5 % used (975 of 1000 MiB), at or above 95 % for 60 s";
  a.value = 97.5123;
  a.threshold = 95;
  a.started_at = std::chrono::system_clock::time_point(std::chrono::microseconds(1741129370123456LL));
  return a;
}

TEST(AlertJson, FiringShape) {
  const json j = alert_json(sample_alert());
  EXPECT_EQ(j["id"], "high_memory_usage_alert:GPU-a");
  EXPECT_EQ(j["kind"], "high_memory_usage_alert");
  EXPECT_EQ(j["gpu_index"], 3);
  EXPECT_EQ(j["gpu_uuid"], "GPU-a");
  EXPECT_EQ(j["severity"], "warning");
  EXPECT_EQ(j["message"], "GPU 3 memory 97.5 % used (975 of 1000 MiB), at or above 95 % for 60 s");
  EXPECT_DOUBLE_EQ(j["value"].get<double>(), 97.51);
  EXPECT_DOUBLE_EQ(j["threshold"].get<double>(), 95);
  EXPECT_EQ(j["state"], "firing");
  EXPECT_EQ(j["started_at"], "2025-03-04T23:02:50.123456Z");
  ASSERT_TRUE(j.contains("resolved_at"));
  EXPECT_TRUE(j["resolved_at"].is_null());
  EXPECT_FALSE(j.contains("reasons"));
}

TEST(AlertJson, ResolvedEventMessage) {
  core::AlertEvent e{core::AlertEvent::Type::Resolved, sample_alert()};
  e.alert.resolved_at = e.alert.started_at + std::chrono::seconds(90);
  e.alert.gpu_uuid.clear();
  const json j = alert_event_json(e);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j["event"], "high_memory_usage_alert");
  const json& d = j["data"];
  EXPECT_EQ(d["state"], "resolved");
  EXPECT_EQ(d["resolved_at"], "2025-03-04T23:04:20.123456Z");
  EXPECT_TRUE(d["gpu_uuid"].is_null());
  for (const char* key : {"id", "gpu_index", "gpu_uuid", "severity", "message", "value", "threshold", "state",
                          "started_at", "resolved_at"})
    EXPECT_TRUE(d.contains(key)) << key;
}

TEST(AlertJson, ThrottlingNamesItsReasons) {
  auto a = sample_alert();
  a.kind = AlertKind::Throttling;
  a.value = 0x20 | 0x4;
  const json j = alert_json(a);
  EXPECT_EQ(j["reasons"], json::array({"sw_power_cap", "sw_thermal_slowdown"}));
}

struct AlertCommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST(AlertJson, EngineToWebSocketMessage) {
  // The path the server takes: config section → rules → engine → events → messages.
  auto rules = config::parse_alert_rules(json{{"high_gpu_usage", {{"duration_s", 0}}}});
  ASSERT_TRUE(rules) << rules.error().message;
  core::AlertEngine engine(*rules);
  core::Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(1741129370));
  core::GpuReading g;
  g.uuid = "GPU-a";
  g.utilization_pct = 75u;
  s.gpus.push_back(g);
  const std::locale saved = std::locale::global(std::locale(std::locale::classic(), new AlertCommaDecimal));
  auto events = engine.evaluate(s, std::chrono::steady_clock::time_point{});
  std::string text;
  if (events.size() == 1) text = alert_event_json(events[0]).dump();
  std::locale::global(saved);
  ASSERT_EQ(events.size(), 1u);
  const json j = json::parse(text);
  EXPECT_EQ(j["event"], "high_gpu_usage_alert");
  EXPECT_EQ(j["data"]["id"], "high_gpu_usage_alert:GPU-a");
  EXPECT_EQ(j["data"]["value"], 75.0);
  EXPECT_EQ(j["data"]["threshold"], 50.0);
  EXPECT_EQ(j["data"]["state"], "firing");
  EXPECT_EQ(j["data"]["started_at"], "2025-03-04T23:02:50.000000Z");
  EXPECT_EQ(j["data"]["message"], "GPU 0 utilization 75 %, above 50 %");
}

}  // namespace
}  // namespace gf::wire
