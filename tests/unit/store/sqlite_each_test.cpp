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

// prepare_cached: the statement is compiled once and lent again, reset with its bindings cleared; one
// still lent (a caller further up steps through it) gives a fresh statement, not the same one twice.
TEST_F(StmtEachTest, ACachedStatementIsLentAgainResetAndNeverTwiceAtOnce) {
  constexpr const char* kSql = "SELECT s FROM t WHERE n >= ?1 ORDER BY n";
  {
    auto st = db->prepare_cached(kSql);
    ASSERT_TRUE(st);
    st->bind(1, std::int64_t{2});
    auto row = st->step();  // left mid-way: the next borrower must start over
    ASSERT_TRUE(row && *row);
    EXPECT_EQ(st->text(0), "b");
  }
  auto again = db->prepare_cached(kSql);
  ASSERT_TRUE(again);
  // Bindings were cleared: ?1 is NULL, and n >= NULL matches nothing.
  auto none = again->step();
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  again->reset();
  again->bind(1, std::int64_t{1});
  std::vector<std::string> outer, inner;
  auto rows = again->each([&](const Stmt& row) {
    outer.push_back(row.text(0));
    if (outer.size() == 1) {  // the same SQL while the cached one is lent: a separate statement
      auto nested = db->prepare_cached(kSql);
      ASSERT_TRUE(nested);
      nested->bind(1, std::int64_t{3});
      ASSERT_TRUE(nested->each([&](const Stmt& r) { inner.push_back(r.text(0)); }));
    }
  });
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(outer, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(inner, (std::vector<std::string>{"c"}));
}

// A write transaction goes through cached BEGIN/COMMIT/ROLLBACK: rolled back unless committed, again and again.
TEST_F(StmtEachTest, WriteTransactionsThroughCachedStatementsCommitOrRollBack) {
  for (int i = 0; i < 3; ++i) {
    WriteTxn txn(*db);
    ASSERT_TRUE(txn.begin());
    auto ins = db->prepare_cached("INSERT INTO t VALUES (?1, 'x')");
    ASSERT_TRUE(ins);
    ASSERT_TRUE(ins->bind(1, std::int64_t{10 + i}).run());
    if (i != 1) {
      ASSERT_TRUE(txn.commit());
    }
  }
  auto n = db->prepare("SELECT COUNT(*) FROM t WHERE s = 'x'");
  ASSERT_TRUE(n);
  ASSERT_TRUE(n->step());
  EXPECT_EQ(n->int64(0), 2);  // the second was rolled back
}

}  // namespace
}  // namespace gf::store
