// node::Arbiter's per-user quota count (review of issue 24): counted from the store's kept list of
// active leases, with a dead-owner sweep only when the count says "over"; and the peer's start time,
// kept per connection only once it was read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "node/arbiter.hpp"
#include "store/node_store.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"
#include "support/temp_dir.hpp"

namespace gf::node {
namespace {

struct QuotaSink final : ConnectionSink {
  void granted(std::int64_t, const scheduler::Allocation&) override {}
  void refused(std::int64_t, const Error&) override {}
  void waiting(std::int64_t, const WaitingEvent&) override {}
  void lease_ended(const std::string&, const std::string&) override {}
  void lease_warning(const std::string&, const std::string&) override {}
};

const Peer kQuotaUser{2001, 2001, 5001, "carol", false};

struct QuotaCountTest : ::testing::Test {
  test::TempDir dir;
  test::FakeClock clock;
  core::SnapshotPtr snap;
  ArbiterOptions options;
  std::unique_ptr<Arbiter> arb;
  std::set<std::uint32_t> dead;  // lease owners the store's liveness check declares gone
  int looks = 0;                 // liveness checks the arbiter's store made

  std::string db() const { return (dir.path() / "gf.db").string(); }
  void make() {
    auto s = std::make_shared<core::Snapshot>();
    for (unsigned i = 0; i < 4; ++i) s->gpus.push_back(test::make_gpu(i, 0, 1000));
    s->backend = "scripted";
    snap = s;
    auto st = store::NodeStore::open(
        db(),
        [this](const core::LeaseOwner& o) {
          ++looks;
          return !dead.contains(o.pid);
        },
        clock);
    ASSERT_TRUE(st) << st.error().message;
    ReadingSource rs;
    rs.latest = [this] { return std::pair{snap, clock.now()}; };
    arb = std::make_unique<Arbiter>(std::move(*st), std::move(rs), options, clock);
  }
  static AcquireRequest gpus(unsigned n) {
    AcquireRequest r;
    r.need.gpus = n;
    r.need.min_free_memory_mib = 1000;
    return r;
  }
};

// Under the quota no owner is looked at beyond the store's own once-a-second sweep; over it, a lease
// whose owner is gone (written beside the agent, which watches no pid of it) is ended first and does
// not count.
TEST_F(QuotaCountTest, TheCountSweepsOnlyWhenItSaysOver) {
  options.max_gpus_per_user = 2;
  make();
  auto c = arb->connect(kQuotaUser, std::make_shared<QuotaSink>());
  auto first = arb->acquire(c, 1, gpus(1));
  ASSERT_TRUE(first && *first) << (first ? "" : first.error().message);
  looks = 0;
  auto second = arb->acquire(c, 2, gpus(1));  // within the second: no sweep for the grant or the quota
  ASSERT_TRUE(second && *second) << (second ? "" : second.error().message);
  EXPECT_EQ(looks, 0);

  // Carol holds 2 and a third would be over: the count is made again after a sweep, which ends the
  // lease of her process that is gone (one written by another connection, beside the agent).
  auto other = store::NodeStore::open(
      db(), [](const core::LeaseOwner&) { return true; }, clock);
  ASSERT_TRUE(other);
  ASSERT_TRUE(arb->release(kQuotaUser, (*second)->lease.id));
  core::LeaseRequest beside;
  beside.job_id = "beside";
  beside.owner = core::LeaseOwner{777, 1, "carol", kQuotaUser.uid};
  auto direct =
      (*other)->acquire(beside, [](const auto&, const auto&) -> Result<std::optional<std::vector<core::LeasedGpu>>> {
        return std::optional<std::vector<core::LeasedGpu>>({{3, "GPU-test-3"}});
      });
  ASSERT_TRUE(direct && *direct);
  auto full = arb->acquire(c, 3, gpus(1));
  ASSERT_FALSE(full) << "carol holds 2 GPUs: 1 from the agent, 1 beside it";
  EXPECT_NE(full.error().message.find("quota"), std::string::npos);
  dead.insert(777);
  looks = 0;
  auto after = arb->acquire(c, 4, gpus(1));
  ASSERT_TRUE(after && *after) << (after ? "" : after.error().message);
  EXPECT_GT(looks, 0);
  auto ended = (*other)->history(10);
  ASSERT_TRUE(ended);
  for (const auto& l : *ended) {
    if (l.id == (*direct)->id) {
      EXPECT_EQ(l.release_reason, "owner gone");
    }
  }
}

// A failed read of the peer's start time is not kept for the connection: the next acquire reads again.
TEST_F(QuotaCountTest, AStartTimeThatCouldNotBeReadIsReadAgain) {
  const auto proc = dir.path() / "proc";
  std::filesystem::create_directories(proc);
  options.proc_root = proc.string();
  make();
  auto c = arb->connect(kQuotaUser, std::make_shared<QuotaSink>());
  auto first = arb->acquire(c, 1, gpus(1));
  ASSERT_TRUE(first && *first) << (first ? "" : first.error().message);
  EXPECT_EQ((*first)->lease.owner.start_time, 0u) << "no /proc/<pid>/stat yet";
  std::filesystem::create_directories(proc / "5001");
  std::ofstream(proc / "5001" / "stat") << "5001 (carol job) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 424242 0 0\n";
  auto second = arb->acquire(c, 2, gpus(1));
  ASSERT_TRUE(second && *second) << (second ? "" : second.error().message);
  EXPECT_EQ((*second)->lease.owner.start_time, 424242u);
  std::filesystem::remove(proc / "5001" / "stat");
  auto third = arb->acquire(c, 3, gpus(1));
  ASSERT_TRUE(third && *third) << (third ? "" : third.error().message);
  EXPECT_EQ((*third)->lease.owner.start_time, 424242u) << "read once it was read";
}

}  // namespace
}  // namespace gf::node
