#include "store/sqlite.hpp"

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace gf::store {

Result<Db> Db::open(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return make_error("cannot open the store " + path + ": " + why);
  }
  Db out(db, path);
  // Many gpufleet processes share the file: wait for each other's write locks rather than fail.
  sqlite3_busy_timeout(db, 30000);
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    // Switching a new file to WAL needs a moment alone with it; when many processes open a fresh
    // store at once, SQLite can answer "locked" without consulting the busy timeout: retry.
    Result<void> r = out.exec(pragma);
    for (int attempt = 0; !r && attempt < 500 && sqlite3_errcode(db) == SQLITE_BUSY; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 + attempt % 20));
      r = out.exec(pragma);
    }
    if (!r) return make_error("cannot set up the store " + path + ": " + r.error().message);
  }
  return out;
}

Db::~Db() {
  if (db_) sqlite3_close(db_);
}

int Db::changes() const { return sqlite3_changes(db_); }

std::string Db::error() const { return db_ ? sqlite3_errmsg(db_) : "no database"; }

Result<void> Db::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : error();
    sqlite3_free(err);
    return make_error(msg);
  }
  return {};
}

Result<void> Db::migrate(std::string_view component, std::int64_t version, const char* schema_sql) {
  // Several components (node store, history) share one file: each keeps its own row in gf_schema.
  // The first look is read-only, so opening an up-to-date store never waits on writers.
  auto current = [&]() -> Result<std::int64_t> {
    auto t = prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'gf_schema'");
    if (!t) return t.error();
    auto has = t->step();
    if (!has) return has.error();
    if (!*has) return 0;
    auto v = prepare("SELECT version FROM gf_schema WHERE component = ?1");
    if (!v) return v.error();
    v->bind(1, component);
    auto row = v->step();
    if (!row) return row.error();
    return *row ? v->int64(0) : 0;
  };
  if (auto v = current(); !v)
    return v.error();
  else if (*v >= version)
    return {};
  WriteTxn txn(*this);
  if (auto r = txn.begin(); !r) return r;
  if (auto v = current(); !v)
    return v.error();  // another process may have migrated meanwhile
  else if (*v >= version)
    return txn.commit();
  if (auto r = exec("CREATE TABLE IF NOT EXISTS gf_schema(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"); !r)
    return r;
  if (auto r = exec(schema_sql); !r) return r;
  auto up = prepare("INSERT OR REPLACE INTO gf_schema(component, version) VALUES (?1, ?2)");
  if (!up) return up.error();
  up->bind(1, component);
  up->bind(2, version);
  if (auto r = up->run(); !r) return r;
  return txn.commit();
}

Result<Stmt> Db::prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, nullptr) != SQLITE_OK)
    return make_error(error());
  return Stmt(st, db_);
}

Stmt::~Stmt() {
  if (st_) sqlite3_finalize(st_);
}

Stmt& Stmt::bind(int i, std::int64_t v) {
  sqlite3_bind_int64(st_, i, v);
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  sqlite3_bind_double(st_, i, v);  // NaN is stored as NULL by SQLite
  return *this;
}

void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

std::optional<double> Stmt::opt_double(int col) const {
  if (sqlite3_column_type(st_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(st_, col);
}

Stmt& Stmt::bind(int i, std::string_view v) {
  sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  sqlite3_bind_null(st_, i);
  return *this;
}

Result<bool> Stmt::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return make_error(sqlite3_errmsg(db_));
}

Result<void> Stmt::run() {
  for (;;) {
    auto r = step();
    if (!r) return r.error();
    if (!*r) return {};
  }
}

std::int64_t Stmt::int64(int col) const { return sqlite3_column_int64(st_, col); }

std::optional<std::int64_t> Stmt::opt_int64(int col) const {
  if (sqlite3_column_type(st_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(st_, col);
}

std::string Stmt::text(int col) const {
  const auto* p = sqlite3_column_text(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(st_, col)))
           : std::string();
}

}  // namespace gf::store
