#include "core/alerts.hpp"

#include <gtest/gtest.h>

#include <locale>
#include <stdexcept>

namespace gf::core {
namespace {

using namespace std::chrono_literals;
using Type = AlertEvent::Type;

// Fixed time points: steady time drives durations, the snapshot's wall time stamps the alerts.
const std::chrono::steady_clock::time_point kAlertT0{std::chrono::hours(1000)};
const std::chrono::system_clock::time_point kWall0{std::chrono::seconds(1741129370)};

std::chrono::steady_clock::time_point at(double s) {
  return kAlertT0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}
std::chrono::system_clock::time_point wall(double s) {
  return kWall0 + std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(s));
}

// A healthy, quiet GPU: nothing in it meets a default rule.
GpuReading gpu(unsigned index = 0, std::string uuid = "GPU-a") {
  GpuReading g;
  g.index = index;
  g.uuid = std::move(uuid);
  g.name = "NVIDIA H100 80GB HBM3";
  g.utilization_pct = 10u;
  g.temperature_c = 50;
  g.memory_total_mib = std::uint64_t{1000};
  g.memory_used_mib = std::uint64_t{100};
  g.power_draw_w = 100.0;
  g.power_limit_w = 700.0;
  g.clock_event_reasons = std::uint64_t{0};
  g.ecc_uncorrected_volatile = std::uint64_t{0};
  return g;
}

Snapshot snap(double t, std::vector<GpuReading> gpus) {
  Snapshot s;
  s.timestamp = wall(t);
  s.backend = "sim";
  s.gpus = std::move(gpus);
  return s;
}

// The engine with only `kind` enabled, optionally changed by `edit`.
template <class Edit = void (*)(AlertRule&)>
AlertEngine only(
    AlertKind kind, Edit edit = [](AlertRule&) {}) {
  auto rules = default_alert_rules();
  for (auto& r : rules) {
    r.enabled = r.kind == kind;
    if (r.kind == kind) edit(r);
  }
  return AlertEngine(rules);
}

GpuReading with_util(unsigned u, GpuReading g = gpu()) {
  g.utilization_pct = u;
  return g;
}
GpuReading with_temp(int c, GpuReading g = gpu()) {
  g.temperature_c = c;
  return g;
}
GpuReading with_ecc(std::uint64_t n, GpuReading g = gpu()) {
  g.ecc_uncorrected_volatile = n;
  return g;
}
GpuReading with_reasons(std::uint64_t mask, GpuReading g = gpu()) {
  g.clock_event_reasons = mask;
  return g;
}

TEST(AlertRules, DefaultsAreDocumented) {
  const auto rules = default_alert_rules();
  ASSERT_EQ(rules.size(), kAlertKinds.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(rules[i].kind, kAlertKinds[i]);
    EXPECT_TRUE(rules[i].enabled);
  }
  EXPECT_EQ(rules[0].threshold, 50);
  EXPECT_EQ(rules[0].duration, 30s);
  EXPECT_EQ(rules[0].severity, "warning");
  EXPECT_EQ(rules[1].threshold, 85);
  EXPECT_EQ(rules[1].duration, 60s);
  EXPECT_EQ(rules[1].severity, "critical");
  EXPECT_EQ(rules[2].threshold, 95);
  EXPECT_EQ(rules[3].threshold, 95);
  EXPECT_EQ(rules[4].duration, 0s);
  EXPECT_EQ(rules[4].severity, "critical");
  EXPECT_EQ(rules[5].threshold, 1);
  EXPECT_EQ(rules[5].duration, 300s);
  EXPECT_EQ(rules[6].threshold, 0x4 | 0x20 | 0x40 | 0x80);
}

TEST(AlertRules, NamesAndAliases) {
  EXPECT_EQ(event_name(AlertKind::HighGpuUsage), "high_gpu_usage_alert");
  EXPECT_EQ(event_name(AlertKind::HighTemperature), "high_temperature_alert");
  EXPECT_EQ(event_name(AlertKind::HighMemoryUsage), "high_memory_usage_alert");
  EXPECT_EQ(event_name(AlertKind::PowerNearLimit), "power_limit_alert");
  EXPECT_EQ(event_name(AlertKind::GpuLost), "gpu_lost_alert");
  EXPECT_EQ(event_name(AlertKind::EccErrors), "ecc_error_alert");
  EXPECT_EQ(event_name(AlertKind::Throttling), "throttling_alert");
  for (AlertKind k : kAlertKinds) {
    EXPECT_EQ(alert_kind_from_name(rule_name(k)), k);
    EXPECT_EQ(alert_kind_from_name(event_name(k)), k);
  }
  EXPECT_EQ(alert_kind_from_name("high_temperature"), AlertKind::HighTemperature);
  EXPECT_EQ(alert_kind_from_name("temperature"), AlertKind::HighTemperature);
  EXPECT_FALSE(alert_kind_from_name("temprature"));
  EXPECT_FALSE(alert_kind_from_name(""));
}

TEST(AlertEngine, RejectsDuplicateKindsAndNegativeDurations) {
  auto twice = default_alert_rules();
  twice.push_back(default_alert_rule(AlertKind::HighTemperature));
  EXPECT_THROW(AlertEngine{twice}, std::invalid_argument);
  auto negative = default_alert_rules();
  negative[1].duration = -1s;
  EXPECT_THROW(AlertEngine{negative}, std::invalid_argument);
}

TEST(AlertEngine, HighGpuUsageFiresOnlyAfterItsDurationThenResolves) {
  AlertEngine e;  // defaults: > 50 % for 30 s
  EXPECT_TRUE(e.evaluate(snap(0, {with_util(80)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(10, {with_util(80)}), at(10)).empty());
  EXPECT_TRUE(e.evaluate(snap(29.9, {with_util(80)}), at(29.9)).empty());
  EXPECT_TRUE(e.firing().empty());

  auto ev = e.evaluate(snap(30, {with_util(81)}), at(30));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  const Alert& a = ev[0].alert;
  EXPECT_EQ(a.id, "high_gpu_usage_alert:GPU-a");
  EXPECT_EQ(a.kind, AlertKind::HighGpuUsage);
  EXPECT_EQ(a.gpu_index, 0u);
  EXPECT_EQ(a.gpu_uuid, "GPU-a");
  EXPECT_EQ(a.severity, "warning");
  EXPECT_DOUBLE_EQ(a.value, 81);
  EXPECT_DOUBLE_EQ(a.threshold, 50);
  EXPECT_EQ(a.started_at, wall(30));
  EXPECT_FALSE(a.resolved_at);
  EXPECT_EQ(a.message, "GPU 0 utilization 81 %, above 50 % for 30 s");

  // One event per episode; the firing alert follows the latest value.
  EXPECT_TRUE(e.evaluate(snap(40, {with_util(95)}), at(40)).empty());
  ASSERT_EQ(e.firing().size(), 1u);
  EXPECT_DOUBLE_EQ(e.firing()[0].value, 95);
  EXPECT_EQ(e.firing()[0].started_at, wall(30));

  ev = e.evaluate(snap(50, {with_util(20)}), at(50));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.id, "high_gpu_usage_alert:GPU-a");
  EXPECT_EQ(ev[0].alert.resolved_at, wall(50));
  EXPECT_EQ(ev[0].alert.started_at, wall(30));
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 20);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 utilization 20 %, no longer above 50 %");
  EXPECT_TRUE(e.firing().empty());
  EXPECT_TRUE(e.evaluate(snap(60, {with_util(20)}), at(60)).empty());
}

TEST(AlertEngine, HighGpuUsageIsStrictlyAboveTheThreshold) {
  auto e = only(AlertKind::HighGpuUsage, [](AlertRule& r) { r.duration = 0s; });  // the seed's immediacy
  EXPECT_TRUE(e.evaluate(snap(0, {with_util(50)}), at(0)).empty());
  auto ev = e.evaluate(snap(1, {with_util(51)}), at(1));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 utilization 51 %, above 50 %");  // no "for 0 s"
}

TEST(AlertEngine, PendingResetsWhenTheConditionBreaksEarly) {
  AlertEngine e;
  EXPECT_TRUE(e.evaluate(snap(0, {with_util(80)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(20, {with_util(80)}), at(20)).empty());
  EXPECT_TRUE(e.evaluate(snap(25, {with_util(40)}), at(25)).empty());  // breaks: no Resolved, nothing fired
  EXPECT_TRUE(e.evaluate(snap(30, {with_util(80)}), at(30)).empty());  // pending again from 30
  EXPECT_TRUE(e.evaluate(snap(50, {with_util(80)}), at(50)).empty());  // 20 s, not 30
  auto ev = e.evaluate(snap(60, {with_util(80)}), at(60));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_EQ(ev[0].alert.started_at, wall(60));
}

TEST(AlertEngine, EachEpisodeFiresOnceWithTheSameId) {
  auto e = only(AlertKind::HighTemperature, [](AlertRule& r) { r.duration = 0s; });
  std::vector<std::string> log;
  for (int t = 0; t < 8; ++t) {
    const int c = (t / 2) % 2 == 0 ? 90 : 70;  // 90 90 70 70 90 90 70 70
    for (auto& ev : e.evaluate(snap(t, {with_temp(c)}), at(t)))
      log.push_back((ev.type == Type::Fired ? "fired@" : "resolved@") + std::to_string(t) + " " + ev.alert.id);
  }
  EXPECT_EQ(log, (std::vector<std::string>{
                     "fired@0 high_temperature_alert:GPU-a", "resolved@2 high_temperature_alert:GPU-a",
                     "fired@4 high_temperature_alert:GPU-a", "resolved@6 high_temperature_alert:GPU-a"}));
}

TEST(AlertEngine, TemperatureIsInclusiveAndWaitsItsMinute) {
  AlertEngine e;
  EXPECT_TRUE(e.evaluate(snap(0, {with_temp(85)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(59, {with_temp(86)}), at(59)).empty());
  auto ev = e.evaluate(snap(60, {with_temp(85)}), at(60));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::HighTemperature);
  EXPECT_EQ(ev[0].alert.severity, "critical");
  EXPECT_EQ(ev[0].alert.message, "GPU 0 temperature 85 °C, at or above 85 °C for 60 s");
  ev = e.evaluate(snap(61, {with_temp(84)}), at(61));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 temperature 84 °C, back below 85 °C");
}

TEST(AlertEngine, MemoryUsageIsAPercentageOfTotal) {
  AlertEngine e;
  auto full = gpu();
  full.memory_used_mib = std::uint64_t{975};
  EXPECT_TRUE(e.evaluate(snap(0, {full}), at(0)).empty());
  auto ev = e.evaluate(snap(60, {full}), at(60));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::HighMemoryUsage);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 97.5);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 memory 97.5 % used (975 of 1000 MiB), at or above 95 % for 60 s");

  auto no_total = full;  // used without total: unknown, not fine
  no_total.memory_total_mib = Reading<std::uint64_t>::absent(Absent::NotSupported);
  EXPECT_TRUE(e.evaluate(snap(70, {no_total}), at(70)).empty());
  EXPECT_EQ(e.firing().size(), 1u);

  ev = e.evaluate(snap(80, {gpu()}), at(80));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 10);
}

TEST(AlertEngine, PowerNearItsLimit) {
  AlertEngine e;
  auto hot = gpu();
  hot.power_draw_w = 672.0;  // 96 % of 700 W
  EXPECT_TRUE(e.evaluate(snap(0, {hot}), at(0)).empty());
  auto ev = e.evaluate(snap(60, {hot}), at(60));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::PowerNearLimit);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 96);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 power draw 672 W, 96 % of its 700 W limit, at or above 95 % for 60 s");

  auto fresh = only(AlertKind::PowerNearLimit, [](AlertRule& r) { r.duration = 0s; });
  auto no_limit = hot;
  no_limit.power_limit_w = Reading<double>::absent(Absent::NotSupported);
  EXPECT_TRUE(fresh.evaluate(snap(0, {no_limit}), at(0)).empty());
  no_limit.power_limit_w = 0.0;  // a zero limit is no limit to be near
  EXPECT_TRUE(fresh.evaluate(snap(1, {no_limit}), at(1)).empty());
  EXPECT_EQ(fresh.evaluate(snap(2, {hot}), at(2)).size(), 1u);
}

TEST(AlertEngine, LostGpuFiresImmediatelyAndResolvesWhenBack) {
  AlertEngine e;
  GpuReading lost;
  lost.index = 2;
  lost.uuid = "GPU-b";
  lost.health = Health::Lost;
  lost.health_message = "GPU is lost";
  auto ev = e.evaluate(snap(0, {lost}), at(0));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_EQ(ev[0].alert.id, "gpu_lost_alert:GPU-b");
  EXPECT_EQ(ev[0].alert.gpu_index, 2u);
  EXPECT_EQ(ev[0].alert.severity, "critical");
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 1);
  EXPECT_EQ(ev[0].alert.message, "GPU 2 (GPU-b) lost: GPU is lost");
  EXPECT_TRUE(e.evaluate(snap(1, {lost}), at(1)).empty());

  ev = e.evaluate(snap(2, {gpu(2, "GPU-b")}), at(2));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 0);
  EXPECT_EQ(ev[0].alert.message, "GPU 2 is reported again (health ok)");
  EXPECT_TRUE(e.firing().empty());
}

TEST(AlertEngine, HealthErrorIsUnknownNotLostNorFine) {
  auto e = only(AlertKind::HighTemperature, [](AlertRule& r) { r.duration = 0s; });
  ASSERT_EQ(e.evaluate(snap(0, {with_temp(95)}), at(0)).size(), 1u);
  auto broken = gpu();
  broken.health = Health::Error;
  broken.temperature_c = Reading<int>::absent(Absent::Error);
  EXPECT_TRUE(e.evaluate(snap(1, {broken}), at(1)).empty());
  broken.temperature_c = 40;  // a value beside an error is not trusted either
  EXPECT_TRUE(e.evaluate(snap(2, {broken}), at(2)).empty());
  EXPECT_EQ(e.firing().size(), 1u);

  AlertEngine all;
  EXPECT_TRUE(all.evaluate(snap(0, {broken}), at(0)).empty());  // no gpu_lost_alert for an error
}

TEST(AlertEngine, AbsentReadingsNeitherFireNorResolve) {
  auto e = only(AlertKind::HighTemperature);  // 85 °C for 60 s
  auto unknown = gpu();
  unknown.temperature_c = Reading<int>::absent(Absent::Unavailable);
  for (int t = 0; t <= 120; t += 30) EXPECT_TRUE(e.evaluate(snap(t, {unknown}), at(t)).empty());
  EXPECT_TRUE(e.firing().empty());

  // A pending condition is not reset by samples without a value; its clock keeps running.
  EXPECT_TRUE(e.evaluate(snap(200, {with_temp(90)}), at(200)).empty());
  EXPECT_TRUE(e.evaluate(snap(230, {unknown}), at(230)).empty());
  auto ev = e.evaluate(snap(260, {with_temp(90)}), at(260));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);

  // A firing alert is not resolved by them either.
  EXPECT_TRUE(e.evaluate(snap(300, {unknown}), at(300)).empty());
  ASSERT_EQ(e.firing().size(), 1u);
  EXPECT_DOUBLE_EQ(e.firing()[0].value, 90);
  ev = e.evaluate(snap(310, {with_temp(60)}), at(310));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
}

TEST(AlertEngine, GpuDisappearingResolvesItsAlertsAndForgetsPending) {
  auto rules = default_alert_rules();
  rules[1].duration = 0s;  // temperature at once; utilization keeps its 30 s
  AlertEngine e(rules);
  auto a = gpu(0, "GPU-a");
  auto b = with_util(80, with_temp(90, gpu(1, "GPU-b")));
  auto ev = e.evaluate(snap(0, {a, b}), at(0));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.id, "high_temperature_alert:GPU-b");

  ev = e.evaluate(snap(10, {a}), at(10));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.id, "high_temperature_alert:GPU-b");
  EXPECT_EQ(ev[0].alert.resolved_at, wall(10));
  EXPECT_EQ(ev[0].alert.message, "GPU 1 is no longer reported; alert resolved");
  EXPECT_TRUE(e.firing().empty());

  // Back at 20 with the same utilization: the pending clock restarts there, not at 0.
  b.temperature_c = 50;
  EXPECT_TRUE(e.evaluate(snap(20, {a, b}), at(20)).empty());
  EXPECT_TRUE(e.evaluate(snap(35, {a, b}), at(35)).empty());
  ev = e.evaluate(snap(50, {a, b}), at(50));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.id, "high_gpu_usage_alert:GPU-b");
}

TEST(AlertEngine, LostGpuStaysFiringWhenItDisappears) {
  auto rules = default_alert_rules();
  rules[1].duration = 0s;
  AlertEngine e(rules);
  ASSERT_EQ(e.evaluate(snap(0, {with_temp(95)}), at(0)).size(), 1u);

  GpuReading lost;
  lost.uuid = "GPU-a";
  lost.health = Health::Lost;
  auto ev = e.evaluate(snap(1, {lost}), at(1));
  ASSERT_EQ(ev.size(), 1u);  // gpu_lost fires; the temperature is unknown, so it stays
  EXPECT_EQ(ev[0].alert.kind, AlertKind::GpuLost);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 (GPU-a) lost");
  EXPECT_EQ(e.firing().size(), 2u);

  ev = e.evaluate(snap(2, {}), at(2));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::HighTemperature);
  ASSERT_EQ(e.firing().size(), 1u);
  EXPECT_EQ(e.firing()[0].kind, AlertKind::GpuLost);
  EXPECT_TRUE(e.evaluate(snap(3, {}), at(3)).empty());

  ev = e.evaluate(snap(4, {gpu()}), at(4));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::GpuLost);
  EXPECT_TRUE(e.firing().empty());
}

TEST(AlertEngine, EccFiresOnIncreaseAndResolvesAfterAQuietPeriod) {
  AlertEngine e;                                                   // >= 1 new error, resolves after 300 s without more
  EXPECT_TRUE(e.evaluate(snap(0, {with_ecc(5)}), at(0)).empty());  // a baseline, not an increase
  EXPECT_TRUE(e.evaluate(snap(10, {with_ecc(5)}), at(10)).empty());
  auto ev = e.evaluate(snap(20, {with_ecc(7)}), at(20));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_EQ(ev[0].alert.id, "ecc_error_alert:GPU-a");
  EXPECT_EQ(ev[0].alert.severity, "critical");
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 2);
  EXPECT_EQ(ev[0].alert.message, "GPU 0: 2 new uncorrected ECC errors (volatile count 7)");

  EXPECT_TRUE(e.evaluate(snap(30, {with_ecc(8)}), at(30)).empty());  // same episode, restarts the quiet
  ASSERT_EQ(e.firing().size(), 1u);
  EXPECT_DOUBLE_EQ(e.firing()[0].value, 3);
  EXPECT_TRUE(e.evaluate(snap(320, {with_ecc(8)}), at(320)).empty());  // 290 s quiet
  ev = e.evaluate(snap(330, {with_ecc(8)}), at(330));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 3);
  EXPECT_EQ(ev[0].alert.started_at, wall(20));
  EXPECT_EQ(ev[0].alert.message,
            "GPU 0: no new uncorrected ECC errors for 300 s, 3 in this episode (volatile count 8)");

  // A counter that goes back (reset) re-baselines; the next rise is a new episode.
  EXPECT_TRUE(e.evaluate(snap(340, {with_ecc(0)}), at(340)).empty());
  ev = e.evaluate(snap(350, {with_ecc(1)}), at(350));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_EQ(ev[0].alert.message, "GPU 0: 1 new uncorrected ECC error (volatile count 1)");
}

TEST(AlertEngine, EccAbsentCountKeepsTheBaselineAndDoesNotResolve) {
  auto e = only(AlertKind::EccErrors, [](AlertRule& r) { r.duration = 60s; });
  auto unknown = gpu();
  unknown.ecc_uncorrected_volatile = Reading<std::uint64_t>::absent(Absent::NotSupported);
  EXPECT_TRUE(e.evaluate(snap(0, {with_ecc(5)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(10, {unknown}), at(10)).empty());
  auto ev = e.evaluate(snap(20, {with_ecc(6)}), at(20));  // compared with 5, the last known count
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Fired);
  EXPECT_TRUE(e.evaluate(snap(500, {unknown}), at(500)).empty());  // long quiet, but unknown
  EXPECT_EQ(e.firing().size(), 1u);
  ev = e.evaluate(snap(510, {with_ecc(6)}), at(510));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
}

TEST(AlertEngine, EccCustomThresholdIsTheRiseBetweenSamples) {
  auto e = only(AlertKind::EccErrors, [](AlertRule& r) { r.threshold = 3; });
  EXPECT_TRUE(e.evaluate(snap(0, {with_ecc(0)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(1, {with_ecc(2)}), at(1)).empty());
  auto ev = e.evaluate(snap(2, {with_ecc(5)}), at(2));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 3);
  EXPECT_DOUBLE_EQ(ev[0].alert.threshold, 3);
}

TEST(AlertEngine, ThrottlingWatchesThermalAndPowerBits) {
  for (std::uint64_t bit : {0x4u, 0x20u, 0x40u, 0x80u}) {
    auto e = only(AlertKind::Throttling, [](AlertRule& r) { r.duration = 0s; });
    auto ev = e.evaluate(snap(0, {with_reasons(bit | 0x1)}), at(0));
    ASSERT_EQ(ev.size(), 1u) << bit;
    EXPECT_DOUBLE_EQ(ev[0].alert.value, static_cast<double>(bit)) << "only the watched bits count";
  }
  // gpu_idle, applications clocks, hw_slowdown, sync boost, display clock: not a throttling alert.
  auto e = only(AlertKind::Throttling, [](AlertRule& r) { r.duration = 0s; });
  EXPECT_TRUE(e.evaluate(snap(0, {with_reasons(0x1 | 0x2 | 0x8 | 0x10 | 0x100)}), at(0)).empty());
}

TEST(AlertEngine, ThrottlingHoldsForItsDuration) {
  AlertEngine e;  // 60 s
  EXPECT_TRUE(e.evaluate(snap(0, {with_reasons(0x20)}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(30, {with_reasons(0x40)}), at(30)).empty());  // another watched bit: still holds
  auto ev = e.evaluate(snap(60, {with_reasons(0x20 | 0x80)}), at(60));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::Throttling);
  EXPECT_DOUBLE_EQ(ev[0].alert.value, 0x20 | 0x80);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 clocks throttled (sw_thermal_slowdown, hw_power_brake_slowdown) for 60 s");
  ev = e.evaluate(snap(70, {with_reasons(0x1)}), at(70));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, Type::Resolved);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 clocks no longer throttled");
}

TEST(AlertEngine, CustomThresholdsDurationsAndDisabledRules) {
  auto rules = default_alert_rules();
  rules[0].enabled = false;  // no utilization alerts at all
  rules[1].threshold = 70;   // temperature >= 70 °C
  rules[1].duration = 5s;
  rules[1].severity = "warning";
  rules[6].threshold = 0x8;  // throttling: hw_slowdown only
  rules[6].duration = 0s;
  AlertEngine e(rules);
  EXPECT_EQ(e.rules().size(), rules.size());
  EXPECT_FALSE(e.rules()[0].enabled);

  auto g = with_reasons(0x20, with_temp(72, with_util(100)));
  EXPECT_TRUE(e.evaluate(snap(0, {g}), at(0)).empty());
  EXPECT_TRUE(e.evaluate(snap(4, {g}), at(4)).empty());
  auto ev = e.evaluate(snap(5, {g}), at(5));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::HighTemperature);
  EXPECT_EQ(ev[0].alert.severity, "warning");
  EXPECT_DOUBLE_EQ(ev[0].alert.threshold, 70);

  g.clock_event_reasons = std::uint64_t{0x8};
  ev = e.evaluate(snap(6, {g}), at(6));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.kind, AlertKind::Throttling);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 clocks throttled (hw_slowdown)");
}

TEST(AlertEngine, GpusAreIndependentAndListedByIndex) {
  auto e = only(AlertKind::HighTemperature, [](AlertRule& r) { r.duration = 0s; });
  auto ev = e.evaluate(snap(0, {with_temp(90, gpu(1, "GPU-z")), gpu(0, "GPU-y"), with_temp(99, gpu(3, ""))}), at(0));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].alert.id, "high_temperature_alert:GPU-z");  // snapshot order
  EXPECT_EQ(ev[1].alert.id, "high_temperature_alert:gpu-3");  // no uuid: told apart by index
  EXPECT_EQ(ev[1].alert.gpu_uuid, "");
  auto f = e.firing();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].gpu_index, 1u);
  EXPECT_EQ(f[1].gpu_index, 3u);

  ev = e.evaluate(snap(1, {gpu(1, "GPU-z"), gpu(0, "GPU-y"), with_temp(99, gpu(3, ""))}), at(1));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.id, "high_temperature_alert:GPU-z");
  EXPECT_EQ(e.firing().size(), 1u);
}

struct CommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST(AlertEngine, MessagesIgnoreTheLocale) {
  auto e = only(AlertKind::HighMemoryUsage, [](AlertRule& r) { r.duration = 1500ms; });
  auto full = gpu();
  full.memory_total_mib = std::uint64_t{100000};
  full.memory_used_mib = std::uint64_t{97500};
  const std::locale saved = std::locale::global(std::locale(std::locale::classic(), new CommaDecimal));
  (void)e.evaluate(snap(0, {full}), at(0));
  auto ev = e.evaluate(snap(2, {full}), at(2));
  std::locale::global(saved);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].alert.message, "GPU 0 memory 97.5 % used (97500 of 100000 MiB), at or above 95 % for 1.5 s");
}

}  // namespace
}  // namespace gf::core
