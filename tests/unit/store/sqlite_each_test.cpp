// Stmt::each, the one row loop of the store: every row in order, an early stop when the row function
// says so, and a failing step as an error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "store/sqlite.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;

struct StmtEachTest : ::testing::Test {
  test::TempDir tmp;
  const fs::path each_dir = tmp / "d";  // made by Db::open
  std::optional<Db> db;                 // closed before the directory goes
  void SetUp() override {
    auto opened = Db::open((each_dir / "each.db").string());
    ASSERT_TRUE(opened) << opened.error().message;
    db.emplace(std::move(*opened));
    ASSERT_TRUE(db->exec("CREATE TABLE t (n INTEGER, s TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');"));
  }
};

TEST_F(StmtEachTest, VisitsEveryRowInOrder) {
  auto st = db->prepare("SELECT n, s FROM t ORDER BY n");
  ASSERT_TRUE(st);
  std::vector<std::string> seen;
  auto rows = st->each([&](const Stmt& row) { seen.push_back(std::to_string(row.int64(0)) + row.text(1)); });
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(seen, (std::vector<std::string>{"1a", "2b", "3c"}));
}

TEST_F(StmtEachTest, StopsWhenTheRowFunctionSaysFalse) {
  auto st = db->prepare("SELECT n FROM t ORDER BY n");
  ASSERT_TRUE(st);
  std::vector<std::int64_t> seen;
  auto rows = st->each([&](const Stmt& row) {
    seen.push_back(row.int64(0));
    return row.int64(0) < 2;
  });
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(seen, (std::vector<std::int64_t>{1, 2}));
}

TEST_F(StmtEachTest, NoRowsIsNoCall) {
  auto st = db->prepare("SELECT n FROM t WHERE n > 10");
  ASSERT_TRUE(st);
  int calls = 0;
  auto rows = st->each([&](const Stmt&) { ++calls; });
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(calls, 0);
}

TEST_F(StmtEachTest, AFailingStepIsAnError) {
  // abs() of the smallest integer overflows when the second row is computed (no ORDER BY: a sort would
  // compute every row before the first step returns; a table scan goes in rowid order).
  auto st = db->prepare("SELECT abs(CASE WHEN n = 2 THEN -9223372036854775807 - 1 ELSE n END) FROM t");
  ASSERT_TRUE(st);
  int calls = 0;
  auto rows = st->each([&](const Stmt&) { ++calls; });
  ASSERT_FALSE(rows);
  EXPECT_NE(rows.error().message.find("overflow"), std::string::npos) << rows.error().message;
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gf::store
