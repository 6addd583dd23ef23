// HealthClears: an operator's clear of recorded XIDs reaches every later reading, and a GPU that answers
// again after being lost or gone from the driver's list has its XIDs cleared without one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sampler/health_clears.hpp"

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const std::chrono::system_clock::time_point kClearsT0{std::chrono::seconds(1'764'000'000)};

core::GpuReading clears_gpu(unsigned index, std::initializer_list<unsigned> xids) {
  core::GpuReading g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.last_xid = 0u;
  auto t = kClearsT0;
  for (unsigned x : xids) {
    g.recent_xids.push_back({x, t});
    g.last_xid = x;
    t += 1s;
  }
  return g;
}

core::Snapshot clears_snapshot(std::vector<core::GpuReading> gpus, std::chrono::seconds at = 100s) {
  core::Snapshot s;
  s.timestamp = kClearsT0 + at;
  s.gpus = std::move(gpus);
  return s;
}

TEST(HealthClears, AClearReachesEveryLaterReading) {
  HealthClears c;
  auto s = clears_snapshot({clears_gpu(0, {79}), clears_gpu(1, {48})});
  EXPECT_TRUE(c.apply(s).empty());
  ASSERT_EQ(s.gpus[0].recent_xids.size(), 1u);  // nothing cleared yet
  auto done = c.clear(s.gpus[0], kClearsT0 + 50s);
  ASSERT_TRUE(done) << done.error().message;
  ASSERT_EQ(done->events.size(), 1u);
  EXPECT_EQ(done->events[0].xid, 79u);
  EXPECT_EQ(done->last_xid, 79u);
  auto later = clears_snapshot({clears_gpu(0, {79}), clears_gpu(1, {48})});
  EXPECT_TRUE(c.apply(later).empty());
  EXPECT_TRUE(later.gpus[0].recent_xids.empty());
  EXPECT_EQ(*later.gpus[0].last_xid, 0u);
  EXPECT_EQ(later.gpus[1].recent_xids.size(), 1u);  // another GPU's XIDs stay
  // A second clear of the same GPU finds nothing left to take out.
  auto again = c.clear(later.gpus[0], kClearsT0 + 60s);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->anything());
}

TEST(HealthClears, BackFromLostIsTakenAsAReset) {
  HealthClears c;
  auto first = clears_snapshot({clears_gpu(0, {48})}, 1s);
  EXPECT_TRUE(c.apply(first).empty());
  auto lost = clears_snapshot({clears_gpu(0, {48})}, 2s);
  lost.gpus[0].uuid.clear();  // a GPU lost before its UUID could be read: matched by its index
  lost.gpus[0].health = core::Health::Lost;
  EXPECT_TRUE(c.apply(lost).empty());
  EXPECT_EQ(lost.gpus[0].recent_xids.size(), 1u);  // still its story while lost
  auto back = clears_snapshot({clears_gpu(0, {48})}, 3s);
  const auto lines = c.apply(back);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("GPU 0 (GPU-0) answers again after being lost"));
  EXPECT_THAT(lines[0], HasSubstr("its recorded XIDs (48) are cleared"));
  EXPECT_TRUE(back.gpus[0].recent_xids.empty());
  // Only once: the next reading says nothing.
  auto next = clears_snapshot({clears_gpu(0, {48})}, 4s);
  EXPECT_TRUE(c.apply(next).empty());
  EXPECT_TRUE(next.gpus[0].recent_xids.empty());
}

TEST(HealthClears, BackAfterBeingGoneIsTakenAsAResetAndANewGpuIsNot) {
  HealthClears c;
  auto both = clears_snapshot({clears_gpu(0, {}), clears_gpu(1, {79})});
  EXPECT_TRUE(c.apply(both).empty());
  auto one = clears_snapshot({clears_gpu(0, {})});
  EXPECT_TRUE(c.apply(one).empty());
  auto back = clears_snapshot({clears_gpu(0, {}), clears_gpu(1, {79}), clears_gpu(2, {62})});
  const auto lines = c.apply(back);
  ASSERT_EQ(lines.size(), 1u);  // GPU 2 is new: its XID stays
  EXPECT_THAT(lines[0], HasSubstr("GPU 1 (GPU-1) answers again after being gone from the driver's list"));
  EXPECT_TRUE(back.gpus[1].recent_xids.empty());
  EXPECT_EQ(back.gpus[2].recent_xids.size(), 1u);
}

}  // namespace
}  // namespace gf::sampler
