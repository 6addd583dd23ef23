#include "node/node_jobs.hpp"

#include <gtest/gtest.h>

#include "store/node_store.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;

struct NodeJobsTest : ::testing::Test {
  test::TempDir dir;
  test::FakeClock clock;
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  sampler::Monitor monitor{std::make_unique<test::ScriptedBackend>(st), clock, sampler::MonitorOptions{}};
  std::unique_ptr<NodeJobs> jobs;

  void SetUp() override {
    {
      std::lock_guard lock(st->mu);
      st->next.gpus = {test::make_gpu(0, 0, 1000), test::make_gpu(1, 0, 1000)};
      st->next.backend = "scripted";
    }
    auto s =
        store::NodeStore::open((dir.path() / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
    ASSERT_TRUE(s) << s.error().message;
    jobs = std::make_unique<NodeJobs>(std::move(*s), monitor, clock);
  }
  Result<void> enqueue(const std::string& id) {
    core::Waiter w;
    w.id = id;
    w.gpus = 1;
    w.owner = core::LeaseOwner{4242, 1, "alice"};
    return jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return s.enqueue(w); });
  }
};

TEST_F(NodeJobsTest, CountsAreReadAtMostOnceASecondOnTheClock) {
  auto c = jobs->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 0u);
  ASSERT_TRUE(enqueue("w1"));
  clock.advance(999ms);
  c = jobs->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 0u) << "within the second: the counts read before";
  clock.advance(1ms);
  c = jobs->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 1u);
}

TEST_F(NodeJobsTest, AllocationThroughThePortRecordsTheClocksTime) {
  scheduler::AllocationRequest req;
  req.gpus = 1;
  req.min_memory_mib = 1000;
  req.job_id = "job-1";
  req.owner = core::LeaseOwner{4242, 1, "alice"};
  auto a = jobs->with([&](core::JobStore&, scheduler::NodeAllocator& alloc) { return alloc.allocate(req); });
  ASSERT_TRUE(a) << a.error().message;
  const auto wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count();
  EXPECT_EQ(a->lease.created_at_ms, wall_ms);
  auto active = jobs->with([](core::JobStore& s, scheduler::NodeAllocator&) { return s.active(); });
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].created_at_ms, wall_ms);
  EXPECT_EQ(jobs->path(), (dir.path() / "gf.db").string());
}

}  // namespace
}  // namespace gf::node
