#include "sampler/hub.hpp"

#include <gtest/gtest.h>

#include <thread>

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "platform/clock.hpp"
#include "sampler/sampler.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;

struct HubTest : ::testing::Test {
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  test::FakeClock clock;
  Monitor monitor{std::make_unique<test::ScriptedBackend>(st), clock, MonitorOptions{}};
  void SetUp() override { st->next.gpus = {test::make_gpu(0, 40), test::make_gpu(1, 60)}; }
  // Moves the fake clock forward by `total` in `tick` steps, running the hub's tick after each.
  void run_for(SampleHub& hub, std::chrono::nanoseconds total, std::chrono::nanoseconds tick = 10ms) {
    hub.step(clock.now());
    for (auto t = std::chrono::nanoseconds::zero(); t < total; t += tick) {
      clock.advance(tick);
      hub.step(clock.now());
    }
  }
};

// A backend that throws instead of returning an error (a bug in a driver binding, say) while told to.
class ThrowingBackend final : public backends::Backend {
 public:
  explicit ThrowingBackend(std::shared_ptr<test::ScriptedBackend::State> st,
                           std::shared_ptr<std::atomic<bool>> throwing)
      : inner_(std::move(st)), throwing_(std::move(throwing)) {}
  std::string_view name() const noexcept override { return "throwing"; }
  Result<core::Snapshot> snapshot() override {
    if (throwing_->load()) throw std::runtime_error("driver binding exploded");
    return inner_.snapshot();
  }

 private:
  test::ScriptedBackend inner_;
  std::shared_ptr<std::atomic<bool>> throwing_;
};

TEST_F(HubTest, OneDriverQueryPerTickForAllListeners) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  std::atomic<int> a{0}, b{0}, c{0};
  auto sa = hub.subscribe(50ms, [&](const auto&, auto) { ++a; });
  auto sb = hub.subscribe(50ms, [&](const auto&, auto) { ++b; });
  auto sc = hub.subscribe(50ms, [&](const auto&, auto) { ++c; });
  run_for(hub, 600ms);
  sa.reset();
  sb.reset();
  sc.reset();
  const int deliveries = a + b + c;
  EXPECT_GE(a.load(), 5);
  // Three listeners on one grid: about one query per tick, far fewer than one per delivery.
  EXPECT_LT(st->queries.load(), deliveries * 2 / 3);
  EXPECT_EQ(static_cast<std::uint64_t>(st->queries.load()), hub.query_count());
}

TEST_F(HubTest, UnsubscribedListenerIsNeverCalledAgain) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  std::atomic<int> n{0};
  auto sub = hub.subscribe(50ms, [&](const auto&, auto) { ++n; });
  run_for(hub, 120ms);
  sub.reset();
  const int after = n.load();
  run_for(hub, 200ms);
  EXPECT_EQ(n.load(), after);
  EXPECT_GE(after, 1);
}

TEST_F(HubTest, ErrorsReachListeners) {
  st->fail = true;
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  std::atomic<int> errors{0};
  auto sub = hub.subscribe(50ms, [&](const Result<core::SnapshotPtr>& s, auto) {
    if (!s) ++errors;
  });
  run_for(hub, 150ms);
  sub.reset();
  EXPECT_GE(errors.load(), 1);
}

TEST_F(HubTest, TwoSamplersShareOneLoopAndGetStats) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  auto s1 = Sampler::create(hub, 50ms);
  auto s2 = Sampler::create(hub, 100ms, {1});
  ASSERT_TRUE(s1 && s2);
  (*s1)->start();
  (*s2)->start();
  run_for(hub, 550ms);
  auto r1 = (*s1)->stop();
  auto r2 = (*s2)->stop();
  EXPECT_GE(r1.sample_count, 6u);
  EXPECT_GE(r2.sample_count, 3u);
  EXPECT_LT(r2.sample_count, r1.sample_count);
  ASSERT_EQ(r1.gpus.size(), 2u);
  ASSERT_EQ(r2.gpus.size(), 1u);  // filtered to GPU 1
  EXPECT_DOUBLE_EQ(r2.gpus.at(1).utilization->mean, 60.0);
  // Queries follow the fastest listener, not the sum of both (besides each sampler's first and last
  // samples, taken with fresh counters outside the ticks: Sampler::start and stop).
  EXPECT_LE(static_cast<std::size_t>(st->queries.load()), r1.sample_count + 4);
  // Stopping again gives the same report; the sampler no longer samples.
  EXPECT_EQ((*s1)->stop().sample_count, r1.sample_count);
}

TEST_F(HubTest, IntervalIsValidated) {
  SampleHub hub(monitor);
  EXPECT_FALSE(Sampler::create(hub, 10ms));
  EXPECT_FALSE(Sampler::create(hub, 120s));
  EXPECT_TRUE(Sampler::create(hub, 50ms));
  EXPECT_TRUE(Sampler::create(hub, 1s));
}

// The hub's own thread (real clock) delivers too: the loop that step() is the body of.
TEST_F(HubTest, OwnThreadDrivesTheTicks) {
  Monitor real{std::make_unique<test::ScriptedBackend>(st), platform::system_clock(), MonitorOptions{}};
  SampleHub hub(real);
  std::mutex mu;
  std::condition_variable cv;
  int n = 0;
  auto sub = hub.subscribe(10ms, [&](const auto&, auto) {
    std::lock_guard lock(mu);
    ++n;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return n >= 3; }));
}

TEST_F(HubTest, StepRunsOnlyTheListenersDueOnTheirGrid) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  int fast = 0, slow = 0;
  auto sf = hub.subscribe(100ms, [&](const auto&, auto) { ++fast; });
  auto ss = hub.subscribe(300ms, [&](const auto&, auto) { ++slow; });
  const auto t0 = clock.now();
  ASSERT_EQ(hub.next_due(), t0);
  EXPECT_EQ(hub.step(t0), 2u);  // both are due at once
  EXPECT_EQ(hub.query_count(), 1u);
  EXPECT_EQ(hub.next_due(), t0 + 100ms);
  clock.advance(50ms);
  EXPECT_EQ(hub.step(clock.now()), 0u);  // nothing due: no driver query
  EXPECT_EQ(hub.query_count(), 1u);
  clock.advance(50ms);  // t0 + 100 ms
  EXPECT_EQ(hub.step(clock.now()), 1u);
  clock.advance(100ms);  // t0 + 200 ms
  EXPECT_EQ(hub.step(clock.now()), 1u);
  clock.advance(100ms);  // t0 + 300 ms: both again, one query
  EXPECT_EQ(hub.step(clock.now()), 2u);
  EXPECT_EQ(hub.query_count(), 4u);
  EXPECT_EQ(fast, 4);
  EXPECT_EQ(slow, 2);
  EXPECT_EQ(sf.missed_ticks(), 0u);
  // A tick served late skips the grid points it missed instead of bunching them up.
  clock.advance(350ms);  // t0 + 650 ms: the fast one's 400 and 500 were missed, 600 is served late
  EXPECT_EQ(hub.step(clock.now()), 2u);
  EXPECT_EQ(fast, 5);
  EXPECT_EQ(sf.missed_ticks(), 2u);
  EXPECT_EQ(ss.missed_ticks(), 0u);  // the slow one's 600 is served late, none skipped
  EXPECT_EQ(hub.next_due(), t0 + 700ms);
  EXPECT_EQ(st->queries.load(), 5);
}

TEST_F(HubTest, ListenersGetTheTimeOfTheFakeClock) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  std::vector<SampleHub::TimePoint> seen;
  auto sub = hub.subscribe(1s, [&](const auto&, SampleHub::TimePoint taken) { seen.push_back(taken); });
  const auto t0 = clock.now();
  hub.step(t0);
  clock.advance(1s);
  hub.step(clock.now());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], t0);
  EXPECT_EQ(seen[1], t0 + 1s);
}

TEST_F(HubTest, ABackendThatThrowsBecomesAnErrorAndTheLoopGoesOn) {
  auto throwing = std::make_shared<std::atomic<bool>>(true);
  Monitor m{std::make_unique<ThrowingBackend>(st, throwing), clock, MonitorOptions{}};
  SampleHub hub(m, clock, SampleHub::Drive::Manual);
  std::vector<std::string> errors;
  int good = 0;
  auto sub = hub.subscribe(1s, [&](const Result<core::SnapshotPtr>& s, auto) {
    if (s)
      ++good;
    else
      errors.push_back(s.error().message);
  });
  hub.step(clock.now());
  clock.advance(1s);
  hub.step(clock.now());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("driver binding exploded"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("throwing"), std::string::npos) << errors[0];  // names the backend
  EXPECT_EQ(hub.backend_exceptions(), 2u);
  throwing->store(false);  // the backend recovers
  clock.advance(1s);
  hub.step(clock.now());
  EXPECT_EQ(good, 1);
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(hub.query_count(), 3u);
}

TEST_F(HubTest, AListenerThatThrowsDoesNotStopTheOthers) {
  SampleHub hub(monitor, clock, SampleHub::Drive::Manual);
  int calls_to_bad = 0, good = 0;
  auto bad = hub.subscribe(1s, [&](const auto&, auto) {
    ++calls_to_bad;
    throw std::logic_error("listener bug");
  });
  auto ok = hub.subscribe(1s, [&](const auto&, auto) { ++good; });
  for (int i = 0; i < 3; ++i) {
    hub.step(clock.now());
    clock.advance(1s);
  }
  EXPECT_EQ(calls_to_bad, 3);  // still subscribed, still called
  EXPECT_EQ(good, 3);
  EXPECT_EQ(hub.listener_exceptions(), 3u);
}

// On its own thread too: a throwing backend does not end the thread; ticks keep coming after it.
TEST_F(HubTest, OwnThreadSurvivesAThrowingBackend) {
  auto throwing = std::make_shared<std::atomic<bool>>(true);
  Monitor m{std::make_unique<ThrowingBackend>(st, throwing), platform::system_clock(), MonitorOptions{}};
  SampleHub hub(m);
  std::mutex mu;
  std::condition_variable cv;
  int errors = 0, good = 0;
  auto sub = hub.subscribe(10ms, [&](const Result<core::SnapshotPtr>& s, auto) {
    std::lock_guard lock(mu);
    if (s)
      ++good;
    else
      ++errors;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return errors >= 2; }));
  throwing->store(false);
  EXPECT_TRUE(cv.wait_for(lock, 10s, [&] { return good >= 2; }));
}

}  // namespace
}  // namespace gf::sampler
