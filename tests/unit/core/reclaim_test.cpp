// core::ReclaimPolicy on a fake timeline of readings.
#include "core/reclaim.hpp"

#include <gtest/gtest.h>

namespace gf::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
constexpr std::int64_t kReclaimT0 = 1'700'000'000'000;
constexpr std::int64_t kMin = 60'000;

Snapshot reclaim_reading(std::int64_t at_ms, unsigned util, std::vector<std::string> users = {}) {
  Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(milliseconds(at_ms));
  GpuReading g;
  g.index = 0;
  g.utilization_pct = util;
  std::uint32_t pid = 100;
  for (auto& u : users) {
    GpuProcess p;
    p.pid = pid++;
    p.user = u;
    g.processes.push_back(p);
  }
  s.gpus.push_back(g);
  return s;
}

std::vector<Lease> alice_lease() {
  Lease l;
  l.id = "L1";
  l.owner.user = "alice";
  l.gpus = {{0, ""}};
  l.created_at_ms = kReclaimT0;
  return {l};
}

ReclaimOptions on() {
  ReclaimOptions o;
  o.enabled = true;
  o.utilization_threshold_pct = 5;
  o.idle_for = minutes(30);
  o.grace = minutes(10);
  return o;
}

TEST(Reclaim, OffByDefault) {
  ReclaimPolicy p;
  EXPECT_FALSE(p.options().enabled);
  for (int m = 0; m <= 120; m += 10)
    EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + m * kMin, 0), alice_lease()).empty());
}

TEST(Reclaim, WarnsOnceAfterIdleForThenReleasesAfterTheGrace) {
  ReclaimPolicy p(on());
  std::vector<ReclaimDecision> all;
  for (int m = 0; m <= 45; ++m) {
    // Another user's process on the GPU does not make alice's lease busy.
    auto d = p.evaluate(reclaim_reading(kReclaimT0 + m * kMin, 2, {"bob"}), alice_lease());
    for (auto& x : d) all.push_back(std::move(x));
  }
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].action, ReclaimAction::Warn);
  EXPECT_EQ(all[0].at_ms, kReclaimT0 + 30 * kMin);
  EXPECT_EQ(all[0].idle_since_ms, kReclaimT0);
  EXPECT_EQ(all[1].action, ReclaimAction::Release);
  EXPECT_EQ(all[1].at_ms, kReclaimT0 + 40 * kMin);
  EXPECT_EQ(all[1].lease_id, "L1");
  EXPECT_EQ(all[1].user, "alice");
  ASSERT_EQ(all[1].evidence.size(), 1u);
  EXPECT_EQ(all[1].evidence[0].utilization_pct, std::optional<unsigned>(2));
  EXPECT_EQ(all[1].evidence[0].process_users, std::vector<std::string>{"bob"});
}

TEST(Reclaim, BecomingBusyAgainResetsTheCount) {
  ReclaimPolicy p(on());
  EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0, 0), alice_lease()).empty());
  EXPECT_EQ(p.evaluate(reclaim_reading(kReclaimT0 + 30 * kMin, 0), alice_lease()).size(), 1u);  // warned
  // The owner's process shows up (at 0 % utilization): not idle.
  EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + 35 * kMin, 0, {"alice"}), alice_lease()).empty());
  // Idle again from minute 36: the warning comes again 30 min later, no release before.
  for (int m = 36; m < 66; ++m)
    EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + m * kMin, 0), alice_lease()).empty()) << m;
  const auto d = p.evaluate(reclaim_reading(kReclaimT0 + 66 * kMin, 0), alice_lease());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].action, ReclaimAction::Warn);
  EXPECT_EQ(d[0].idle_since_ms, kReclaimT0 + 36 * kMin);
}

TEST(Reclaim, UtilizationAtTheThresholdIsBusy) {
  ReclaimPolicy p(on());
  for (int m = 0; m <= 60; m += 5)
    EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + m * kMin, 5), alice_lease()).empty());
}

TEST(Reclaim, NeverActsOnMissingEvidence) {
  ReclaimPolicy p(on());
  for (int m = 0; m <= 60; m += 5) {
    auto s = reclaim_reading(kReclaimT0 + m * kMin, 0, {""});  // a process whose user could not be resolved
    EXPECT_TRUE(p.evaluate(s, alice_lease()).empty());
    auto hidden = reclaim_reading(kReclaimT0 + m * kMin, 0);
    hidden.process_visibility.complete = false;
    EXPECT_TRUE(p.evaluate(hidden, alice_lease()).empty());
    auto no_util = reclaim_reading(kReclaimT0 + m * kMin, 0);
    no_util.gpus[0].utilization_pct = Reading<unsigned>::absent(Absent::NotSupported);
    EXPECT_TRUE(p.evaluate(no_util, alice_lease()).empty());
  }
}

TEST(Reclaim, ReleaseComesAFullGraceAfterTheWarningEvenAcrossAGap) {
  ReclaimPolicy p(on());
  EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0, 0), alice_lease()).empty());
  // The next reading comes 2 h later: a warning, not a release without one.
  auto d = p.evaluate(reclaim_reading(kReclaimT0 + 120 * kMin, 0), alice_lease());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].action, ReclaimAction::Warn);
  EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + 129 * kMin, 0), alice_lease()).empty());
  d = p.evaluate(reclaim_reading(kReclaimT0 + 130 * kMin, 0), alice_lease());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].action, ReclaimAction::Release);
  EXPECT_TRUE(p.evaluate(reclaim_reading(kReclaimT0 + 140 * kMin, 0), alice_lease()).empty());  // once
}

TEST(Reclaim, MaxUtilizationSinceIdleIsKeptAsEvidence) {
  ReclaimPolicy p(on());
  p.evaluate(reclaim_reading(kReclaimT0, 1), alice_lease());
  p.evaluate(reclaim_reading(kReclaimT0 + 10 * kMin, 4), alice_lease());
  const auto d = p.evaluate(reclaim_reading(kReclaimT0 + 30 * kMin, 0), alice_lease());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].evidence[0].max_utilization_pct, 4u);
  EXPECT_EQ(d[0].evidence[0].utilization_pct, std::optional<unsigned>(0));
}

}  // namespace
}  // namespace gf::core
