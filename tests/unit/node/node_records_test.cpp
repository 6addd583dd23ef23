#include "node/node_records.hpp"

#include <gtest/gtest.h>

#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;

// The records view reads through its own connection what the writer (here a NodeAllocator over a
// second connection, as the arbiter's) wrote.
struct NodeRecordsTest : ::testing::Test {
  test::TempDir dir;
  test::FakeClock clock;
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  sampler::Monitor monitor{std::make_unique<test::ScriptedBackend>(st), clock, sampler::MonitorOptions{}};
  std::unique_ptr<store::NodeStore> writer;
  std::unique_ptr<NodeRecords> records;

  std::unique_ptr<store::NodeStore> open() {
    auto s =
        store::NodeStore::open((dir.path() / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : nullptr;
  }
  void SetUp() override {
    {
      std::lock_guard lock(st->mu);
      st->next.gpus = {test::make_gpu(0, 0, 1000), test::make_gpu(1, 0, 1000)};
      st->next.backend = "scripted";
    }
    writer = open();
    ASSERT_TRUE(writer);
    auto reader = open();
    ASSERT_TRUE(reader);
    records = std::make_unique<NodeRecords>(std::move(reader), clock);
  }
  Result<void> enqueue(const std::string& id) {
    core::Waiter w;
    w.id = id;
    w.gpus = 1;
    w.owner = core::LeaseOwner{4242, 1, "alice"};
    return writer->enqueue(w);
  }
};

TEST_F(NodeRecordsTest, CountsAreReadAtMostOnceASecondOnTheClock) {
  auto c = records->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 0u);
  ASSERT_TRUE(enqueue("w1"));
  clock.advance(999ms);
  c = records->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 0u) << "within the second: the counts read before";
  clock.advance(1ms);
  c = records->counts();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->waiting, 1u);
}

TEST_F(NodeRecordsTest, AllocationThroughThePortRecordsTheClocksTime) {
  scheduler::NodeAllocator alloc(*writer, core::Topology{}, clock);
  scheduler::AllocationRequest req;
  req.need.gpus = 1;
  req.need.min_free_memory_mib = 1000;
  req.job_id = "job-1";
  req.owner = core::LeaseOwner{4242, 1, "alice"};
  auto a = alloc.allocate(req, monitor.snapshot(false));
  ASSERT_TRUE(a) << a.error().message;
  const auto wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count();
  EXPECT_EQ(a->lease.created_at_ms, wall_ms);
  auto active = records->active();
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].created_at_ms, wall_ms);
  EXPECT_EQ(records->path(), (dir.path() / "gf.db").string());
}

}  // namespace
}  // namespace gf::node
