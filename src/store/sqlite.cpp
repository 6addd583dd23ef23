#include "store/sqlite.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <atomic>
#include <cassert>
#include <chrono>
#include <filesystem>
#include <thread>

#include "platform/fs.hpp"
#include "platform/users.hpp"

namespace gf::store {

namespace {

std::atomic<bool> g_automatic_checkpoints{true};

std::string user_name(uid_t uid) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return res->pw_name;
  return "uid " + std::to_string(uid);
}

// The store file is created by us, private (0600), and afterwards accepted only when it is a regular
// file (not a link to someone else's database) owned by our euid: root writing a file another user
// owns would let that user steer what root writes. SQLite would create it 0644 minus the umask.
Result<void> check_or_create_store_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    (void)::fchmod(fd, 0600);
    ::close(fd);
    return {};
  }
  if (errno != EEXIST) return make_error("cannot create the store " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return make_error("cannot open the store " + path + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode))
    return make_error(ErrorKind::Permission, "the store " + path + " is a symbolic link: refusing it");
  if (!S_ISREG(st.st_mode))
    return make_error(ErrorKind::Permission, "the store " + path + " is not a regular file: refusing it");
  if (st.st_uid != ::geteuid())
    return make_error(ErrorKind::Permission, "the store " + path + " is owned by " + user_name(st.st_uid) + " (uid " +
                                                 std::to_string(st.st_uid) + "), not by us: refusing it");
  return {};
}

std::string owner_text(uid_t uid) { return user_name(uid) + " (uid " + std::to_string(uid) + ")"; }

// The store's directory must be writable by nobody but root and us. SQLite creates `<db>-wal`,
// `<db>-shm` and `<db>-journal` there by name, following links and without O_EXCL, so whoever else
// can write the directory can plant them (or swap them in after any check of ours) and steer what we
// write. A sticky bit does not help: it stops others from removing our files, not from creating the
// names we are about to use. Owned by another user, it could be made writable at any time. Writable by
// its owner's private group only (0775 under a umask of 002) it is still the owner's alone.
Result<void> check_store_dir(const std::string& store, const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return make_error("cannot open the store " + store + ": its directory " + dir + ": " + std::strerror(errno));
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return make_error(ErrorKind::Permission, "the store " + store + " is in " + dir + ", a directory owned by " +
                                                 owner_text(st.st_uid) +
                                                 ": refusing it (the store's directory must be root's or ours)");
  const bool others_write =
      (st.st_mode & S_IWOTH) != 0 || ((st.st_mode & S_IWGRP) != 0 && !platform::is_private_group(st.st_gid, st.st_uid));
  if (others_write) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(ErrorKind::Permission,
                      "the store " + store + " is in " + dir + ", a directory other users can write (mode " + mode +
                          "): refusing it (they could plant its -wal and -shm files); use a directory only its "
                          "owner can write, such as the default");
  }
  return {};
}

// SQLite's companion files, when they exist, must be regular files of ours too: a link or someone
// else's file there would be written through (the -wal is replayed into the store, the -shm mapped).
Result<void> check_companions(const std::string& path) {
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string f = path + suffix;
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return make_error("cannot open the store " + path + ": " + f + ": " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
      return make_error(ErrorKind::Permission, "the store's " + f +
                                                   " is a symbolic link: refusing it (remove it "
                                                   "if the store is yours)");
    if (!S_ISREG(st.st_mode))
      return make_error(ErrorKind::Permission, "the store's " + f + " is not a regular file: refusing it");
    if (st.st_uid != ::geteuid())
      return make_error(ErrorKind::Permission,
                        "the store's " + f + " is owned by " + owner_text(st.st_uid) + ", not by us: refusing it");
  }
  return {};
}

}  // namespace

Result<Db> Db::open(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty())
    if (auto made = platform::make_dirs(parent.string(), 0700); !made)
      return make_error("cannot open the store " + path + ": " + made.error().message);
  if (auto ok = check_store_dir(path, parent.empty() ? "." : parent.string()); !ok) return ok.error();
  if (auto ok = check_or_create_store_file(path); !ok) return ok.error();
  if (auto ok = check_companions(path); !ok) return ok.error();
  sqlite3* db = nullptr;
  // NOFOLLOW: SQLite itself also refuses a path that is (or became) a symbolic link.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, nullptr);
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
  if (!g_automatic_checkpoints.load())
    if (auto r = out.exec("PRAGMA wal_autocheckpoint=0"); !r)
      return make_error("cannot set up the store " + path + ": " + r.error().message);
  return out;
}

void set_automatic_checkpoints(bool on) noexcept { g_automatic_checkpoints.store(on); }

Db::~Db() {
  for (auto& [sql, c] : cache_) {
    assert(!c.in_use && "a Stmt outlived its Db");
    sqlite3_finalize(c.st);
  }
  if (db_) sqlite3_close(db_);
}

int Db::changes() const { return sqlite3_changes(db_); }

bool Db::in_transaction() const { return db_ && sqlite3_get_autocommit(db_) == 0; }

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

Result<Stmt> Db::prepare_cached(std::string_view sql) {
  if (auto it = cache_.find(std::string(sql)); it != cache_.end()) {
    if (it->second.in_use) return prepare(sql);  // borrowed by a caller further up: a fresh one
    it->second.in_use = true;
    return Stmt(it->second.st, db_, &it->second.in_use);
  }
  if (cache_.size() >= kMaxCached) return prepare(sql);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &st, nullptr) !=
      SQLITE_OK)
    return make_error(error());
  auto& c = cache_[std::string(sql)];
  c.st = st;
  c.in_use = true;
  return Stmt(st, db_, &c.in_use);
}

Stmt::~Stmt() {
  if (!st_) return;
  if (lent_) {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    *lent_ = false;
  } else {
    sqlite3_finalize(st_);
  }
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
