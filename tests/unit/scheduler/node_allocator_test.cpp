#include "scheduler/node_allocator.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "allocator/availability.hpp"
#include "core/score.hpp"
#include "store/node_store.hpp"
#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

namespace gf::scheduler {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

core::GpuReading gpu(unsigned i, unsigned util, std::uint64_t used) {
  core::GpuReading g;
  g.index = i;
  g.uuid = "GPU-" + std::to_string(i);
  g.name = "Test GPU";
  g.memory_total_mib = 80000;
  g.memory_used_mib = used;
  g.memory_free_mib = 80000 - used;
  g.utilization_pct = util;
  g.availability_score = core::availability_score(g);
  return g;
}

struct NodeAllocatorTest : ::testing::Test {
  test::TempDir tmp;
  fs::path dir = tmp / "node";  // made by the store itself
  // What the "driver" reports; a test may change it from another thread.
  struct Gpus {
    std::mutex mu;
    std::vector<core::GpuReading> gpus;
    void set(std::vector<core::GpuReading> g) {
      std::lock_guard lock(mu);
      gpus = std::move(g);
    }
  };
  std::shared_ptr<Gpus> snap = std::make_shared<Gpus>();
  void SetUp() override { snap->set({gpu(0, 0, 1000), gpu(1, 90, 1000), gpu(2, 0, 75000), gpu(3, 10, 2000)}); }
  std::unique_ptr<store::NodeStore> store() {
    auto s = store::NodeStore::open((dir / "gf.db").string(), [](const core::LeaseOwner&) { return true; });
    EXPECT_TRUE(s);
    return std::move(*s);
  }
  // A new "driver query" each time it is called, as the CLI's.
  ReadingQuery query() {
    auto sp = snap;
    return [sp] {
      auto s = std::make_shared<core::Snapshot>();
      std::lock_guard lock(sp->mu);
      s->gpus = sp->gpus;
      return Result<core::SnapshotPtr>(core::SnapshotPtr(s));
    };
  }
  static AllocationRequest req(unsigned n, std::string job) {
    AllocationRequest r;
    r.need.gpus = n;
    r.need.min_free_memory_mib = 8000;
    r.job_id = job;
    r.name = job;
    r.owner = {42, 1, "alice"};
    return r;
  }
};

// The availability check the agent's route uses (allocator::check_availability), over what the
// allocator itself sees: a fresh reading and the store's active leases.
std::pair<bool, std::string> check_availability(core::LeaseStore& st, const ReadingQuery& query, unsigned gpus,
                                                std::uint64_t min_memory_mib) {
  allocator::SelectRequest sr;
  sr.need.gpus = gpus;
  sr.need.min_free_memory_mib = min_memory_mib;
  auto active = st.active();
  EXPECT_TRUE(active);
  for (const auto& l : *active)
    for (const auto& g : l.gpus) sr.leased.insert(g.index);
  auto snap = query();
  EXPECT_TRUE(snap);
  const auto a = allocator::check_availability(**snap, core::Topology{}, sr);
  return {a.available, allocator::describe(a)};
}

TEST_F(NodeAllocatorTest, CheckAvailabilitySaysWhyPerGpu) {
  auto st = store();
  auto [ok, msg] = check_availability(*st, query(), 2, 8000);
  EXPECT_TRUE(ok);
  EXPECT_NE(msg.find("2 of 4 GPUs qualify"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPU 1 does not"), std::string::npos) << msg;  // 90 % busy
  EXPECT_NE(msg.find("GPU 2 does not"), std::string::npos) << msg;  // 5000 MiB free
  auto [no, why] = check_availability(*st, query(), 3, 8000);
  EXPECT_FALSE(no);
  EXPECT_NE(why.find("not available"), std::string::npos);
}

TEST_F(NodeAllocatorTest, LeasedGpusAreNotOfferedAgain) {
  auto st = store();
  NodeAllocator na(*st, core::Topology{});
  auto a = na.allocate(req(1, "a"), query()());
  ASSERT_TRUE(a) << a.error().message;
  auto b = na.allocate(req(1, "b"), query()());
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_NE(a->lease.gpus[0].index, b->lease.gpus[0].index);
  auto c = na.allocate(req(1, "c"), query()());  // only 0 and 3 qualify
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("leased"), std::string::npos) << c.error().message;
  EXPECT_EQ(c.error().kind, ErrorKind::Unavailable);  // not enough GPUs: not a failure
}

TEST_F(NodeAllocatorTest, WaitTimesOutWithTheSeedMessage) {
  auto st = store();
  NodeAllocator na(*st, core::Topology{});
  WaitOptions wo;
  wo.timeout = 300ms;
  wo.recheck = 50ms;
  int progress = 0;
  wo.progress = [&](const WaitProgress&) { ++progress; };
  auto r = na.wait_and_allocate(req(3, "big"), query(), wo);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.rfind("Insufficient GPUs after waiting", 0), 0u) << r.error().message;
  EXPECT_EQ(r.error().kind, ErrorKind::Unavailable);
  EXPECT_GE(progress, 2);               // re-checked on the interval
  EXPECT_TRUE(st->waiters()->empty());  // left the queue
}

// The wait's deadline, the time it reports and the queue time are read from the clock: on a fake clock
// that the progress callback moves, the wait ends after exactly the timeout, whatever the real time.
TEST_F(NodeAllocatorTest, WaitDeadlineAndQueueTimeRunOnTheClock) {
  test::FakeClock clock;
  auto st = store();
  NodeAllocator na(*st, core::Topology{}, clock);
  const auto enqueued_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count();
  WaitOptions wo;
  wo.timeout = 10s;
  wo.recheck = 1ms;  // the real wait between checks: short, it is not what ends the wait
  std::vector<std::chrono::milliseconds> waited;
  std::vector<std::int64_t> queued_at;
  wo.progress = [&](const WaitProgress& p) {
    waited.push_back(p.waited);
    auto w = st->waiters();
    if (w && w->size() == 1) queued_at.push_back((*w)[0].enqueued_at_ms);
    clock.advance(2s);
  };
  auto r = na.wait_and_allocate(req(3, "big"), query(), wo);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Unavailable);
  EXPECT_EQ(r.error().message.rfind("Insufficient GPUs after waiting 10 s for 3 GPU(s)", 0), 0u) << r.error().message;
  EXPECT_EQ(waited, std::vector<std::chrono::milliseconds>({0s, 2s, 4s, 6s, 8s}));
  ASSERT_EQ(queued_at.size(), 5u);
  for (auto q : queued_at) EXPECT_EQ(q, enqueued_ms);
  EXPECT_TRUE(st->waiters()->empty());
}

TEST_F(NodeAllocatorTest, ExternalLoadGoingAwayIsNoticedByTheRecheck) {
  snap->set({gpu(0, 95, 1000)});
  auto st = store();
  NodeAllocator na(*st, core::Topology{});
  WaitOptions wo;
  wo.timeout = 10s;
  wo.recheck = 50ms;
  int checks = 0;
  // After the first refused check the load goes away. Not a release: only the periodic re-check can
  // see it. (No thread and no sleep: the wait's own progress report is the moment.)
  wo.progress = [&](const WaitProgress&) {
    if (++checks == 1) snap->set({gpu(0, 0, 1000)});
  };
  auto r = na.wait_and_allocate(req(1, "j"), query(), wo);
  EXPECT_EQ(checks, 1);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->lease.gpus[0].index, 0u);
}

// Three jobs join the queue in turn, each only once the one before is in it (its first progress report)
// and one second later on the fake clock; the GPU is released only when all three wait. The queue
// decides the order, not timing: nothing here sleeps, and the waits below only bound a hang.
TEST_F(NodeAllocatorTest, FirstComeFirstServedWithinPriority) {
  snap->set({gpu(0, 0, 1000)});
  test::FakeClock clock;
  auto holder_store = store();
  NodeAllocator holder(*holder_store, core::Topology{}, clock);
  auto held = holder.allocate(req(1, "holder"), query()());
  ASSERT_TRUE(held);
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> queued;
  std::vector<std::string> order;
  auto waiter = [&](std::string job, int prio) {
    auto st = store();
    NodeAllocator na(*st, core::Topology{}, clock);
    auto r = req(1, job);
    r.priority = prio;
    WaitOptions wo;
    wo.timeout = 1h;  // on the fake clock, which does not move while they wait
    wo.recheck = 20ms;
    wo.progress = [&](const WaitProgress&) {
      std::lock_guard lock(mu);
      if (queued.insert(job).second) cv.notify_all();
    };
    auto got = na.wait_and_allocate(r, query(), wo);
    ASSERT_TRUE(got) << got.error().message;
    {
      std::lock_guard lock(mu);
      order.push_back(job);  // before the release: the next job cannot have the GPU yet
    }
    (void)st->release(got->lease.id, "done");
  };
  auto in_queue = [&](const std::string& job) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return queued.contains(job); });
  };
  std::thread first(waiter, "first", 0);
  EXPECT_TRUE(in_queue("first"));
  clock.advance(1s);
  std::thread second(waiter, "second", 0);
  EXPECT_TRUE(in_queue("second"));
  clock.advance(1s);
  std::thread urgent(waiter, "urgent", 5);  // came last, but higher priority
  EXPECT_TRUE(in_queue("urgent"));
  (void)holder_store->release(held->lease.id, "done");
  first.join();
  second.join();
  urgent.join();
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "first", "second"}));
}

}  // namespace
}  // namespace gf::scheduler

namespace gf::scheduler {
namespace {

// A store whose every call fails, as a locked or corrupt database would.
struct BrokenStore : core::LeaseStore {
  Result<std::optional<core::Lease>> acquire(const core::LeaseRequest&, const Decide&) override {
    return make_error("disk I/O error");
  }
  Result<bool> release(const std::string&, const std::string&) override { return make_error("disk I/O error"); }
  Result<std::vector<core::Lease>> active() override { return make_error("disk I/O error"); }
  Result<std::vector<core::Waiter>> waiters() override { return make_error("disk I/O error"); }
  Result<void> enqueue(const core::Waiter&) override { return make_error("disk I/O error"); }
  Result<void> dequeue(const std::string&) override { return make_error("disk I/O error"); }
  bool wait_for_change(std::chrono::milliseconds) override { return false; }
};

// What the CLI (exit 1, not 75) and the API (500, not 409) rely on: a store failure is not "not
// enough GPUs".
TEST(NodeAllocatorErrors, StoreFailureIsNotUnavailable) {
  BrokenStore st;
  const ReadingQuery query = [] { return Result<core::SnapshotPtr>(std::make_shared<core::Snapshot>()); };
  NodeAllocator na(st, core::Topology{});
  AllocationRequest req;
  auto now = na.allocate(req, query());
  ASSERT_FALSE(now);
  EXPECT_EQ(now.error().kind, ErrorKind::Failed) << now.error().message;
  WaitOptions wo;
  wo.timeout = std::chrono::milliseconds(0);
  auto waited = na.wait_and_allocate(req, query, wo);
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().kind, ErrorKind::Failed) << waited.error().message;
  EXPECT_NE(waited.error().message.find("cannot join the queue: disk I/O error"), std::string::npos)
      << waited.error().message;
}

}  // namespace
}  // namespace gf::scheduler
