// core::UsageAccumulator on synthetic readings: every expected number is worked out by hand.
#include "core/usage.hpp"

#include <gtest/gtest.h>

namespace gf::core {
namespace {

using std::chrono::milliseconds;
constexpr std::int64_t kUsageT0 = 1'700'000'000'000;  // epoch ms

Snapshot usage_reading(
    std::int64_t at_ms,
    std::vector<std::tuple<unsigned, std::optional<unsigned>, std::optional<double>, std::optional<std::uint64_t>>>
        gpus) {
  Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(milliseconds(at_ms));
  for (const auto& [idx, util, power, mem] : gpus) {
    GpuReading g;
    g.index = idx;
    if (util) g.utilization_pct = *util;
    if (power) g.power_draw_w = *power;
    if (mem) g.memory_used_mib = *mem;
    s.gpus.push_back(g);
  }
  return s;
}

Lease lease(std::string id, std::vector<unsigned> gpus, std::int64_t created,
            std::optional<std::int64_t> released = {}) {
  Lease l;
  l.id = std::move(id);
  l.job_id = "job-" + l.id;
  l.owner.user = "alice";
  for (unsigned g : gpus) l.gpus.push_back({g, ""});
  l.created_at_ms = created;
  l.released_at_ms = released;
  return l;
}

TEST(Usage, HeldTimeIsExactFromTheLeaseTimesNotFromSamples) {
  UsageAccumulator acc;
  // Lease of 2 GPUs from T0+500 ms to T0+2750 ms, sampled every second.
  const auto active = lease("a", {0, 1}, kUsageT0 + 500);
  acc.add(usage_reading(kUsageT0, {{0, 50, 100.0, 10}, {1, 50, 100.0, 10}}), {active});
  acc.add(usage_reading(kUsageT0 + 1000, {{0, 50, 100.0, 10}, {1, 50, 100.0, 10}}), {active});
  acc.add(usage_reading(kUsageT0 + 2000, {{0, 50, 100.0, 10}, {1, 50, 100.0, 10}}), {active});
  acc.add(usage_reading(kUsageT0 + 3000, {{0, 50, 100.0, 10}, {1, 50, 100.0, 10}}),
          {lease("a", {0, 1}, kUsageT0 + 500, kUsageT0 + 2750)});
  const auto rows = acc.take_final();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].held_gpu_s, 2.25 * 2);
  // Busy: every interval at 50 %, clipped to the lease: 0.5 + 1 + 0.75 s per GPU.
  EXPECT_DOUBLE_EQ(rows[0].busy_gpu_s, 2.25 * 2);
  EXPECT_TRUE(acc.rows().empty());
}

TEST(Usage, BusyTakesTheStateOfTheSampleThatEndsTheInterval) {
  UsageOptions o;
  o.busy_threshold_pct = 5;
  UsageAccumulator acc(o);
  const auto l = lease("a", {0}, kUsageT0);
  acc.add(usage_reading(kUsageT0, {{0, 90, std::nullopt, std::nullopt}}), {l});
  acc.add(usage_reading(kUsageT0 + 1000, {{0, 4, std::nullopt, std::nullopt}}), {l});   // idle second (4 < 5)
  acc.add(usage_reading(kUsageT0 + 2000, {{0, 5, std::nullopt, std::nullopt}}), {l});   // busy (5 ≥ 5)
  acc.add(usage_reading(kUsageT0 + 4000, {{0, 80, std::nullopt, std::nullopt}}), {l});  // busy, 2 s
  acc.settle(kUsageT0 + 4000);
  const auto& r = acc.rows().at("a");
  EXPECT_DOUBLE_EQ(r.held_gpu_s, 4.0);
  EXPECT_DOUBLE_EQ(r.busy_gpu_s, 3.0);
  // Time-weighted mean: (4·1 + 5·1 + 80·2) / 4 = 42.25.
  ASSERT_TRUE(r.mean_util_pct());
  EXPECT_DOUBLE_EQ(*r.mean_util_pct(), 42.25);
  ASSERT_TRUE(r.busy_fraction());
  EXPECT_DOUBLE_EQ(*r.busy_fraction(), 0.75);
}

TEST(Usage, EnergyIsTheTrapezoidIntegralClippedToTheLease) {
  UsageAccumulator acc;
  // Power rises linearly 100 W → 300 W over 2 s; the lease starts half-way (at 200 W).
  const auto l = lease("a", {0}, kUsageT0 + 1000);
  acc.add(usage_reading(kUsageT0, {{0, 50, 100.0, std::nullopt}}), {l});
  acc.add(usage_reading(kUsageT0 + 2000, {{0, 50, 300.0, std::nullopt}}), {l});
  // 3600 s at 360 W: exactly 360 Wh.
  acc.add(usage_reading(kUsageT0 + 2000 + 3'600'000, {{0, 50, 360.0, std::nullopt}}), {l});
  const auto& r = acc.rows().at("a");
  // The first interval is a gap under the default max_gap (2 s ≤ 5 s): (200+300)/2 W × 1 s = 250 J.
  // The second (1 h) is longer than max_gap: not integrated.
  EXPECT_DOUBLE_EQ(r.energy_wh, 250.0 / 3600.0);
}

TEST(Usage, GapsLongerThanMaxGapAreNotIntegratedButHeldStaysExact) {
  UsageOptions o;
  o.max_gap = milliseconds(3000);
  UsageAccumulator acc(o);
  const auto l = lease("a", {0}, kUsageT0);
  acc.add(usage_reading(kUsageT0, {{0, 100, 200.0, 1000}}), {l});
  acc.add(usage_reading(kUsageT0 + 3000, {{0, 100, 200.0, 3000}}), {l});   // 3 s: integrated
  acc.add(usage_reading(kUsageT0 + 10000, {{0, 100, 200.0, 2000}}), {l});  // 7 s: a gap
  acc.add(usage_reading(kUsageT0 + 11000, {{0, 100, 400.0, 500}}), {lease("a", {0}, kUsageT0, kUsageT0 + 11000)});
  const auto rows = acc.take_final();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].held_gpu_s, 11.0);
  EXPECT_DOUBLE_EQ(rows[0].busy_gpu_s, 4.0);
  EXPECT_DOUBLE_EQ(rows[0].energy_wh, (200.0 * 3 + 300.0 * 1) / 3600.0);
  ASSERT_TRUE(rows[0].peak_mem_mib);
  EXPECT_EQ(*rows[0].peak_mem_mib, 3000u);
}

TEST(Usage, OnlyTheLeasedGpusCountAndMissingReadingsAddNothing) {
  UsageAccumulator acc;
  const auto l = lease("a", {1}, kUsageT0);
  acc.add(usage_reading(kUsageT0, {{0, 100, 300.0, 9000}, {1, std::nullopt, std::nullopt, std::nullopt}}), {l});
  acc.add(usage_reading(kUsageT0 + 1000, {{0, 100, 300.0, 9000}, {1, std::nullopt, std::nullopt, std::nullopt}}), {l});
  acc.settle(kUsageT0 + 1000);
  const auto& r = acc.rows().at("a");
  EXPECT_DOUBLE_EQ(r.held_gpu_s, 1.0);
  EXPECT_DOUBLE_EQ(r.busy_gpu_s, 0.0);
  EXPECT_DOUBLE_EQ(r.energy_wh, 0.0);
  EXPECT_FALSE(r.mean_util_pct());  // no utilization reading: no mean, not a false 0
  EXPECT_FALSE(r.peak_mem_mib);
}

TEST(Usage, ALeaseEndedBetweenTwoSamplesIsStillAccounted) {
  UsageAccumulator acc;
  acc.add(usage_reading(kUsageT0, {{0, 100, 100.0, 1}}), {});
  // Created and released between two readings: first seen already ended.
  acc.add(usage_reading(kUsageT0 + 1000, {{0, 100, 100.0, 1}}), {lease("s", {0}, kUsageT0 + 200, kUsageT0 + 700)});
  const auto rows = acc.take_final();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].held_gpu_s, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].busy_gpu_s, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].energy_wh, 50.0 / 3600.0);
  // A final row shown again (the lease still listed as ended) is not counted twice.
  acc.add(usage_reading(kUsageT0 + 2000, {{0, 100, 100.0, 1}}), {lease("s", {0}, kUsageT0 + 200, kUsageT0 + 700)});
  const auto again = acc.take_final();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_DOUBLE_EQ(again[0].busy_gpu_s, 0.0);
}

TEST(Usage, OlderReadingsAreIgnored) {
  UsageAccumulator acc;
  const auto l = lease("a", {0}, kUsageT0);
  acc.add(usage_reading(kUsageT0, {{0, 100, 100.0, 1}}), {l});
  acc.add(usage_reading(kUsageT0 + 2000, {{0, 100, 100.0, 1}}), {l});
  acc.add(usage_reading(kUsageT0 + 1000, {{0, 100, 100.0, 1}}), {l});
  EXPECT_DOUBLE_EQ(acc.rows().at("a").busy_gpu_s, 2.0);
}

TEST(Usage, GroupsByUserAndJob) {
  LeaseUsage a;
  a.user = "alice";
  a.job_id = "j1";
  a.held_gpu_s = 10;
  a.busy_gpu_s = 5;
  a.energy_wh = 1;
  a.peak_mem_mib = 100;
  LeaseUsage b = a;
  b.job_id = "j2";
  b.held_gpu_s = 20;
  b.peak_mem_mib = 300;
  LeaseUsage c = a;
  c.user = "bob";
  c.job_id = "j3";
  c.held_gpu_s = 1;
  c.peak_mem_mib.reset();
  const auto by_user = group_usage({a, b, c}, UsageGroup::User);
  ASSERT_EQ(by_user.size(), 2u);
  EXPECT_EQ(by_user[0].key, "alice");
  EXPECT_EQ(by_user[0].leases, 2u);
  EXPECT_DOUBLE_EQ(by_user[0].held_gpu_s, 30);
  EXPECT_DOUBLE_EQ(by_user[0].busy_gpu_s, 10);
  EXPECT_EQ(by_user[0].peak_mem_mib, std::optional<std::uint64_t>(300));
  EXPECT_EQ(by_user[1].key, "bob");
  EXPECT_FALSE(by_user[1].peak_mem_mib);
  const auto by_job = group_usage({a, b, c}, UsageGroup::Job);
  ASSERT_EQ(by_job.size(), 3u);
  EXPECT_EQ(by_job[0].key, "j2");
  // Issue 20, finding 10: by job is by (uid, job id): bob's lease under alice's job id stays apart.
  a.uid = 1001;
  LeaseUsage d = a;
  d.user = "bob";
  d.uid = 1002;
  const auto same_id = group_usage({a, d}, UsageGroup::Job);
  ASSERT_EQ(same_id.size(), 2u);
  EXPECT_EQ(same_id[0].key, "j1");
  EXPECT_EQ(same_id[1].key, "j1");
  EXPECT_NE(same_id[0].uid, same_id[1].uid);
  EXPECT_EQ(same_id[0].leases, 1u);
}

}  // namespace
}  // namespace gf::core
