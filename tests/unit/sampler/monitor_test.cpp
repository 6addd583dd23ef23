#include "sampler/monitor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "support/eventually.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

#include "gf_test_paths.hpp"

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;
using test::make_gpu;

struct MonitorTest : ::testing::Test {
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  test::FakeClock clock;
  std::unique_ptr<Monitor> make(std::string proc_root = std::string(GF_FIXTURES_DIR) + "/proc/host") {
    MonitorOptions o;
    o.proc_root = std::move(proc_root);
    return std::make_unique<Monitor>(std::make_unique<test::ScriptedBackend>(st), clock, o);
  }
};

TEST_F(MonitorTest, CacheHonoursTtlAndUseCacheFalse) {
  st->next.gpus = {make_gpu(0, 10)};
  auto m = make();
  ASSERT_TRUE(m->snapshot());
  ASSERT_TRUE(m->snapshot());
  EXPECT_EQ(st->queries.load(), 1);  // second answered from the cache
  clock.advance(4900ms);
  ASSERT_TRUE(m->snapshot());
  EXPECT_EQ(st->queries.load(), 1);
  clock.advance(200ms);  // past the 5 s TTL
  ASSERT_TRUE(m->snapshot());
  EXPECT_EQ(st->queries.load(), 2);
  ASSERT_TRUE(m->snapshot(false));  // forced fresh
  EXPECT_EQ(st->queries.load(), 3);
}

// Issue 12, ?fresh=1 floods: a driver query in progress (a slow nvidia-smi, here held at a gate) must
// not hold up readers the cache can answer. On main one mutex covered both, so the cached read below
// waited until the gate opened.
TEST_F(MonitorTest, CachedReadsDoNotWaitBehindAQueryInProgress) {
  st->next.gpus = {make_gpu(0, 10)};
  auto m = make();
  ASSERT_TRUE(m->snapshot());  // cached for the 5 s TTL (the fake clock does not move)
  st->close_gate();
  std::thread slow([&] { (void)m->snapshot(false); });
  using test::eventually;
  ASSERT_TRUE(eventually([&] { return st->held.load() == 1; })) << "the forced query never reached the backend";
  std::atomic<bool> answered{false};
  std::thread reader([&] {
    auto s = m->snapshot(true);
    answered = s.has_value();
  });
  const bool in_time = eventually([&] { return answered.load(); });
  st->open_gate();  // whatever happened, nothing stays blocked
  slow.join();
  reader.join();
  EXPECT_TRUE(in_time) << "a cached read waited for the driver query in progress";
  EXPECT_EQ(st->queries.load(), 2);
}

TEST_F(MonitorTest, ErrorKeepsNothingStaleAndReports) {
  st->fail = true;
  auto m = make();
  auto s = m->snapshot();
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "scripted failure");
}

TEST_F(MonitorTest, ScoresEveryGpu) {
  // Which GPUs are available is allocator::check_availability's to say (tests/unit/allocator); the
  // monitor scores every GPU it reads, and a lost GPU has no score.
  st->next.gpus = {make_gpu(0, 90), make_gpu(1, 10), make_gpu(2, 0, 79000), make_gpu(3, 0)};
  st->next.gpus[3].health = core::Health::Lost;
  auto m = make();
  auto g = m->gpu(1);
  ASSERT_TRUE(g && g->has_value());
  EXPECT_NEAR(*(*g)->availability_score, 0.6 * 79000.0 / 80000.0 + 0.4 * 0.9, 1e-9);
  auto lost = m->gpu(3);
  ASSERT_TRUE(lost && lost->has_value());
  EXPECT_FALSE((*lost)->availability_score);
  auto none = m->gpu(9);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

TEST_F(MonitorTest, ResolvesProcessesFromProc) {
  auto g = make_gpu(0, 50, 40000);
  core::GpuProcess known;
  known.pid = 4242;
  known.used_memory_mib = 30000;
  core::GpuProcess pod;
  pod.pid = 5151;
  core::GpuProcess gone;
  gone.pid = 777777;
  gone.used_memory_mib = 1000;
  g.processes = {known, pod, gone};
  st->next.gpus = {g};
  auto m = make();
  auto s = m->snapshot();
  ASSERT_TRUE(s);
  const auto& ps = (*s)->gpus[0].processes;
  EXPECT_EQ(ps[0].name, "python3");
  EXPECT_EQ(ps[0].user, "root");
  EXPECT_EQ(ps[0].command, "python3 train.py --epochs 3");
  EXPECT_EQ(ps[0].container.value_or(""), "3f4e5d6c7b8a");
  EXPECT_EQ(ps[0].container_pid.value_or(0), 17u);
  EXPECT_EQ(ps[1].container.value_or(""), "k8s-pod:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
  EXPECT_TRUE(ps[2].name.empty());
  // 40000 used − 31000 known = 9000 not attributed to any process.
  EXPECT_EQ(*(*s)->gpus[0].memory_unattributed_mib, 9000u);
  // The driver named a pid we cannot see: say so rather than pretend.
  EXPECT_FALSE((*s)->process_visibility.complete);
  EXPECT_NE((*s)->process_visibility.message.find("1 of 3"), std::string::npos);
}

TEST_F(MonitorTest, SaysSoInsideAContainerPidNamespace) {
  st->next.gpus = {make_gpu(0, 0)};
  auto m = make(std::string(GF_FIXTURES_DIR) + "/proc/container");
  auto s = m->snapshot();
  ASSERT_TRUE(s);
  EXPECT_FALSE((*s)->process_visibility.complete);
  EXPECT_NE((*s)->process_visibility.message.find("pid namespace"), std::string::npos);
}

TEST(MonitorNoBackend, ServesEmptySnapshotSayingWhy) {
  test::FakeClock clock;
  MonitorOptions o;
  o.no_backend_reasons = {"nvml: cannot load libnvidia-ml.so.1"};
  Monitor m(nullptr, clock, o);
  auto s = m.snapshot();
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->backend, "none");
  EXPECT_TRUE((*s)->gpus.empty());
  ASSERT_EQ((*s)->warnings.size(), 2u);
  EXPECT_EQ((*s)->warnings[1], "nvml: cannot load libnvidia-ml.so.1");
}

}  // namespace
}  // namespace gf::sampler

namespace gf::sampler {
namespace {

TEST(MonitorPrime, ProbeIsProcessedAndServedWithoutAnotherQuery) {
  auto st = std::make_shared<test::ScriptedBackend::State>();
  test::FakeClock clock;
  MonitorOptions o;
  o.proc_root = std::string(GF_FIXTURES_DIR) + "/proc/host";
  Monitor m(std::make_unique<test::ScriptedBackend>(st), clock, o);
  core::Snapshot probe;
  probe.gpus = {test::make_gpu(0, 20, 30000)};
  core::GpuProcess p;
  p.pid = 4242;
  p.used_memory_mib = 10000;
  probe.gpus[0].processes.push_back(p);
  m.prime(probe);
  auto s = m.snapshot(true);
  ASSERT_TRUE(s);
  EXPECT_EQ(st->queries.load(), 0);                       // served from the primed cache
  EXPECT_EQ((*s)->gpus[0].processes[0].name, "python3");  // resolved from /proc
  EXPECT_TRUE((*s)->gpus[0].availability_score);          // scored
  EXPECT_EQ(*(*s)->gpus[0].memory_unattributed_mib, 20000u);
}

}  // namespace
}  // namespace gf::sampler
