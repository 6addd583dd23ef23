#include "sampler/hub.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "platform/clock.hpp"
#include "sampler/sampler.hpp"
#include "support/scripted_backend.hpp"

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;

struct HubTest : ::testing::Test {
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  Monitor monitor{std::make_unique<test::ScriptedBackend>(st), platform::system_clock(), MonitorOptions{}};
  void SetUp() override { st->next.gpus = {test::make_gpu(0, 40), test::make_gpu(1, 60)}; }
};

TEST_F(HubTest, OneDriverQueryPerTickForAllListeners) {
  SampleHub hub(monitor);
  std::atomic<int> a{0}, b{0}, c{0};
  auto sa = hub.subscribe(50ms, [&](const auto&, auto) { ++a; });
  auto sb = hub.subscribe(50ms, [&](const auto&, auto) { ++b; });
  auto sc = hub.subscribe(50ms, [&](const auto&, auto) { ++c; });
  std::this_thread::sleep_for(600ms);
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
  SampleHub hub(monitor);
  std::atomic<int> n{0};
  auto sub = hub.subscribe(50ms, [&](const auto&, auto) { ++n; });
  std::this_thread::sleep_for(120ms);
  sub.reset();
  const int after = n.load();
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(n.load(), after);
  EXPECT_GE(after, 1);
}

TEST_F(HubTest, ErrorsReachListeners) {
  st->fail = true;
  SampleHub hub(monitor);
  std::atomic<int> errors{0};
  auto sub = hub.subscribe(50ms, [&](const Result<core::SnapshotPtr>& s, auto) {
    if (!s) ++errors;
  });
  std::this_thread::sleep_for(150ms);
  sub.reset();
  EXPECT_GE(errors.load(), 1);
}

TEST_F(HubTest, TwoSamplersShareOneLoopAndGetStats) {
  SampleHub hub(monitor);
  auto s1 = Sampler::create(hub, 50ms);
  auto s2 = Sampler::create(hub, 100ms, {1});
  ASSERT_TRUE(s1 && s2);
  (*s1)->start();
  (*s2)->start();
  std::this_thread::sleep_for(550ms);
  auto r1 = (*s1)->stop();
  auto r2 = (*s2)->stop();
  EXPECT_GE(r1.sample_count, 6u);
  EXPECT_GE(r2.sample_count, 3u);
  EXPECT_LT(r2.sample_count, r1.sample_count);
  ASSERT_EQ(r1.gpus.size(), 2u);
  ASSERT_EQ(r2.gpus.size(), 1u);  // filtered to GPU 1
  EXPECT_DOUBLE_EQ(r2.gpus.at(1).utilization->mean, 60.0);
  // Queries follow the fastest listener, not the sum of both.
  EXPECT_LE(static_cast<std::size_t>(st->queries.load()), r1.sample_count + 2);
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

}  // namespace
}  // namespace gf::sampler
