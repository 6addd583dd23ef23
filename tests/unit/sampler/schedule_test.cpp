#include "sampler/schedule.hpp"

#include <gtest/gtest.h>

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;
using TP = std::chrono::steady_clock::time_point;

TEST(TickSchedule, GridDoesNotDriftWhenServedLate) {
  TickSchedule s;
  const TP t0{};
  auto id = s.add(100ms, t0);
  EXPECT_EQ(s.take_due(t0), std::vector<TickSchedule::Id>{id});
  EXPECT_EQ(*s.next_due(), t0 + 100ms);
  // Served 30 ms late: the next tick stays on the grid (t0+200), not late+100.
  EXPECT_EQ(s.take_due(t0 + 130ms).size(), 1u);
  EXPECT_EQ(*s.next_due(), t0 + 200ms);
  EXPECT_EQ(s.missed(id), 0u);
}

TEST(TickSchedule, MissedTicksAreSkippedAndCounted) {
  TickSchedule s;
  const TP t0{};
  auto id = s.add(100ms, t0);
  s.take_due(t0);
  // The loop stalls until t0+450: ticks at 100..400 collapse into one delivery, 3 missed.
  EXPECT_EQ(s.take_due(t0 + 450ms).size(), 1u);
  EXPECT_EQ(s.missed(id), 3u);
  EXPECT_EQ(*s.next_due(), t0 + 500ms);
}

TEST(TickSchedule, SeveralListenersShareTicks) {
  TickSchedule s;
  const TP t0{};
  auto fast = s.add(100ms, t0);
  auto slow = s.add(300ms, t0);
  EXPECT_EQ(s.take_due(t0).size(), 2u);
  EXPECT_EQ(s.take_due(t0 + 100ms), std::vector<TickSchedule::Id>{fast});
  EXPECT_EQ(s.take_due(t0 + 200ms), std::vector<TickSchedule::Id>{fast});
  EXPECT_EQ(s.take_due(t0 + 300ms).size(), 2u);  // one query serves both
  s.remove(fast);
  EXPECT_EQ(*s.next_due(), t0 + 600ms);
  s.remove(slow);
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.next_due());
}

TEST(TickSchedule, AlignedListenersAddedAtDifferentTimesTickTogether) {
  TickSchedule s;
  const TP t0{12'345ms};
  auto main_loop = s.add(1s, t0, true);
  EXPECT_EQ(*s.next_due(), TP{13s});  // the next whole second, not t0
  auto ws = s.add(100ms, t0 + 437ms, true);
  auto slow = s.add(5s, t0 + 2s, true);
  EXPECT_EQ(s.take_due(TP{12'800ms}), std::vector<TickSchedule::Id>{ws});
  s.take_due(TP{12'900ms});
  // At 13 s both the 1 s and the 100 ms listener are due: one tick serves them.
  EXPECT_EQ(s.take_due(TP{13s}), (std::vector<TickSchedule::Id>{main_loop, ws}));
  for (TP t{13'100ms}; t < TP{15s}; t += 100ms) s.take_due(t);
  EXPECT_EQ(s.take_due(TP{15s}), (std::vector<TickSchedule::Id>{main_loop, ws, slow}));
  EXPECT_EQ(s.missed(ws), 0u);
}

TEST(TickSchedule, NotDueYet) {
  TickSchedule s;
  const TP t0{};
  s.add(1s, t0);
  s.take_due(t0);
  EXPECT_TRUE(s.take_due(t0 + 500ms).empty());
}

}  // namespace
}  // namespace gf::sampler
