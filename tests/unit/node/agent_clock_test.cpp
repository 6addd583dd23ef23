// The agent's loop on a fake clock: the hub is driven by hand (SampleHub::Drive::Manual) and the history
// writer by step_history(now), so cadences, alert hold times and failures are checked without sleeping.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "node/agent.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;

// A MetricHistory that records what the agent asks of it; it can be told to fail.
struct HistoryLog {
  std::vector<std::size_t> batches;  // snapshots per written batch
  std::vector<core::MetricHistory::TimePoint> maintained;
  std::size_t alert_events = 0;
  bool fail = false;
};

class RecordingHistory final : public core::MetricHistory {
 public:
  explicit RecordingHistory(std::shared_ptr<HistoryLog> log) : log_(std::move(log)) {}
  Result<void> append_batch(const std::vector<core::SnapshotPtr>& batch) override {
    if (log_->fail) return make_error("disk full");
    log_->batches.push_back(batch.size());
    return {};
  }
  Result<void> maintain(TimePoint now) override {
    log_->maintained.push_back(now);
    return {};
  }
  Result<std::vector<core::HistoryPoint>> query(unsigned, core::Field, TimePoint, TimePoint,
                                                std::chrono::seconds) override {
    return make_error("not kept by this test history");
  }
  Result<void> record_alerts(const std::vector<core::AlertEvent>& events) override {
    log_->alert_events += events.size();
    return {};
  }
  Result<std::vector<core::Alert>> recent_alerts(const core::AlertQuery&) override {
    return std::vector<core::Alert>{};
  }
  std::string location() const override { return "test history"; }

 private:
  std::shared_ptr<HistoryLog> log_;
};

core::AlertRule usage_rule(double threshold, std::chrono::milliseconds hold) {
  core::AlertRule r;
  r.kind = core::AlertKind::HighGpuUsage;
  r.threshold = threshold;
  r.duration = hold;
  return r;
}

struct ClockedAgent : ::testing::Test {
  test::FakeClock clock;
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  std::shared_ptr<HistoryLog> log = std::make_shared<HistoryLog>();
  std::unique_ptr<sampler::Monitor> monitor;
  std::unique_ptr<sampler::SampleHub> hub;
  std::unique_ptr<Agent> agent;
  std::chrono::steady_clock::time_point t0;
  std::vector<std::string> logged;  // the agent's log lines, in order

  void SetUp() override {
    set_gpus(10, 20);
    sampler::MonitorOptions mo;
    mo.cache_ttl = 0ms;
    monitor = std::make_unique<sampler::Monitor>(std::make_unique<test::ScriptedBackend>(st), clock, mo);
    hub = std::make_unique<sampler::SampleHub>(*monitor, clock, sampler::SampleHub::Drive::Manual);
  }
  void TearDown() override {
    if (agent) agent->stop();
  }
  void set_gpus(unsigned util0, unsigned util1) {
    std::lock_guard lock(st->mu);
    st->next.gpus = {test::make_gpu(0, util0), test::make_gpu(1, util1)};
    st->next.backend = "scripted";
  }
  // Every second on the fake clock; history written by step_history(), never by a thread.
  void start(std::vector<core::AlertRule> rules = {}, bool with_history = true) {
    AgentOptions ao;
    ao.interval = 1s;
    ao.history_flush = 2s;
    ao.history_maintain = 10s;
    ao.writer_thread = false;
    ao.alert_rules = std::move(rules);
    ao.log = [this](const std::string& line) { logged.push_back(line); };
    std::unique_ptr<core::MetricHistory> w, r;
    if (with_history) {
      w = std::make_unique<RecordingHistory>(log);
      r = std::make_unique<RecordingHistory>(log);
    }
    agent = std::make_unique<Agent>(*monitor, *hub, std::move(w), std::move(r), ao, clock);
    t0 = clock.now();
    agent->start();
  }
  // One second of the loop: the clock moves, the hub ticks, the writer takes its turn.
  HistoryStep second() {
    clock.advance(1s);
    hub->step(clock.now());
    return agent->step_history(clock.now());
  }
};

TEST_F(ClockedAgent, TicksFollowTheFakeClock) {
  start({}, false);
  ASSERT_TRUE(agent->latest());
  EXPECT_EQ(agent->latest()->sequence, 1u);  // start() published the first reading
  EXPECT_EQ(agent->latest()->taken, t0);
  EXPECT_EQ(hub->step(clock.now()), 1u);  // the first aligned tick is due at once (t0 is a whole second)
  EXPECT_EQ(hub->step(clock.now()), 0u);  // and not again before a second has passed
  clock.advance(990ms);
  EXPECT_EQ(hub->step(clock.now()), 0u);
  clock.advance(10ms);
  EXPECT_EQ(hub->step(clock.now()), 1u);
  const auto c = agent->counters();
  EXPECT_EQ(c.collections, 2u);
  ASSERT_TRUE(c.last_success);
  EXPECT_EQ(*c.last_success, t0 + 1s);
  EXPECT_EQ(agent->latest()->taken, t0 + 1s);
  EXPECT_EQ(agent->latest()->sequence, 3u);
}

TEST_F(ClockedAgent, HistoryIsWrittenOnTheFlushCadenceAndMaintainedOnItsOwn) {
  start();
  hub->step(clock.now());
  const auto first = agent->step_history(clock.now());
  EXPECT_TRUE(first.flushed);     // nothing written yet: the first round writes at once
  EXPECT_TRUE(first.maintained);  // and maintains at once
  EXPECT_EQ(first.next_due, t0 + 2s);
  ASSERT_EQ(log->batches, std::vector<std::size_t>({1}));
  ASSERT_EQ(log->maintained.size(), 1u);
  EXPECT_EQ(log->maintained[0], clock.wall_now());  // maintenance is told the clock's wall time

  std::vector<int> flushed_at, maintained_at;
  for (int k = 1; k <= 10; ++k) {
    const auto step = second();
    if (step.flushed) flushed_at.push_back(k);
    if (step.maintained) maintained_at.push_back(k);
  }
  EXPECT_EQ(flushed_at, std::vector<int>({2, 4, 6, 8, 10}));
  EXPECT_EQ(maintained_at, std::vector<int>({10}));
  EXPECT_EQ(log->batches, std::vector<std::size_t>({1, 2, 2, 2, 2, 2}));  // every tick written once
  ASSERT_EQ(log->maintained.size(), 2u);
  EXPECT_EQ(log->maintained[1] - log->maintained[0], 10s);
  EXPECT_EQ(agent->counters().history_batches, 6u);
}

TEST_F(ClockedAgent, AFailedWriteIsRetriedOnTheNextRound) {
  start();
  hub->step(clock.now());
  agent->step_history(clock.now());
  log->fail = true;
  second();
  second();  // t0 + 2 s: the write fails
  auto c = agent->counters();
  EXPECT_EQ(c.history_errors, 1u);
  EXPECT_EQ(c.history_error, "disk full");
  log->fail = false;
  second();
  second();  // t0 + 4 s: the kept batch and the new ticks go together
  c = agent->counters();
  EXPECT_EQ(log->batches, std::vector<std::size_t>({1, 4}));
  EXPECT_TRUE(c.history_error.empty());
  EXPECT_EQ(c.history_batches, 2u);
}

TEST_F(ClockedAgent, StopWritesWhatIsPendingWithoutAWriterThread) {
  start();
  hub->step(clock.now());
  clock.advance(1s);
  hub->step(clock.now());
  EXPECT_TRUE(log->batches.empty());
  agent->stop();
  EXPECT_EQ(log->batches, std::vector<std::size_t>({2}));
}

TEST_F(ClockedAgent, AlertHoldTimesRunOnTheFakeClock) {
  set_gpus(10, 90);
  start({usage_rule(50, 5s)});
  hub->step(clock.now());
  for (int k = 1; k <= 4; ++k) second();
  EXPECT_TRUE(agent->firing().empty()) << "held 4 s of 5";
  second();
  ASSERT_EQ(agent->firing().size(), 1u);
  EXPECT_EQ(agent->firing()[0].gpu_index, 1u);
}

TEST_F(ClockedAgent, AThrowingBackendIsAFailedCollectionAndPublishingResumesAfterIt) {
  start();
  hub->step(clock.now());
  const auto before = agent->latest();
  ASSERT_TRUE(before);
  st->throws = true;
  second();
  second();
  auto c = agent->counters();
  EXPECT_EQ(c.collection_errors, 2u);
  EXPECT_NE(c.last_error.find("scripted exception"), std::string::npos) << c.last_error;
  EXPECT_EQ(agent->latest(), before);  // the last good reading stays published
  EXPECT_EQ(*c.last_success, t0);      // and the health route sees how old it is

  st->throws = false;
  set_gpus(33, 44);
  second();
  c = agent->counters();
  EXPECT_TRUE(c.last_error.empty());
  EXPECT_EQ(*c.last_success, t0 + 3s);
  ASSERT_NE(agent->latest(), before);
  EXPECT_EQ(agent->latest()->snapshot->gpus.at(0).utilization_pct.value(), 33u);
  EXPECT_GT(agent->latest()->sequence, before->sequence);
}

TEST_F(ClockedAgent, AFailureEpisodeIsLoggedOnceWithItsCauseAndItsRecovery) {
  using ::testing::HasSubstr;
  start();
  hub->step(clock.now());
  EXPECT_TRUE(logged.empty());
  st->fail = true;
  for (int k = 1; k <= 5; ++k) second();  // t0 + 1 s … t0 + 5 s fail the same way
  ASSERT_EQ(logged.size(), 1u) << "one line for the episode, not one per failed collection";
  EXPECT_THAT(logged[0], HasSubstr("scripted backend"));
  EXPECT_THAT(logged[0], HasSubstr("scripted failure"));

  st->fail = false;
  st->throws = true;
  second();  // t0 + 6 s: another cause, said once
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_THAT(logged[1], HasSubstr("scripted exception"));
  EXPECT_THAT(logged[1], HasSubstr("6 in a row"));
  st->throws = false;
  st->fail = true;
  second();  // t0 + 7 s: the cause changes again, unlogged (it still reaches /api/health)
  EXPECT_EQ(logged.size(), 2u);
  EXPECT_EQ(agent->counters().last_error, "scripted failure");

  st->fail = false;
  second();  // t0 + 8 s: recovered, seven failures over the 7 s since the first
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_THAT(logged[2], HasSubstr("scripted backend recovered after 7 failed collections / 7.0 s"));
  second();
  EXPECT_EQ(logged.size(), 3u);  // good collections log nothing

  st->fail = true;
  second();  // a new episode starts with a line of its own
  ASSERT_EQ(logged.size(), 4u);
  EXPECT_THAT(logged[3], HasSubstr("scripted failure"));
  st->fail = false;
  second();
  ASSERT_EQ(logged.size(), 5u);
  EXPECT_THAT(logged[4], HasSubstr("recovered after 1 failed collection / 1.0 s"));
}

TEST_F(ClockedAgent, AThrowingAlertListenerDoesNotStopTheOthersOrTheCollection) {
  set_gpus(10, 90);
  start({usage_rule(50, 0ms)});
  int bad_calls = 0, good_calls = 0;
  agent->on_alerts([&](const auto&) {
    ++bad_calls;
    throw std::runtime_error("listener bug");
  });
  agent->on_alerts([&](const auto&) { ++good_calls; });
  hub->step(clock.now());
  EXPECT_EQ(bad_calls, 1);
  EXPECT_EQ(good_calls, 1);
  EXPECT_EQ(agent->firing().size(), 1u);
  const auto c = agent->counters();
  EXPECT_EQ(c.collections, 1u);
  EXPECT_EQ(c.collection_errors, 0u);
  EXPECT_EQ(hub->listener_exceptions(), 0u);  // caught inside the agent, not left to the hub
}

}  // namespace
}  // namespace gf::node
