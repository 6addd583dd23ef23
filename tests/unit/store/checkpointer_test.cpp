// WAL checkpoints on the agent's own thread: while a WalCheckpointer runs, the connections this process
// opens leave checkpoints to it (so no commit waits for the disk), and it keeps the WAL short.
#include "store/checkpointer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "store/sqlite.hpp"
#include "support/eventually.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct WalCheckpointerTest : ::testing::Test {
  test::TempDir tmp;
  const fs::path dir = tmp / "d";  // made by the code under test
  const fs::path path = dir / "store.db";

  std::int64_t autocheckpoint_of_a_new_connection() const {
    auto db = Db::open(path.string());
    EXPECT_TRUE(db) << db.error().message;
    auto st = db->prepare("PRAGMA wal_autocheckpoint");
    EXPECT_TRUE(st);
    auto row = st->step();
    EXPECT_TRUE(row && *row);
    return st->int64(0);
  }
};

TEST_F(WalCheckpointerTest, ConnectionsOpenedWhileItRunsLeaveCheckpointsToIt) {
  EXPECT_EQ(autocheckpoint_of_a_new_connection(), 1000);  // SQLite's default
  {
    auto ck = WalCheckpointer::start(path.string(), 20ms);
    ASSERT_TRUE(ck) << ck.error().message;
    EXPECT_EQ(autocheckpoint_of_a_new_connection(), 0);
  }
  EXPECT_EQ(autocheckpoint_of_a_new_connection(), 1000);  // back once it stops
}

TEST_F(WalCheckpointerTest, KeepsTheWalShort) {
  auto ck = WalCheckpointer::start(path.string(), 10ms, 10ms);
  ASSERT_TRUE(ck) << ck.error().message;
  auto db = Db::open(path.string());  // automatic checkpoints off: only the thread checkpoints
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)"));
  // Ten rounds of ~300 pages: 3 000 pages written in all. Without checkpoints the WAL would hold them
  // all (12 MB and more); checkpointed between rounds, each round starts the WAL over.
  for (int round = 0; round < 10; ++round) {
    ASSERT_TRUE(db->exec("BEGIN IMMEDIATE"));
    for (int i = 0; i < 300; ++i) ASSERT_TRUE(db->exec("INSERT INTO t VALUES (randomblob(4000))"));
    ASSERT_TRUE(db->exec("COMMIT"));
    const auto before = (*ck)->done();
    test::eventually([&] { return (*ck)->done() >= before + 2; }, 10s, 10ms);
    ASSERT_GE((*ck)->done(), before + 2) << "the checkpoint thread did not run within 10 s";
  }
  EXPECT_EQ((*ck)->failed(), 0u);
  EXPECT_LT(fs::file_size(dir / "store.db-wal"), 4u * 1024 * 1024);
}

TEST_F(WalCheckpointerTest, SmallWritesWaitForTheIdlePeriodABurstDoesNot) {
  auto ck = WalCheckpointer::start(path.string(), 10ms, std::chrono::hours(1));
  ASSERT_TRUE(ck) << ck.error().message;
  auto db = Db::open(path.string());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)"));
  ASSERT_TRUE(db->exec("INSERT INTO t VALUES (randomblob(4000))"));
  std::this_thread::sleep_for(300ms);  // some 30 looks at the WAL: a few pages are no burst
  EXPECT_EQ((*ck)->done(), 0u);
  // ~300 pages (1.2 MB) at once: past kBurstBytes, checkpointed at the next look.
  ASSERT_TRUE(db->exec("BEGIN IMMEDIATE"));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(db->exec("INSERT INTO t VALUES (randomblob(4000))"));
  ASSERT_TRUE(db->exec("COMMIT"));
  EXPECT_TRUE(test::eventually([&] { return (*ck)->done() >= 1; }, 10s, 10ms)) << "the burst was not checkpointed";
  EXPECT_EQ((*ck)->failed(), 0u);
}

}  // namespace
}  // namespace gf::store
