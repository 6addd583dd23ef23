#include "core/score.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace gf::core {
namespace {

GpuReading gpu(unsigned index, std::uint64_t total, std::uint64_t used, unsigned util) {
  GpuReading g;
  g.index = index;
  g.memory_total_mib = total;
  g.memory_used_mib = used;
  g.memory_free_mib = total - used;
  g.utilization_pct = util;
  return g;
}

TEST(Score, SeedFormula) {
  // 0.6 * 60/80 + 0.4 * (100-25)/100 = 0.45 + 0.3
  auto s = availability_score(gpu(0, 80000, 20000, 25));
  ASSERT_TRUE(s);
  EXPECT_NEAR(*s, 0.75, 1e-12);
}

TEST(Score, WeightsAreConfigurable) {
  auto s = availability_score(gpu(0, 100, 0, 100), ScoreWeights{0.5, 0.5});
  ASSERT_TRUE(s);
  EXPECT_NEAR(*s, 0.5, 1e-12);
}

TEST(Score, LostOrUnknownGpuHasNoScore) {
  auto g = gpu(0, 100, 0, 0);
  g.health = Health::Lost;
  EXPECT_FALSE(availability_score(g));
  auto h = gpu(1, 100, 0, 0);
  h.utilization_pct = Reading<unsigned>::absent(Absent::NotSupported);
  EXPECT_FALSE(availability_score(h));
  auto z = gpu(2, 0, 0, 0);
  EXPECT_FALSE(availability_score(z));
}

TEST(Score, UnattributedMemory) {
  auto g = gpu(0, 1000, 700, 0);
  GpuProcess a;
  a.used_memory_mib = 300;
  GpuProcess b;  // unknown memory: counts as nothing known
  g.processes = {a, b};
  attribute_memory(g);
  ASSERT_TRUE(g.memory_unattributed_mib);
  EXPECT_EQ(*g.memory_unattributed_mib, 400u);
  g.memory_used_mib = Reading<std::uint64_t>::absent(Absent::Error);
  attribute_memory(g);
  EXPECT_FALSE(g.memory_unattributed_mib);
}

TEST(Snapshot, ClockEventNames) {
  auto n = clock_event_names(0x1 | 0x4 | 0x40);
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[0], "gpu_idle");
  EXPECT_EQ(n[1], "sw_power_cap");
  EXPECT_EQ(n[2], "hw_thermal_slowdown");
  EXPECT_TRUE(clock_event_names(0).empty());
}

TEST(Reading, EveryAbsentReasonHasADistinctCodeAndWordsInEnumOrder) {
  std::set<std::string_view> codes, words;
  for (std::size_t i = 0; i < kAbsentReasonCount; ++i) {
    const auto& r = kAbsentReasons[i];
    EXPECT_EQ(static_cast<std::size_t>(r.reason), i);
    EXPECT_FALSE(r.code.empty());
    EXPECT_FALSE(r.words.empty());
    EXPECT_TRUE(codes.insert(r.code).second) << r.code;
    EXPECT_TRUE(words.insert(r.words).second) << r.words;
    EXPECT_EQ(code(r.reason), r.code);
    EXPECT_EQ(to_string(r.reason), r.words);
  }
  EXPECT_EQ(code(Absent::GpuLost), "gpu_lost");
  EXPECT_EQ(to_string(Absent::MigEnabled), "not reported under MIG");
}

TEST(Reading, AbsentCarriesReason) {
  auto r = Reading<int>::absent(Absent::NotSupported);
  EXPECT_FALSE(r);
  EXPECT_EQ(r.why(), Absent::NotSupported);
  EXPECT_EQ(r.value_or(7), 7);
  Reading<int> v = 0;  // zero is a real value, not absence
  EXPECT_TRUE(v);
  EXPECT_EQ(*v, 0);
}

}  // namespace
}  // namespace gf::core
