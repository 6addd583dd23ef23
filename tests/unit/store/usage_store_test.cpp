#include "store/usage_store.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "store/node_store.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;

struct UsageStoreTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  std::string db;
  void SetUp() override { db = (dir / "gpufleet.db").string(); }
};

core::LeaseUsage row(std::string id, std::string user, std::int64_t created, std::optional<std::int64_t> released,
                     double held) {
  core::LeaseUsage r;
  r.lease_id = std::move(id);
  r.job_id = "job-" + r.lease_id;
  r.user = std::move(user);
  r.gpus = 2;
  r.created_at_ms = created;
  r.released_at_ms = released;
  r.held_gpu_s = held;
  r.busy_gpu_s = held / 2;
  r.energy_wh = 1.5;
  r.util_gpu_s = 40 * held;
  r.covered_gpu_s = held;
  r.peak_mem_mib = 1234;
  return r;
}

TEST_F(UsageStoreTest, RowsRoundTripAndReplaceByLease) {
  auto s = UsageStore::open(db);
  ASSERT_TRUE(s) << s.error().message;
  auto r = row("L1", "alice", 1000, std::nullopt, 10);
  r.uid = 1001;
  ASSERT_TRUE((*s)->put({r}));
  r.released_at_ms = 9000;
  r.held_gpu_s = 16;
  ASSERT_TRUE((*s)->put({r}));
  auto got = (*s)->get("L1");
  ASSERT_TRUE(got);
  ASSERT_TRUE(*got);
  EXPECT_EQ((*got)->released_at_ms, std::optional<std::int64_t>(9000));
  EXPECT_DOUBLE_EQ((*got)->held_gpu_s, 16);
  EXPECT_DOUBLE_EQ((*got)->busy_gpu_s, 5);
  EXPECT_EQ((*got)->uid, std::optional<std::uint32_t>(1001));
  EXPECT_EQ((*got)->peak_mem_mib, std::optional<std::uint64_t>(1234));
  EXPECT_DOUBLE_EQ(*(*got)->mean_util_pct(), 40);
  auto none = (*s)->get("nope");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

TEST_F(UsageStoreTest, SinceUnfinishedAndTotals) {
  auto s = UsageStore::open(db);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE((*s)->put({row("old", "alice", 0, 500, 1), row("new", "alice", 600, 2000, 3),
                         row("run", "bob", 700, std::nullopt, 5), row("b2", "bob", 100, 1500, 7)}));
  auto since = (*s)->since(1000);
  ASSERT_TRUE(since);
  std::vector<std::string> ids;
  for (const auto& r : *since) ids.push_back(r.lease_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b2", "new", "run"}));
  auto open = (*s)->unfinished();
  ASSERT_TRUE(open);
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].lease_id, "run");
  auto totals = (*s)->final_totals_by_user();
  ASSERT_TRUE(totals);
  EXPECT_DOUBLE_EQ(totals->at("alice").held_gpu_s, 4);
  EXPECT_EQ(totals->at("alice").leases, 2u);
  EXPECT_DOUBLE_EQ(totals->at("bob").held_gpu_s, 7);  // the running row is not final
}

TEST_F(UsageStoreTest, SharesTheNodeFileWithTheLeaseStore) {
  auto ns = NodeStore::open(db);
  ASSERT_TRUE(ns) << ns.error().message;
  auto s = UsageStore::open(db);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE((*s)->put({row("L", "alice", 0, 1, 1)}));
  auto ns2 = NodeStore::open(db);  // reopening does not trip over the usage tables
  ASSERT_TRUE(ns2) << ns2.error().message;
}

TEST_F(UsageStoreTest, AuditKeepsTheEvidenceAsJsonWithUserNamesEscaped) {
  auto s = UsageStore::open(db);
  ASSERT_TRUE(s) << s.error().message;
  core::ReclaimDecision d;
  d.action = core::ReclaimAction::Release;
  d.lease_id = "L1";
  d.user = "alice";
  d.at_ms = 5000;
  d.idle_since_ms = 1000;
  d.message = "released";
  d.evidence.push_back({0, 2u, 4u, {"bo\"b\n"}});
  ASSERT_TRUE((*s)->audit(d));
  auto raw = Db::open(db);
  ASSERT_TRUE(raw);
  auto st = raw->prepare("SELECT action, lease_id, evidence FROM reclaim_audit");
  ASSERT_TRUE(st);
  auto has = st->step();
  ASSERT_TRUE(has && *has);
  EXPECT_EQ(st->text(0), "release");
  EXPECT_EQ(st->text(1), "L1");
  EXPECT_EQ(st->text(2), R"([{"gpu":0,"utilization_pct":2,"max_utilization_pct":4,"process_users":["bo\"b\u000a"]}])");
}

}  // namespace
}  // namespace gf::store
