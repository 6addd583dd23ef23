// Clearing recorded XIDs (core::XidClear): what a clear drops from later readings, what it keeps (XIDs
// after it, state such as a failed row remap), and problem_words, the short form refusals use.
#include <gtest/gtest.h>

#include "core/gpu_health.hpp"

namespace gf::core {
namespace {

using namespace std::chrono_literals;

const std::chrono::system_clock::time_point kClearT0{std::chrono::seconds(1'764'000'000)};

// GPU 0 with these XIDs, one second apart from kClearT0, the last one as last_xid.
GpuReading gpu_with_xids(std::initializer_list<unsigned> xids) {
  GpuReading g;
  g.uuid = "GPU-c0";
  g.last_xid = 0u;
  g.remapped_rows_failure = false;
  auto t = kClearT0;
  for (unsigned x : xids) {
    g.recent_xids.push_back({x, t});
    g.last_xid = x;
    t += 1s;
  }
  return g;
}

TEST(XidClear, ProblemWordsAreTheVerdictsShortForm) {
  EXPECT_EQ(problem_words("xid_79"), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(problem_words("xid_1000"), "XID 1000");
  EXPECT_EQ(problem_words("gpu_lost"), "GPU lost");
  EXPECT_EQ(problem_words("row_remap_failure"), "row remap failure");
  EXPECT_EQ(problem_words("xid_"), "");
  EXPECT_EQ(problem_words("xid_7x"), "");
  EXPECT_EQ(problem_words("xid_99999999999999999999"), "");
  EXPECT_EQ(problem_words("something"), "");
  EXPECT_EQ(judge_health(gpu_with_xids({48})).summary, "unhealthy: XID 48 (double-bit ECC error)");
}

TEST(XidClear, TheClearedXidsGoAndTheGpuIsHealthyAgain) {
  const auto g = gpu_with_xids({13, 79});
  ASSERT_FALSE(judge_health(g).healthy);
  const auto c = xid_clear_of(g, kClearT0 + 10s);
  EXPECT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.last_xid, 79u);
  auto later = g;  // the backend still lists them
  EXPECT_TRUE(apply_xid_clear(c, later));
  EXPECT_TRUE(later.recent_xids.empty());
  ASSERT_TRUE(later.last_xid);
  EXPECT_EQ(*later.last_xid, 0u);  // "none since", as after a restart
  EXPECT_TRUE(judge_health(later).healthy);
  EXPECT_FALSE(apply_xid_clear(c, later));  // nothing left to drop
}

TEST(XidClear, AnXidAfterTheClearShowsEvenTheSameNumber) {
  auto g = gpu_with_xids({79});
  const auto c = xid_clear_of(g, kClearT0 + 10s);
  g.recent_xids.push_back({79, kClearT0 + 20s});
  EXPECT_TRUE(apply_xid_clear(c, g));
  ASSERT_EQ(g.recent_xids.size(), 1u);
  EXPECT_EQ(g.recent_xids[0].time, kClearT0 + 20s);
  EXPECT_EQ(*g.last_xid, 79u);
  EXPECT_FALSE(judge_health(g).healthy);
  // An application fault after the clear: the last XID is that one, and the GPU is healthy.
  auto h = gpu_with_xids({48});
  const auto c2 = xid_clear_of(h, kClearT0 + 10s);
  h.recent_xids.push_back({13, kClearT0 + 30s});
  h.last_xid = 13u;
  EXPECT_TRUE(apply_xid_clear(c2, h));
  EXPECT_EQ(*h.last_xid, 13u);
  EXPECT_TRUE(judge_health(h).healthy);
}

TEST(XidClear, StateIsNotClearedAndAbsentStaysAbsent) {
  auto g = gpu_with_xids({79});
  g.remapped_rows_failure = true;
  const auto c = xid_clear_of(g, kClearT0);
  EXPECT_TRUE(apply_xid_clear(c, g));
  const auto v = judge_health(g);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.summary, "unhealthy: row remap failure");
  GpuReading none;  // events unavailable: last_xid absent, nothing listed
  none.last_xid = Reading<unsigned>::absent(Absent::NotSupported);
  EXPECT_FALSE(apply_xid_clear(c, none));
  EXPECT_FALSE(none.last_xid);
}

TEST(XidClear, ABackendWithOnlyTheLastXid) {
  GpuReading g;
  g.last_xid = 62u;  // no list
  const auto c = xid_clear_of(g, kClearT0);
  EXPECT_TRUE(c.events.empty());
  auto same = g;
  EXPECT_TRUE(apply_xid_clear(c, same));
  EXPECT_EQ(*same.last_xid, 0u);
  auto other = g;
  other.last_xid = 74u;  // a new XID replaced it
  EXPECT_FALSE(apply_xid_clear(c, other));
  EXPECT_EQ(*other.last_xid, 74u);
}

TEST(XidClear, ASecondClearAddsToTheFirstBounded) {
  auto g = gpu_with_xids({79});
  const auto first = xid_clear_of(g, kClearT0 + 10s);
  g.recent_xids.push_back({48, kClearT0 + 20s});
  g.last_xid = 48u;
  auto shown = g;
  apply_xid_clear(first, shown);  // what readings show after the first clear: the 48 only
  const auto second = xid_clear_of(shown, kClearT0 + 30s, &first);
  EXPECT_EQ(second.events.size(), 2u);
  EXPECT_EQ(second.last_xid, 48u);
  EXPECT_TRUE(apply_xid_clear(second, g));
  EXPECT_TRUE(g.recent_xids.empty());
  EXPECT_EQ(*g.last_xid, 0u);
  // The last XID the first clear hid stays remembered when the second sees none.
  auto quiet = gpu_with_xids({});
  const auto third = xid_clear_of(quiet, kClearT0 + 40s, &second);
  EXPECT_EQ(third.last_xid, 48u);

  GpuReading many;
  for (unsigned i = 0; i < kMaxClearedXids + 10; ++i)
    many.recent_xids.push_back({13, kClearT0 + std::chrono::seconds(i)});
  const auto bounded = xid_clear_of(many, kClearT0);
  ASSERT_EQ(bounded.events.size(), kMaxClearedXids);
  EXPECT_EQ(bounded.events.back().time, kClearT0 + std::chrono::seconds(kMaxClearedXids + 9));  // the newest kept
}

}  // namespace
}  // namespace gf::core
