// The health verdict (core/gpu_health) and the alert rules that follow it: xid_errors, row_remap_failure,
// and ecc_errors on a GPU that keeps only the lifetime count.
#include <gtest/gtest.h>

#include "core/alerts.hpp"
#include "core/gpu_health.hpp"

namespace gf::core {
namespace {

using namespace std::chrono_literals;

const std::chrono::system_clock::time_point kHealthWall{std::chrono::seconds(1'764'000'000)};
const std::chrono::steady_clock::time_point kHealthT0{std::chrono::hours(2000)};

GpuReading healthy_reading(unsigned index = 0) {
  GpuReading g;
  g.index = index;
  g.uuid = "GPU-h" + std::to_string(index);
  g.last_xid = 0u;
  g.remapped_rows_failure = false;
  g.ecc_uncorrected_volatile = std::uint64_t{0};
  return g;
}

GpuReading with_xids(std::initializer_list<unsigned> xids, GpuReading g = healthy_reading()) {
  for (unsigned x : xids) g.recent_xids.push_back({x, kHealthWall});
  if (xids.size() > 0) g.last_xid = *(xids.end() - 1);
  return g;
}

Snapshot one_gpu_snapshot(GpuReading g) {
  Snapshot s;
  s.timestamp = kHealthWall;
  s.gpus.push_back(std::move(g));
  return s;
}

AlertEngine only_rule(AlertKind kind) {
  auto rules = default_alert_rules();
  for (auto& r : rules) r.enabled = r.kind == kind;
  return AlertEngine(rules);
}

TEST(GpuHealth, AHealthyGpuHasNoProblems) {
  const auto v = judge_health(healthy_reading());
  EXPECT_TRUE(v.healthy);
  EXPECT_TRUE(v.problems.empty());
  EXPECT_TRUE(v.notes.empty());
  EXPECT_TRUE(v.summary.empty());
}

TEST(GpuHealth, EveryCriticalXidMakesItUnhealthyAndIsNamed) {
  for (unsigned xid : kCriticalXids) {
    SCOPED_TRACE(xid);
    const auto v = judge_health(with_xids({xid}));
    EXPECT_FALSE(v.healthy);
    ASSERT_EQ(v.problems.size(), 1u);
    EXPECT_EQ(v.problems[0].code, "xid_" + std::to_string(xid));
    EXPECT_NE(v.problems[0].message.find("XID " + std::to_string(xid)), std::string::npos) << v.problems[0].message;
    EXPECT_EQ(v.summary.rfind("unhealthy: XID " + std::to_string(xid), 0), 0u) << v.summary;
  }
}

TEST(GpuHealth, ApplicationFaultsAreShownButKeepItHealthy) {
  const auto v = judge_health(with_xids({13, 31, 43, 13}));
  EXPECT_TRUE(v.healthy);
  ASSERT_EQ(v.notes.size(), 3u);  // each XID once, newest first
  EXPECT_EQ(v.notes[0].code, "xid_13");
  EXPECT_EQ(v.notes[1].code, "xid_43");
  EXPECT_EQ(v.notes[2].code, "xid_31");
  EXPECT_NE(v.notes[2].message.find("GPU memory page fault"), std::string::npos) << v.notes[2].message;
}

TEST(GpuHealth, TheLastXidAloneCountsWhenNoListIsKept) {
  GpuReading g = healthy_reading(3);
  g.last_xid = 95u;
  const auto v = judge_health(g);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.summary, "unhealthy: XID 95 (uncontained ECC error)");
  EXPECT_NE(v.problems[0].message.find("GPU 3"), std::string::npos);
}

TEST(GpuHealth, RowRemapFailureAndLostAreProblems) {
  GpuReading g = healthy_reading();
  g.remapped_rows_failure = true;
  auto v = judge_health(g);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.problems.at(0).code, "row_remap_failure");
  EXPECT_EQ(v.summary, "unhealthy: row remap failure");

  GpuReading lost = healthy_reading();
  lost.health = Health::Lost;
  lost.health_message = "GPU is lost";
  v = judge_health(lost);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.problems.at(0).code, "gpu_lost");
  EXPECT_EQ(v.summary, "unhealthy: GPU lost");
}

TEST(GpuHealth, AnUnknownRemapStateIsNotAFailure) {
  GpuReading g = healthy_reading();
  g.remapped_rows_failure = Reading<bool>::absent(Absent::NotSupported);
  g.last_xid = Reading<unsigned>::absent(Absent::NoPermission);
  EXPECT_TRUE(judge_health(g).healthy);
}

TEST(GpuHealthAlerts, XidRuleFiresOnACriticalXidOnly) {
  auto engine = only_rule(AlertKind::XidErrors);
  EXPECT_TRUE(engine.evaluate(one_gpu_snapshot(healthy_reading()), kHealthT0).empty());
  EXPECT_TRUE(engine.evaluate(one_gpu_snapshot(with_xids({13, 43})), kHealthT0 + 1s).empty());
  auto events = engine.evaluate(one_gpu_snapshot(with_xids({13, 43, 79})), kHealthT0 + 2s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, AlertEvent::Type::Fired);
  EXPECT_EQ(events[0].alert.kind, AlertKind::XidErrors);
  EXPECT_EQ(events[0].alert.value, 79);
  EXPECT_EQ(events[0].alert.severity, "critical");
  EXPECT_NE(events[0].alert.message.find("XID 79 (GPU has fallen off the bus)"), std::string::npos);
  EXPECT_EQ(event_name(AlertKind::XidErrors), "xid_error_alert");
  // Still listed: still firing, no new event.
  EXPECT_TRUE(engine.evaluate(one_gpu_snapshot(with_xids({13, 43, 79, 13})), kHealthT0 + 3s).empty());
  EXPECT_EQ(engine.firing().size(), 1u);
}

TEST(GpuHealthAlerts, RowRemapFailureFiresAndResolves) {
  auto engine = only_rule(AlertKind::RowRemapFailure);
  GpuReading failed = healthy_reading();
  failed.remapped_rows_failure = true;
  auto events = engine.evaluate(one_gpu_snapshot(failed), kHealthT0);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].alert.kind, AlertKind::RowRemapFailure);
  EXPECT_EQ(rule_name(AlertKind::RowRemapFailure), "row_remap_failure");
  // Unknown neither fires nor resolves.
  GpuReading unknown = healthy_reading();
  unknown.remapped_rows_failure = Reading<bool>::absent(Absent::Error);
  EXPECT_TRUE(engine.evaluate(one_gpu_snapshot(unknown), kHealthT0 + 1s).empty());
  events = engine.evaluate(one_gpu_snapshot(healthy_reading()), kHealthT0 + 2s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, AlertEvent::Type::Resolved);
}

TEST(GpuHealthAlerts, EccRuleWatchesTheLifetimeCountWhenNoVolatileOne) {
  auto engine = only_rule(AlertKind::EccErrors);
  GpuReading g = healthy_reading();
  g.ecc_uncorrected_volatile = Reading<std::uint64_t>::absent(Absent::NotSupported);
  g.ecc_uncorrected_aggregate = std::uint64_t{4};
  EXPECT_TRUE(engine.evaluate(one_gpu_snapshot(g), kHealthT0).empty());  // baseline
  g.ecc_uncorrected_aggregate = std::uint64_t{6};
  auto events = engine.evaluate(one_gpu_snapshot(g), kHealthT0 + 1s);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].alert.value, 2);
  EXPECT_NE(events[0].alert.message.find("lifetime count 6"), std::string::npos) << events[0].alert.message;
}

TEST(GpuHealthAlerts, NewRulesAreConfigurableByName) {
  EXPECT_EQ(alert_kind_from_name("xid_errors"), AlertKind::XidErrors);
  EXPECT_EQ(alert_kind_from_name("row_remap_failure_alert"), AlertKind::RowRemapFailure);
  const auto rules = default_alert_rules();
  EXPECT_EQ(rules.size(), kAlertKinds.size());
  EXPECT_EQ(default_alert_rule(AlertKind::XidErrors).severity, "critical");
}

}  // namespace
}  // namespace gf::core
