#include "core/stats.hpp"

#include <gtest/gtest.h>

namespace gf::core {
namespace {

using namespace std::chrono_literals;
using TP = std::chrono::steady_clock::time_point;

Snapshot snap(std::vector<std::pair<unsigned, unsigned>> util_by_gpu, double power = 100,
              std::optional<std::uint64_t> energy = {}) {
  Snapshot s;
  for (auto [idx, u] : util_by_gpu) {
    GpuReading g;
    g.index = idx;
    g.name = "G" + std::to_string(idx);
    g.utilization_pct = u;
    g.memory_total_mib = 1000;
    g.memory_used_mib = 250;
    g.memory_free_mib = 750;
    g.temperature_c = 50;
    g.power_draw_w = power;
    if (energy) g.energy_mj = *energy;
    s.gpus.push_back(g);
  }
  return s;
}

TEST(Summarize, KnownSeries) {
  auto m = summarize({0, 1, 2, 3, 4}, {0, 10, 20, 30, 40});
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->min, 0);
  EXPECT_DOUBLE_EQ(m->max, 40);
  EXPECT_DOUBLE_EQ(m->mean, 20);
  EXPECT_DOUBLE_EQ(m->p50, 20);
  EXPECT_DOUBLE_EQ(m->p95, 38);  // rank 3.8 between 30 and 40
  EXPECT_EQ(m->samples, 5u);
}

TEST(Summarize, MeanIsTimeWeighted) {
  // 0 for 9 s, then a late sample: a plain average (0+0+100)/3 = 33.3 would be wrong.
  // Trapezoids: [0,1]: 0, [1,10]: (0+100)/2*9 = 450, over 10 s = 45.
  auto m = summarize({0, 1, 10}, {0, 0, 100});
  ASSERT_TRUE(m);
  EXPECT_NEAR(m->mean, 45.0, 1e-9);
}

TEST(Summarize, SingleSampleAndEmpty) {
  auto m = summarize({5}, {42});
  ASSERT_TRUE(m);
  EXPECT_DOUBLE_EQ(m->mean, 42);
  EXPECT_FALSE(summarize({}, {}));
}

TEST(RunAggregator, SeedShapeStatsPerGpu) {
  RunAggregator agg;
  const TP t0{};
  agg.add(snap({{0, 10}, {1, 90}}), t0);
  agg.add(snap({{0, 30}, {1, 90}}), t0 + 1s);
  agg.add(snap({{0, 50}}), t0 + 2s);  // GPU 1 disappeared
  auto r = agg.report();
  EXPECT_EQ(r.sample_count, 3u);
  EXPECT_DOUBLE_EQ(r.duration_s, 2.0);
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_EQ(r.gpus.at(0).sample_count, 3u);
  EXPECT_EQ(r.gpus.at(1).sample_count, 2u);  // each GPU carries its own count
  EXPECT_DOUBLE_EQ(r.gpus.at(0).utilization->mean, 30);
  EXPECT_DOUBLE_EQ(r.gpus.at(0).utilization->min, 10);
  EXPECT_DOUBLE_EQ(r.gpus.at(0).memory_usage_percent->mean, 25);
  EXPECT_EQ(r.gpus.at(0).name, "G0");
}

TEST(RunAggregator, EnergyFromCounterElseIntegratedPower) {
  RunAggregator with_counter, without;
  const TP t0{};
  with_counter.add(snap({{0, 0}}, 100, 1'000'000), t0);
  with_counter.add(snap({{0, 0}}, 100, 1'250'000), t0 + 2s);
  auto a = with_counter.report().gpus.at(0);
  EXPECT_EQ(a.energy_source, EnergySource::Counter);
  EXPECT_DOUBLE_EQ(*a.energy_joules, 250.0);  // 250 000 mJ

  without.add(snap({{0, 0}}, 100), t0);
  without.add(snap({{0, 0}}, 300), t0 + 2s);
  auto b = without.report().gpus.at(0);
  EXPECT_EQ(b.energy_source, EnergySource::IntegratedPower);
  EXPECT_DOUBLE_EQ(*b.energy_joules, 400.0);  // (100+300)/2 W * 2 s
}

TEST(RunAggregator, CounterResetFallsBackToPower) {
  RunAggregator agg;
  const TP t0{};
  agg.add(snap({{0, 0}}, 100, 5'000'000), t0);
  agg.add(snap({{0, 0}}, 100, 1'000), t0 + 1s);  // the driver was reloaded
  auto g = agg.report().gpus.at(0);
  EXPECT_EQ(g.energy_source, EnergySource::IntegratedPower);
  EXPECT_DOUBLE_EQ(*g.energy_joules, 100.0);
}

TEST(RunAggregator, FilterAndAbsentReadings) {
  RunAggregator agg;
  agg.set_gpu_filter({1});
  Snapshot s = snap({{0, 10}, {1, 20}});
  s.gpus[1].temperature_c = Reading<int>::absent(Absent::NotSupported);
  agg.add(s, TP{});
  auto r = agg.report();
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_FALSE(r.gpus.at(1).temperature_c);  // never reported: no statistics, not zeros
  EXPECT_TRUE(r.gpus.at(1).utilization);
}

TEST(RunAggregator, SeriesStaysBoundedAndKeepsEnds) {
  RunAggregator agg(64);
  const TP t0{};
  for (int i = 0; i < 10000; ++i)
    agg.add(snap({{0, static_cast<unsigned>(i % 100)}}), t0 + std::chrono::milliseconds(100 * i));
  auto r = agg.report();
  const auto& series = r.series.at(0);
  EXPECT_LE(series.size(), 64u);
  EXPECT_GE(series.size(), 16u);
  EXPECT_DOUBLE_EQ(series.front().t_s, 0.0);
  EXPECT_GT(series.back().t_s, 900.0);                   // the shape covers the whole run
  EXPECT_EQ(r.gpus.at(0).utilization->samples, 10000u);  // statistics use every sample
}

}  // namespace
}  // namespace gf::core
