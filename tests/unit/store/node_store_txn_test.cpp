// The node store's transactions: what a rolled-back decision leaves behind, and listings that read one
// snapshot of the file.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <stdexcept>

#include "store/node_store.hpp"
#include "store/sqlite.hpp"
#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

using TxnGpus = std::vector<core::LeasedGpu>;

struct StoreTxnTest : ::testing::Test {
  test::TempDir tmp;
  test::FakeClock clock;
  std::set<std::uint32_t> dead;  // owners the test declares gone
  std::unique_ptr<NodeStore> open_store() {
    auto s = NodeStore::open((tmp / "gf.db").string(),
                             [this](const core::LeaseOwner& o) { return !dead.contains(o.pid); }, clock);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? std::move(*s) : nullptr;
  }
  static core::LeaseRequest owned_by(std::uint32_t pid, std::uint32_t uid) {
    core::LeaseRequest r;
    r.job_id = "job";
    r.name = "name";
    r.owner.pid = pid;
    r.owner.start_time = 1;
    r.owner.user = "alice";
    r.owner.uid = uid;
    return r;
  }
  static core::LeaseStore::Decide grant(TxnGpus g) {
    return [g](const auto&, const auto&) -> Result<std::optional<TxnGpus>> { return std::optional<TxnGpus>(g); };
  }
  // The GPUs the decider of an acquire sees held (it then says "not now").
  static std::set<std::string> seen_held(NodeStore& s) {
    std::set<std::string> seen;
    auto r = s.acquire(owned_by(900, 900),
                       [&](const std::vector<core::Lease>& active, const auto&) -> Result<std::optional<TxnGpus>> {
                         for (const auto& l : active)
                           for (const auto& g : l.gpus) seen.insert(g.uuid);
                         return std::optional<TxnGpus>();
                       });
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return seen;
  }
};

// Review of issue 24: a sweep in acquire ends a dead owner's lease inside the transaction; when the
// transaction then rolls back, the lease is active again in the file, and the store's kept list (which
// PRAGMA data_version does not invalidate: a rollback does not move it) must not go on showing it ended.
TEST_F(StoreTxnTest, ARolledBackSweepLeavesTheKeptListAsTheFileHasIt) {
  auto s = open_store();
  ASSERT_TRUE(s);
  auto held = s->acquire(owned_by(500, 1000), grant({{0, "GPU-0"}}));
  ASSERT_TRUE(held && *held);

  // 500 looks gone at the next sweep (due: a second later); the decider then fails: rolled back.
  dead.insert(500);
  clock.advance(std::chrono::milliseconds(1001));
  bool decided = false;
  auto failed = s->acquire(owned_by(600, 1001), [&](const auto& active, const auto&) -> Result<std::optional<TxnGpus>> {
    decided = true;
    EXPECT_TRUE(active.empty());  // the sweep ran: 500's lease is ended in this transaction
    return make_error("the decider failed");
  });
  ASSERT_FALSE(failed);
  ASSERT_TRUE(decided);
  // 500 was alive after all (its lease is still active in the file): within the same second, the next
  // decision and the quota count see it.
  dead.erase(500);
  EXPECT_EQ(seen_held(*s), (std::set<std::string>{"GPU-0"}));
  auto count = s->gpus_held_by(1000);
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 1u);

  // A decider that throws: the same, and the sweep is due again at once (its work was lost), so a
  // lease whose owner is gone is ended by the next acquire, not a second later.
  dead.insert(500);
  clock.advance(std::chrono::milliseconds(1001));
  EXPECT_THROW((void)s->acquire(owned_by(600, 1001),
                                [](const auto&, const auto&) -> Result<std::optional<TxnGpus>> {
                                  throw std::runtime_error("decider threw");
                                }),
               std::runtime_error);
  EXPECT_TRUE(seen_held(*s).empty());
  auto hist = s->history(10);
  ASSERT_TRUE(hist);
  ASSERT_EQ(hist->size(), 1u);
  EXPECT_EQ((*hist)[0].release_reason, "owner gone");
}

// The quota's count comes from the kept list, and sees another connection's writes.
TEST_F(StoreTxnTest, GpusHeldByCountsOneUsersLeasesAcrossConnections) {
  auto a = open_store();
  auto b = open_store();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(*a->acquire(owned_by(100, 1000), grant({{0, "GPU-0"}, {1, "GPU-1"}})));
  ASSERT_TRUE(*a->acquire(owned_by(101, 2000), grant({{2, "GPU-2"}})));
  EXPECT_EQ(*a->gpus_held_by(1000), 2u);
  auto theirs = b->acquire(owned_by(102, 1000), grant({{3, "GPU-3"}}));
  ASSERT_TRUE(theirs && *theirs);
  EXPECT_EQ(*a->gpus_held_by(1000), 3u);
  EXPECT_EQ(*a->gpus_held_by(2000), 1u);
  EXPECT_EQ(*a->gpus_held_by(3000), 0u);
  ASSERT_TRUE(*b->release((*theirs)->id, "released"));
  EXPECT_EQ(*a->gpus_held_by(1000), 2u);
}

// Review of issue 24: a listing reads the leases, then their GPUs. Another connection's write between
// the two (a newer lease begins, or one ends) moves the LIMIT's window; read from two snapshots, a lease
// of the first read came back without its GPUs (the usage ledger then booked it 0 GPU-seconds).
TEST_F(StoreTxnTest, LeaseListingsReadTheLeasesAndTheirGpusFromOneSnapshot) {
  auto a = open_store();
  auto b = open_store();
  ASSERT_TRUE(a && b);
  auto old = a->acquire(owned_by(100, 1000), grant({{0, "GPU-0"}}));
  ASSERT_TRUE(old && *old);
  ASSERT_TRUE(*a->release((*old)->id, "released"));
  const std::int64_t ended_at = a->now_ms();

  std::string newer;
  int writes = 0;
  a->set_between_lease_reads_for_test([&] {
    ++writes;
    clock.advance(std::chrono::seconds(1));
    if (newer.empty()) {  // a newer lease begins
      auto l = b->acquire(owned_by(200, 2000), grant({{1, "GPU-1"}}));
      ASSERT_TRUE(l && *l);
      newer = (*l)->id;
    } else {  // the newer lease ends
      ASSERT_TRUE(*b->release(newer, "released"));
    }
  });
  auto hist = a->history(1);
  ASSERT_TRUE(hist) << hist.error().message;
  ASSERT_EQ(hist->size(), 1u);
  EXPECT_EQ((*hist)[0].id, (*old)->id);
  ASSERT_EQ((*hist)[0].gpus.size(), 1u);
  EXPECT_EQ((*hist)[0].gpus[0].uuid, "GPU-0");

  auto since = a->ended_since(ended_at, 1);
  ASSERT_TRUE(since) << since.error().message;
  ASSERT_EQ(since->size(), 1u);
  EXPECT_EQ((*since)[0].id, (*old)->id);
  ASSERT_EQ((*since)[0].gpus.size(), 1u);
  EXPECT_EQ((*since)[0].gpus[0].uuid, "GPU-0");
  EXPECT_EQ(writes, 2);

  // The writes are there for the next listing.
  a->set_between_lease_reads_for_test({});
  auto after = a->ended_since(ended_at, 1);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, newer);
  EXPECT_EQ((*after)[0].gpus.size(), 1u);
}

// A grant to a queued waiter moves the queue: the next waiter, in another process, is woken by it (not
// left to its periodic recheck). The wake-up is the store's change signal; a timeout would be a failure.
TEST_F(StoreTxnTest, AGrantToAQueuedWaiterWakesTheNextWaiterInAnotherConnection) {
  auto next = open_store();
  auto granting = open_store();
  ASSERT_TRUE(next && granting);
  for (const char* id : {"w1", "w2"}) {
    core::Waiter w;
    w.id = id;
    w.name = id;
    w.enqueued_at_ms = granting->now_ms();
    w.gpus = 1;
    w.owner = core::LeaseOwner{300, 1, "alice", 1000};
    ASSERT_TRUE(granting->enqueue(w));
    clock.advance(std::chrono::milliseconds(1));
  }
  while (next->wait_for_change(std::chrono::milliseconds(20))) {
  }  // drain what came before
  core::LeaseRequest r = owned_by(300, 1000);
  r.waiter_id = "w1";
  auto got = granting->acquire(r, grant({{0, "GPU-0"}}));
  ASSERT_TRUE(got && *got);
  EXPECT_TRUE(next->wait_for_change(std::chrono::seconds(20)));
  auto left = next->waiters();
  ASSERT_TRUE(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].id, "w2");
}

#ifndef NDEBUG
// A statement must not outlive its connection: a debug build says so where the connection goes.
TEST(StoreTxnDeathTest, AStatementThatOutlivesItsConnectionIsCaught) {
  test::TempDir dir;
  EXPECT_DEATH(
      {
        std::optional<Stmt> kept;
        {
          auto db = Db::open((dir / "x.db").string());
          ASSERT_TRUE(db);
          auto st = db->prepare_cached("SELECT 1");
          ASSERT_TRUE(st);
          kept.emplace(std::move(*st));
        }
      },
      "outlived its Db");
}
#endif

// Issue 24, goal 5: the usage ledger asks active() at every collection. With nothing committed since
// and every owner alive it is answered from the kept list, without the write lock (here held by another
// connection, as a long write elsewhere would: before, active() waited for it); a dead owner still ends
// its lease at the next call, and a lease another connection ends shows at once.
TEST_F(StoreTxnTest, ActiveWithNothingChangedTakesNoWriteLockAndStillEndsADeadOwnersLease) {
  auto s = open_store();
  ASSERT_TRUE(s);
  auto a = s->acquire(owned_by(500, 1000), grant({{0, "GPU-0"}}));
  auto b = s->acquire(owned_by(501, 1001), grant({{1, "GPU-1"}}));
  ASSERT_TRUE(a && *a && b && *b);
  ASSERT_EQ(s->active()->size(), 2u);

  auto other = Db::open((tmp / "gf.db").string());
  ASSERT_TRUE(other) << other.error().message;
  ASSERT_TRUE(other->exec("BEGIN IMMEDIATE"));  // the write lock, held
  auto held = s->active();
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(held->size(), 2u);
  ASSERT_TRUE(other->exec("COMMIT"));

  dead.insert(500);  // its owner is gone: the sweep runs and ends it
  auto after = s->active();
  ASSERT_TRUE(after) << after.error().message;
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().id, (*b)->id);

  ASSERT_TRUE(other->exec("UPDATE leases SET released_ms = 1 WHERE released_ms IS NULL"));  // another process
  auto none = s->active();
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace gf::store
