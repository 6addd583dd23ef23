#pragma once
// A thin RAII layer over SQLite's C API: a connection (WAL, busy timeout) and prepared statements.
// Not thread-safe: one Db per thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "core/result.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace gf::store {

class Stmt;

// Whether connections opened from now on checkpoint the WAL themselves (SQLite's default: inside the
// commit that takes it past 1000 pages) or leave it to a WalCheckpointer (store/checkpointer.hpp).
// Process-wide; only the agent turns it off, and only while its checkpointer runs.
void set_automatic_checkpoints(bool on) noexcept;

class Db {
 public:
  // Opens (creating) the database file and its directory; WAL mode, synchronous=NORMAL, busy timeout.
  static Result<Db> open(const std::string& path);
  Db(Db&& o) noexcept : db_(o.db_), path_(std::move(o.path_)), cache_(std::move(o.cache_)) {
    o.db_ = nullptr;
    o.cache_.clear();  // its statements are ours now: the moved-from Db finalizes none
  }
  Db& operator=(Db&&) = delete;
  Db(const Db&) = delete;
  ~Db();

  Result<void> exec(const char* sql);
  // Creates or upgrades `component`'s tables to `version` by running `schema_sql` in a write
  // transaction, only when the file's version of that component is older (table gf_schema), so
  // opening never waits on writers and several components can share one file.
  Result<void> migrate(std::string_view component, std::int64_t version, const char* schema_sql);
  Result<Stmt> prepare(std::string_view sql);
  // The same, compiled once per connection and kept: the Stmt borrows it and, when it goes, resets it
  // and clears its bindings instead of finalizing it. For constant SQL on hot paths (parsing a
  // statement costs more than running a small one); SQL with values formatted into it must bind them
  // instead. A statement still borrowed, or past kMaxCached distinct texts, is prepared afresh.
  Result<Stmt> prepare_cached(std::string_view sql);
  static constexpr std::size_t kMaxCached = 64;
  std::string error() const;
  int changes() const;          // rows changed by the last statement
  bool in_transaction() const;  // a BEGIN not yet committed or rolled back
  const std::string& path() const noexcept { return path_; }
  sqlite3* raw() const noexcept { return db_; }

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  struct Cached {
    sqlite3_stmt* st = nullptr;
    bool in_use = false;  // lent to a Stmt now (nodes of an unordered_map keep their address)
  };
  sqlite3* db_ = nullptr;
  std::string path_;
  std::unordered_map<std::string, Cached> cache_;
};

// A statement of a Db: it must not outlive the Db it came from (the Db finalizes its cached
// statements when it goes, borrowed or not; a debug build asserts that none is still borrowed).
class Stmt {
 public:
  Stmt(Stmt&& o) noexcept : st_(o.st_), db_(o.db_), lent_(o.lent_) {
    o.st_ = nullptr;
    o.lent_ = nullptr;
  }
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  ~Stmt();

  Stmt& bind(int i, std::int64_t v);
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind_null(int i);
  // True with a row, false when done; an error on failure.
  Result<bool> step();
  Result<void> run();  // step to completion, expecting no rows
  // Steps through the rows, calling row_fn(const Stmt&) on each; row_fn returns void, or a bool that is
  // false to stop early. An error when a step fails.
  template <class F>
  Result<void> each(F&& row_fn);
  void reset();  // ready to run again, bindings cleared
  std::int64_t int64(int col) const;
  std::optional<std::int64_t> opt_int64(int col) const;
  std::optional<double> opt_double(int col) const;
  std::string text(int col) const;

 private:
  friend class Db;
  Stmt(sqlite3_stmt* st, sqlite3* db, bool* lent = nullptr) : st_(st), db_(db), lent_(lent) {}
  sqlite3_stmt* st_ = nullptr;
  sqlite3* db_ = nullptr;
  bool* lent_ = nullptr;  // a Db's cached statement: given back (reset), not finalized
};

template <class F>
Result<void> Stmt::each(F&& row_fn) {
  for (;;) {
    auto row = step();
    if (!row) return row.error();
    if (!*row) return {};
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const Stmt&>>) {
      row_fn(std::as_const(*this));
    } else if (!row_fn(std::as_const(*this))) {
      return {};
    }
  }
}

// BEGIN IMMEDIATE takes the write lock up front, so a read-decide-write cannot interleave with
// another process's; rolled back unless committed.
class WriteTxn {
 public:
  explicit WriteTxn(Db& db) : db_(db) {}
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;
  Result<void> begin() {
    auto r = run("BEGIN IMMEDIATE");
    if (r) open_ = true;
    return r;
  }
  Result<void> commit() {
    auto r = run("COMMIT");
    if (r) open_ = false;
    return r;
  }
  ~WriteTxn() {
    if (open_) (void)run("ROLLBACK");
  }

 private:
  // Through the connection's cached statements: one transaction per lease decision, parsed once.
  Result<void> run(const char* sql) {
    auto st = db_.prepare_cached(sql);
    if (!st) return st.error();
    return st->run();
  }
  Db& db_;
  bool open_ = false;
};

// Several reads that must agree (one snapshot of the file): a deferred BEGIN when the connection is not
// in a transaction already (inside one they share its snapshot anyway), ended when it goes.
class ReadTxn {
 public:
  explicit ReadTxn(Db& db) : db_(db) {}
  ReadTxn(const ReadTxn&) = delete;
  ReadTxn& operator=(const ReadTxn&) = delete;
  Result<void> begin() {
    if (db_.in_transaction()) return {};
    auto st = db_.prepare_cached("BEGIN");
    if (!st) return st.error();
    auto r = st->run();
    if (r) open_ = true;
    return r;
  }
  ~ReadTxn() {
    if (!open_) return;
    // Nothing was written: COMMIT only ends the snapshot (ROLLBACK would too).
    if (auto st = db_.prepare_cached("COMMIT"); st) (void)st->run();
  }

 private:
  Db& db_;
  bool open_ = false;
};

}  // namespace gf::store
