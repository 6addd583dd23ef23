#include "store/node_store.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <unordered_map>

#include "platform/fs.hpp"
#include "platform/procfs.hpp"

namespace gf::store {
namespace {

constexpr std::int64_t kSchemaVersion = 2;
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS leases(
  id TEXT PRIMARY KEY, job_id TEXT NOT NULL, name TEXT NOT NULL,
  owner_pid INTEGER NOT NULL, owner_start INTEGER NOT NULL, owner_user TEXT NOT NULL,
  created_ms INTEGER NOT NULL, released_ms INTEGER, release_reason TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS lease_gpus(
  lease_id TEXT NOT NULL REFERENCES leases(id), gpu_index INTEGER NOT NULL, gpu_key TEXT NOT NULL,
  gpu_uuid TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1);
-- The last line of defence: whatever a caller decides, one GPU never has two active leases.
CREATE UNIQUE INDEX IF NOT EXISTS one_active_lease_per_gpu ON lease_gpus(gpu_key) WHERE active = 1;
CREATE INDEX IF NOT EXISTS leases_active ON leases(released_ms);
CREATE INDEX IF NOT EXISTS lease_gpus_lease ON lease_gpus(lease_id);
CREATE TABLE IF NOT EXISTS waiters(
  id TEXT PRIMARY KEY, name TEXT NOT NULL, priority INTEGER NOT NULL, enqueued_ms INTEGER NOT NULL,
  gpus INTEGER NOT NULL, owner_pid INTEGER NOT NULL, owner_start INTEGER NOT NULL, owner_user TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS waiters_order ON waiters(priority DESC, enqueued_ms);
-- Jobs (recorded runs): the table keeps the seeds' word, its name since version 1.
CREATE TABLE IF NOT EXISTS experiments(
  id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, command TEXT NOT NULL, exit_code INTEGER,
  started_ms INTEGER NOT NULL, ended_ms INTEGER, lease_id TEXT NOT NULL DEFAULT '', record TEXT NOT NULL,
  owner_pid INTEGER NOT NULL DEFAULT 0, owner_start INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS experiments_started ON experiments(started_ms);
-- Version 2 (issue 12): who owns each row (the arbiter's peer uid; NULL in rows of older binaries),
-- and what a lease is tied to ('connection', 'process', '' when written without the agent). A version 1
-- file gets the columns here; a new file gets the tables above, then the same columns.
ALTER TABLE leases ADD COLUMN owner_uid INTEGER;
ALTER TABLE leases ADD COLUMN tie TEXT NOT NULL DEFAULT '';
ALTER TABLE waiters ADD COLUMN owner_uid INTEGER;
ALTER TABLE experiments ADD COLUMN owner_uid INTEGER;
)sql";

// The job record's own columns for listing it by owner and task (issue 14). A component of its own in
// gf_schema, so the node schema's version-2 ALTERs above are not run twice on a version-2 file.
// gpu_count is the record's gpu_info.count, checked and clamped once when the row is written, so the task
// totals sum an integer column instead of parsing every record on every request. Rows written before
// the column existed get it, and their owner's name (from their lease), here.
#define GF_RECORD_GPU_COUNT(rec)                     \
  "CASE WHEN json_valid(" rec ") AND json_type(" rec \
  ", '$.gpu_info.count') = 'integer' THEN "          \
  "MIN(MAX(json_extract(" rec ", '$.gpu_info.count'), 0), 4096) ELSE 0 END"
constexpr std::int64_t kJobsSchemaVersion = 1;
constexpr const char* kJobsSchema =
    "ALTER TABLE experiments ADD COLUMN owner_user TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE experiments ADD COLUMN task TEXT NOT NULL DEFAULT '';\n"
    "ALTER TABLE experiments ADD COLUMN gpu_count INTEGER NOT NULL DEFAULT 0;\n"
    "UPDATE experiments SET gpu_count = " GF_RECORD_GPU_COUNT("record") ";\n"
    "UPDATE experiments SET owner_user = COALESCE((SELECT l.owner_user FROM leases l WHERE l.id = "
    "experiments.lease_id AND experiments.lease_id != ''), '') WHERE owner_user = '';\n"
    "CREATE INDEX IF NOT EXISTS experiments_status ON experiments(status, started_ms);\n"
    "CREATE INDEX IF NOT EXISTS experiments_user ON experiments(owner_user, started_ms);\n"
    "CREATE INDEX IF NOT EXISTS experiments_task ON experiments(task, started_ms);\n";

// When the store last wrote each job row (issue 20, finding 4): retention and the per-uid cap go by it,
// never by the row's own times, which its writer chose. Rows written before the column existed count
// from their end (or start), never from later than the upgrade; rows an older binary writes are NULL
// and count from their start.
constexpr std::int64_t kJobWritesSchemaVersion = 1;
constexpr const char* kJobWritesSchema =
    "ALTER TABLE experiments ADD COLUMN written_ms INTEGER;\n"
    "UPDATE experiments SET written_ms = MIN(COALESCE(ended_ms, started_ms), "
    "CAST(strftime('%s', 'now') AS INTEGER) * 1000);\n"
    "CREATE INDEX IF NOT EXISTS experiments_owner_written ON experiments(owner_uid, written_ms);\n";
constexpr const char* kFinished = "status NOT IN ('waiting', 'running')";
constexpr const char* kWritten = "COALESCE(written_ms, started_ms)";

std::string gpu_key(const core::LeasedGpu& g) { return g.uuid.empty() ? fmt::format("index:{}", g.index) : g.uuid; }

constexpr const char* kWaiterColumns =
    "id, name, priority, enqueued_ms, gpus, owner_pid, owner_start, owner_user, owner_uid";

std::optional<std::uint32_t> opt_uid(const Stmt& s, int col) {
  if (auto v = s.opt_int64(col)) return static_cast<std::uint32_t>(*v);
  return std::nullopt;
}

void bind_uid(Stmt& s, int i, const std::optional<std::uint32_t>& uid) {
  if (uid)
    s.bind(i, std::int64_t{*uid});
  else
    s.bind_null(i);
}

// A row of "SELECT <kWaiterColumns> FROM waiters".
core::Waiter read_waiter(const Stmt& s) {
  core::Waiter w;
  w.id = s.text(0);
  w.name = s.text(1);
  w.priority = static_cast<int>(s.int64(2));
  w.enqueued_at_ms = s.int64(3);
  w.gpus = static_cast<unsigned>(s.int64(4));
  w.owner = {static_cast<std::uint32_t>(s.int64(5)), static_cast<unsigned long long>(s.int64(6)), s.text(7),
             opt_uid(s, 8)};
  return w;
}

std::int64_t bound_limit(std::size_t limit) {
  return static_cast<std::int64_t>(std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max()));
}

bool default_alive(const core::LeaseOwner& o) {
  static const platform::ProcReader proc;
  const auto start = proc.start_time(o.pid);
  if (start) return o.start_time == 0 || *start == o.start_time;
  // /proc/<pid> unreadable (hidepid, another pid namespace) is not "gone": ask the kernel. Only ESRCH
  // proves the owner is dead; a live lease must never be reaped.
  return ::kill(static_cast<pid_t>(o.pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string default_db_path() {
  if (auto v = platform::env("GPUFLEET_DB")) return *v;
  if (::geteuid() == 0) return "/var/lib/gpufleet/gpufleet.db";
  if (auto x = platform::env("XDG_STATE_HOME")) return *x + "/gpufleet/gpufleet.db";
  if (auto h = platform::env("HOME")) return *h + "/.local/state/gpufleet/gpufleet.db";
  return "gpufleet.db";
}

std::string new_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()) << 32};
  return fmt::format("{:012x}", rng() & 0xFFFFFFFFFFFFULL);
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(platform::system_clock().wall_now().time_since_epoch())
      .count();
}

NodeStore::NodeStore(Db db, Alive alive, const core::Clock& clock)
    : db_(std::move(db)),
      alive_(alive ? std::move(alive) : Alive(default_alive)),
      clock_(clock),
      signal_(db_.path() + ".changed") {}

std::int64_t NodeStore::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.wall_now().time_since_epoch()).count();
}

Result<std::unique_ptr<NodeStore>> NodeStore::open(const std::string& path, Alive alive, const core::Clock& clock) {
  auto db = Db::open(path);
  if (!db) return db.error();
  std::unique_ptr<NodeStore> s(new NodeStore(std::move(*db), std::move(alive), clock));
  if (auto m = s->db_.migrate("node", kSchemaVersion, kSchema); !m)
    return make_error("cannot prepare the store " + path + ": " + m.error().message);
  if (auto m = s->db_.migrate("node_jobs", kJobsSchemaVersion, kJobsSchema); !m)
    return make_error("cannot prepare the store " + path + ": " + m.error().message);
  if (auto m = s->db_.migrate("node_job_writes", kJobWritesSchemaVersion, kJobWritesSchema); !m)
    return make_error("cannot prepare the store " + path + ": " + m.error().message);
  return s;
}

Result<std::size_t> NodeStore::sweep_dead_owners(const char* select_sql, std::initializer_list<const char*> updates,
                                                 PidZero pid_zero) {
  auto sel = db_.prepare_cached(select_sql);
  if (!sel) return sel.error();
  std::vector<std::string> dead;
  // One look per owner: a process holding many leases (a launcher, 200 connections of one client) is
  // read from /proc once per sweep, not once per lease (each read costs a /proc/<pid>/stat of all its
  // threads: with 200 leases of one 200-thread owner, most of an acquire's time).
  std::map<std::pair<std::uint32_t, unsigned long long>, bool> seen;
  auto rows = sel->each([&](const Stmt& row) {
    const core::LeaseOwner o{
        static_cast<std::uint32_t>(row.int64(1)), static_cast<unsigned long long>(row.int64(2)), {}};
    if (o.pid == 0 && pid_zero == PidZero::Spare) return;
    auto [it, fresh] = seen.try_emplace({o.pid, o.start_time}, true);
    if (fresh) it->second = alive_(o);
    if (!it->second) dead.push_back(row.text(0));
  });
  if (!rows) return rows.error();
  for (const auto& id : dead) {
    for (const char* sql : updates) {
      auto up = db_.prepare_cached(sql);
      if (!up) return up.error();
      if (auto r = up->bind(1, now_ms()).bind(2, id).run(); !r) return r.error();
    }
  }
  return dead.size();
}

Result<bool> NodeStore::reap_locked() {
  // Leases whose owner process is gone (crashed, SIGKILLed) end here, whoever looks next.
  auto swept = sweep_dead_owners("SELECT id, owner_pid, owner_start FROM leases WHERE released_ms IS NULL",
                                 {"UPDATE leases SET released_ms = ?1, release_reason = 'owner gone' WHERE id = ?2",
                                  "UPDATE lease_gpus SET active = 0 WHERE lease_id = ?2"},
                                 PidZero::Judge);
  if (!swept) return swept.error();
  if (*swept > 0) active_cache_.reset();
  return *swept > 0;
}

Result<std::int64_t> NodeStore::data_version() {
  auto v = db_.prepare_cached("PRAGMA data_version");
  if (!v) return v.error();
  auto row = v->step();
  if (!row) return row.error();
  return *row ? v->int64(0) : std::int64_t{-1};
}

Result<const std::vector<core::Lease>*> NodeStore::active_locked() {
  // PRAGMA data_version moves when another connection (another process, the agent's history writer)
  // commits; this connection's own changes to the leases update or drop the copy where they are made.
  auto got = data_version();
  if (!got) return got.error();
  const std::int64_t version = *got;
  if (!active_cache_ || version != active_version_) {
    auto loaded = load_leases(LeaseSet::Active, 1000000);
    if (!loaded) return loaded.error();
    active_cache_ = std::move(*loaded);
    active_version_ = version;
  }
  return &*active_cache_;
}

Result<std::vector<core::Lease>> NodeStore::load_leases(LeaseSet which, std::size_t limit, std::int64_t since_ms) {
  // Constant SQL per set (cached statements), the limit and time bound as ?1 and ?2; the GPUs of every
  // lease in one query, not one query per lease.
  static constexpr const char* kWhere[] = {"WHERE released_ms IS NULL", "", "WHERE released_ms >= ?2"};
  const char* where = kWhere[static_cast<int>(which)];
  // Both reads see one snapshot: between two separate ones a lease could end or begin and move the
  // LIMIT's window, and a lease of the first read come back without its GPUs (history, ended_since).
  // Inside acquire's or active()'s write transaction this adds nothing.
  ReadTxn snapshot(db_);
  if (auto r = snapshot.begin(); !r) return r.error();
  auto sel = db_.prepare_cached(fmt::format(
      "SELECT id, job_id, name, owner_pid, owner_start, owner_user, created_ms, released_ms, release_reason, "
      "owner_uid, tie FROM leases {} ORDER BY created_ms DESC, id LIMIT ?1",
      where));
  if (!sel) return sel.error();
  sel->bind(1, bound_limit(limit));
  if (which == LeaseSet::EndedSince) sel->bind(2, since_ms);
  std::vector<core::Lease> out;
  std::unordered_map<std::string, std::size_t> by_id;
  auto rows = sel->each([&](const Stmt& row) {
    core::Lease l;
    l.id = row.text(0);
    l.job_id = row.text(1);
    l.name = row.text(2);
    l.owner = {static_cast<std::uint32_t>(row.int64(3)), static_cast<unsigned long long>(row.int64(4)), row.text(5)};
    l.created_at_ms = row.int64(6);
    l.released_at_ms = row.opt_int64(7);
    l.release_reason = row.text(8);
    l.owner.uid = opt_uid(row, 9);
    l.tie = core::tie_from_name(row.text(10));
    by_id.emplace(l.id, out.size());
    out.push_back(std::move(l));
  });
  if (!rows) return rows.error();
  if (out.empty()) return out;
  if (between_lease_reads_) between_lease_reads_();
  auto q = db_.prepare_cached(fmt::format(
      "SELECT lease_id, gpu_index, gpu_uuid FROM lease_gpus WHERE lease_id IN (SELECT id FROM leases {} ORDER BY "
      "created_ms DESC, id LIMIT ?1) ORDER BY rowid",
      where));
  if (!q) return q.error();
  q->bind(1, bound_limit(limit));
  if (which == LeaseSet::EndedSince) q->bind(2, since_ms);
  auto gpus = q->each([&](const Stmt& row) {
    if (auto it = by_id.find(row.text(0)); it != by_id.end())
      out[it->second].gpus.push_back({static_cast<unsigned>(row.int64(1)), row.text(2)});
  });
  if (!gpus) return gpus.error();
  return out;
}

Result<NodeStore::Ahead> NodeStore::live_waiters_ahead(const std::string& waiter_id) {
  // Queue order: priority (higher first), then arrival. Only the first live waiter ahead matters to
  // the decision (it blocks us), so walk from the front, dropping dead waiters, and stop there:
  // the cost does not grow with the length of the queue.
  auto me = db_.prepare_cached("SELECT priority, enqueued_ms, rowid FROM waiters WHERE id = ?1");
  if (!me) return me.error();
  me->bind(1, waiter_id);
  auto found = me->step();
  if (!found) return found.error();
  Ahead out;
  if (!*found) return out;  // not queued (any more)
  const std::int64_t prio = me->int64(0), enq = me->int64(1), rowid = me->int64(2);
  auto sel = db_.prepare_cached(
      fmt::format("SELECT {} FROM waiters "
                  "WHERE priority > ?1 OR (priority = ?1 AND (enqueued_ms < ?2 OR (enqueued_ms = ?2 AND rowid < ?3))) "
                  "ORDER BY priority DESC, enqueued_ms, rowid",
                  kWaiterColumns));
  if (!sel) return sel.error();
  sel->bind(1, prio).bind(2, enq).bind(3, rowid);
  std::vector<std::string> dead;
  auto rows = sel->each([&](const Stmt& row) {
    core::Waiter w = read_waiter(row);
    if (!alive_(w.owner)) {
      dead.push_back(w.id);
      return true;
    }
    out.waiters.push_back(std::move(w));
    return false;  // the first live one: the decision needs no more
  });
  if (!rows) return rows.error();
  for (const auto& id : dead) {
    auto del = db_.prepare_cached("DELETE FROM waiters WHERE id = ?1");
    if (!del) return del.error();
    if (auto r = del->bind(1, id).run(); !r) return r.error();
  }
  out.removed_dead = !dead.empty();
  return out;
}

Result<std::vector<core::Waiter>> NodeStore::load_waiters() {
  auto sel = db_.prepare_cached(
      fmt::format("SELECT {} FROM waiters ORDER BY priority DESC, enqueued_ms, rowid", kWaiterColumns));
  if (!sel) return sel.error();
  std::vector<core::Waiter> out;
  auto rows = sel->each([&](const Stmt& row) {
    core::Waiter w = read_waiter(row);
    out.push_back(std::move(w));
  });
  if (!rows) return rows.error();
  return out;
}

Result<std::optional<core::Lease>> NodeStore::acquire(const core::LeaseRequest& req, const Decide& decide) {
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r.error();
  // The dead-owner sweep asks /proc about every distinct owner: on the way to a grant it runs at most
  // once per kSweepEvery, and before a "not now" unless it ran in the last kSweepGap, so a dead owner's
  // lease keeps a GPU from no one for longer than that (a grant made beside it takes a GPU it does not
  // hold). The gap spares a queue served on every release a look at every owner each time.
  const auto now = clock_.now();
  bool swept = false, changed = false;
  // A sweep's work lives in this transaction. Unless it commits (an error, a failed insert or commit, a
  // decider that throws), the leases it ended are active again, while the kept list it rebuilt still
  // shows them ended (PRAGMA data_version does not move on a rollback) and the sweep times say it ran:
  // both are dropped, so the next look reads the file and sweeps again.
  struct SweepUndo {
    NodeStore& store;
    bool reaped = false, committed = false;
    ~SweepUndo() {
      if (!reaped || committed) return;
      store.active_cache_.reset();
      store.next_sweep_ = store.last_sweep_ = {};
    }
  } undo{*this};
  auto sweep = [&]() -> Result<bool> {
    auto reaped = reap_locked();
    if (!reaped) return reaped.error();
    swept = true;
    next_sweep_ = now + kSweepEvery;
    last_sweep_ = now;
    changed = changed || *reaped;
    undo.reaped = undo.reaped || *reaped;
    return *reaped;
  };
  if (now >= next_sweep_)
    if (auto r = sweep(); !r) return r.error();
  Result<std::optional<std::vector<core::LeasedGpu>>> picked = std::optional<std::vector<core::LeasedGpu>>();
  for (;;) {
    auto leases = active_locked();
    if (!leases) return leases.error();
    std::vector<core::Waiter> ahead;
    if (!req.waiter_id.empty()) {
      auto a = live_waiters_ahead(req.waiter_id);
      if (!a) return a.error();
      ahead = std::move(a->waiters);
      changed = changed || a->removed_dead;
    }
    picked = decide(**leases, ahead);
    if (!picked) return picked.error();
    if (*picked || swept || now < last_sweep_ + kSweepGap) break;
    auto reaped = sweep();  // not now: first end the leases of owners that are gone, then ask again
    if (!reaped) return reaped.error();
    if (!*reaped) break;
  }
  if (!*picked) {
    if (changed) {
      if (auto r = txn.commit(); !r) return r.error();
      undo.committed = true;
      signal_.notify();
    }
    return std::optional<core::Lease>();
  }
  core::Lease lease;
  lease.id = new_id();
  lease.job_id = req.job_id;
  lease.name = req.name;
  lease.owner = req.owner;
  lease.tie = req.tie;
  lease.created_at_ms = now_ms();
  lease.gpus = **picked;
  auto ins = db_.prepare_cached(
      "INSERT INTO leases(id, job_id, name, owner_pid, owner_start, owner_user, created_ms, owner_uid, tie) "
      "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)");
  if (!ins) return ins.error();
  ins->bind(1, lease.id).bind(2, lease.job_id).bind(3, lease.name).bind(4, std::int64_t{lease.owner.pid});
  ins->bind(5, static_cast<std::int64_t>(lease.owner.start_time))
      .bind(6, lease.owner.user)
      .bind(7, lease.created_at_ms);
  bind_uid(*ins, 8, lease.owner.uid);
  ins->bind(9, std::string(core::tie_name(lease.tie)));
  if (auto r = ins->run(); !r) return r.error();
  for (const auto& g : lease.gpus) {
    auto gi = db_.prepare_cached("INSERT INTO lease_gpus(lease_id, gpu_index, gpu_key, gpu_uuid) VALUES(?1,?2,?3,?4)");
    if (!gi) return gi.error();
    if (auto r = gi->bind(1, lease.id).bind(2, std::int64_t{g.index}).bind(3, gpu_key(g)).bind(4, g.uuid).run(); !r)
      return make_error("GPU " + std::to_string(g.index) + " is already leased (" + r.error().message + ")");
  }
  if (!req.waiter_id.empty()) {
    auto del = db_.prepare_cached("DELETE FROM waiters WHERE id = ?1");
    if (!del) return del.error();
    if (auto r = del->bind(1, req.waiter_id).run(); !r) return r.error();
  }
  if (auto r = txn.commit(); !r) return r.error();
  undo.committed = true;
  if (active_cache_) {  // in load_leases' order: newest first, then by id
    const auto at = std::find_if(active_cache_->begin(), active_cache_->end(), [&](const core::Lease& l) {
      return l.created_at_ms < lease.created_at_ms || (l.created_at_ms == lease.created_at_ms && l.id > lease.id);
    });
    active_cache_->insert(at, lease);
  }
  // The queue moved (a waiter left it with this lease, or the sweep freed GPUs): the next waiter may now
  // be first in line. A grant to a caller that was not queued frees nothing: no one is woken for it.
  if (!req.waiter_id.empty() || changed) signal_.notify();
  return std::optional<core::Lease>(std::move(lease));
}

Result<bool> NodeStore::release(const std::string& lease_id, const std::string& reason) {
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r.error();
  auto up = db_.prepare_cached(
      "UPDATE leases SET released_ms = ?1, release_reason = ?2 WHERE id = ?3 AND released_ms IS NULL");
  if (!up) return up.error();
  if (auto r = up->bind(1, now_ms()).bind(2, reason).bind(3, lease_id).run(); !r) return r.error();
  const bool found = db_.changes() > 0;
  auto g = db_.prepare_cached("UPDATE lease_gpus SET active = 0 WHERE lease_id = ?1");
  if (!g) return g.error();
  if (auto r = g->bind(1, lease_id).run(); !r) return r.error();
  if (auto r = txn.commit(); !r) return r.error();
  if (found && active_cache_) std::erase_if(*active_cache_, [&](const core::Lease& l) { return l.id == lease_id; });
  if (found) signal_.notify();  // wakes waiters in every process at once
  return found;
}

bool NodeStore::kept_list_current_and_owners_alive() {
  if (!active_cache_) return false;
  auto version = data_version();
  if (!version || *version != active_version_) return false;
  // The sweep's rule (reap_locked: every owner judged, pid 0 too), one look per owner.
  std::map<std::pair<std::uint32_t, unsigned long long>, bool> seen;
  for (const auto& l : *active_cache_) {
    auto [it, fresh] = seen.try_emplace({l.owner.pid, l.owner.start_time}, true);
    if (fresh) it->second = alive_(l.owner);
    if (!it->second) return false;
  }
  return true;
}

Result<std::vector<core::Lease>> NodeStore::active() {
  // Asked at every collection (the usage ledger). When no connection committed since the kept list was
  // read (PRAGMA data_version) and every owner in it lives, the sweep would end nothing and the list is
  // the file's: no write transaction. Otherwise the sweep, in one.
  if (kept_list_current_and_owners_alive()) return *active_cache_;
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r.error();
  auto reaped = reap_locked();
  if (!reaped) return reaped.error();
  auto out = active_locked();
  if (!out) return out.error();
  std::vector<core::Lease> copy = **out;
  if (auto r = txn.commit(); !r) {
    active_cache_.reset();  // the sweep's changes were rolled back
    return r.error();
  }
  if (*reaped) signal_.notify();
  return copy;
}

Result<unsigned> NodeStore::gpus_held_by(std::uint32_t uid) {
  // The kept list is only ever read here, never left half-changed: a write transaction's changes reach
  // it after their commit, and a rolled-back sweep drops it (acquire's SweepUndo).
  auto leases = active_locked();
  if (!leases) return leases.error();
  unsigned n = 0;
  for (const auto& l : **leases)
    if (l.owner.uid && *l.owner.uid == uid) n += static_cast<unsigned>(l.gpus.size());
  return n;
}

Result<std::vector<core::Lease>> NodeStore::history(std::size_t limit) { return load_leases(LeaseSet::All, limit); }

Result<std::vector<core::Lease>> NodeStore::ended_since(std::int64_t since_ms, std::size_t limit) {
  // leases_active indexes released_ms.
  return load_leases(LeaseSet::EndedSince, limit, since_ms);
}

Result<std::vector<core::Waiter>> NodeStore::waiters() {
  auto all = load_waiters();
  if (!all) return all;
  std::erase_if(*all, [&](const core::Waiter& w) { return !alive_(w.owner); });
  return all;
}

Result<void> NodeStore::enqueue(const core::Waiter& w) {
  auto ins = db_.prepare_cached(
      "INSERT INTO waiters(id, name, priority, enqueued_ms, gpus, owner_pid, owner_start, owner_user, owner_uid) "
      "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)");
  if (!ins) return ins.error();
  ins->bind(1, w.id).bind(2, w.name).bind(3, std::int64_t{w.priority}).bind(4, w.enqueued_at_ms);
  ins->bind(5, std::int64_t{w.gpus})
      .bind(6, std::int64_t{w.owner.pid})
      .bind(7, static_cast<std::int64_t>(w.owner.start_time));
  ins->bind(8, w.owner.user);
  bind_uid(*ins, 9, w.owner.uid);
  return ins->run();
}

Result<void> NodeStore::dequeue(const std::string& waiter_id) {
  auto del = db_.prepare_cached("DELETE FROM waiters WHERE id = ?1");
  if (!del) return del.error();
  if (auto r = del->bind(1, waiter_id).run(); !r) return r;
  signal_.notify();
  return {};
}

bool NodeStore::wait_for_change(std::chrono::milliseconds timeout) { return signal_.wait(timeout); }

Result<void> NodeStore::put_job(const Job& e) {
  auto st = db_.prepare_cached(
      "INSERT OR REPLACE INTO experiments(id, name, status, command, exit_code, started_ms, ended_ms, lease_id, "
      "record, "
      "owner_pid, owner_start, owner_uid, owner_user, task, gpu_count, written_ms) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,"
      "?10,?11,?12,?13,?14," GF_RECORD_GPU_COUNT("?9") ",?15)");
  if (!st) return st.error();
  st->bind(1, e.id).bind(2, e.name).bind(3, e.status).bind(4, e.command);
  if (e.exit_code)
    st->bind(5, std::int64_t{*e.exit_code});
  else
    st->bind_null(5);
  st->bind(6, e.started_at_ms);
  if (e.ended_at_ms)
    st->bind(7, *e.ended_at_ms);
  else
    st->bind_null(7);
  st->bind(8, e.lease_id).bind(9, e.record).bind(10, std::int64_t{e.owner.pid});
  st->bind(11, static_cast<std::int64_t>(e.owner.start_time));
  bind_uid(*st, 12, e.owner.uid);
  st->bind(13, e.owner.user).bind(14, e.task).bind(15, now_ms());
  return st->run();
}

Result<std::uint64_t> NodeStore::count_jobs(std::uint32_t uid) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  auto st = db_.prepare_cached("SELECT COUNT(*) FROM experiments WHERE owner_uid = ?1");
  if (!st) return st.error();
  st->bind(1, std::int64_t{uid});
  auto row = st->step();
  if (!row) return row.error();
  return *row ? static_cast<std::uint64_t>(st->int64(0)) : 0;
}

Result<std::size_t> NodeStore::prune_oldest_finished(std::uint32_t uid, std::size_t n) {
  if (n == 0) return std::size_t{0};
  auto st = db_.prepare_cached(
      fmt::format("DELETE FROM experiments WHERE rowid IN (SELECT rowid FROM experiments WHERE owner_uid = ?1 AND {} "
                  "ORDER BY {}, rowid LIMIT ?2)",
                  kFinished, kWritten));
  if (!st) return st.error();
  st->bind(1, std::int64_t{uid}).bind(2, static_cast<std::int64_t>(n));
  if (auto r = st->run(); !r) return r.error();
  return static_cast<std::size_t>(db_.changes());
}

Result<std::size_t> NodeStore::prune_finished_older_than(std::chrono::milliseconds age) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  auto st = db_.prepare_cached(fmt::format("DELETE FROM experiments WHERE {} AND {} < ?1", kFinished, kWritten));
  if (!st) return st.error();
  st->bind(1, now_ms() - age.count());
  if (auto r = st->run(); !r) return r.error();
  return static_cast<std::size_t>(db_.changes());
}

namespace {
Job read_job(const Stmt& s) {
  Job e;
  e.id = s.text(0);
  e.name = s.text(1);
  e.status = s.text(2);
  e.command = s.text(3);
  if (auto c = s.opt_int64(4)) e.exit_code = static_cast<int>(*c);
  e.started_at_ms = s.int64(5);
  e.ended_at_ms = s.opt_int64(6);
  e.lease_id = s.text(7);
  e.record = s.text(8);
  e.owner.pid = static_cast<std::uint32_t>(s.int64(9));
  e.owner.start_time = static_cast<unsigned long long>(s.int64(10));
  e.owner.uid = opt_uid(s, 11);
  e.owner.user = s.text(12);
  e.task = s.text(13);
  return e;
}
constexpr const char* kJobColumns =
    "id, name, status, command, exit_code, started_ms, ended_ms, lease_id, record, owner_pid, owner_start, owner_uid, "
    "owner_user, task";

// The WHERE clause of a job query and its parameters (bound in order from ?1); task totals count runs of
// every status, so they leave the status out.
struct JobFilter {
  std::string where;
  std::vector<std::string> text;
  std::optional<std::int64_t> uid;
};
JobFilter job_filter(const core::JobQuery& q, bool with_status) {
  JobFilter f;
  std::vector<std::string> terms;
  auto add = [&](const char* column, const std::string& v) {
    if (v.empty()) return;
    f.text.push_back(v);
    terms.push_back(fmt::format("{} = ?{}", column, f.text.size()));
  };
  if (with_status) add("status", q.status);
  add("task", q.task);
  add("owner_user", q.user);
  if (q.uid) {
    f.uid = std::int64_t{*q.uid};
    terms.push_back(fmt::format("owner_uid = ?{}", f.text.size() + 1));
  }
  for (std::size_t i = 0; i < terms.size(); ++i) f.where += (i ? " AND " : "WHERE ") + terms[i];
  return f;
}
void bind_filter(Stmt& st, const JobFilter& f) {
  int i = 1;
  for (const auto& v : f.text) st.bind(i++, v);
  if (f.uid) st.bind(i, *f.uid);
}
}  // namespace

Result<void> NodeStore::reconcile_jobs() {
  // A job recorded without a process (owner_pid 0) is not this sweep's to judge.
  auto swept = sweep_dead_owners(
      "SELECT id, owner_pid, owner_start FROM experiments WHERE status IN ('waiting', 'running')",
      {"UPDATE experiments SET status = 'lost', ended_ms = ?1, written_ms = ?1 WHERE id = ?2 AND status IN "
       "('waiting', 'running')"},
      PidZero::Spare);
  if (!swept) return swept.error();
  return {};
}

Result<std::optional<Job>> NodeStore::job(const std::string& id) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  auto st = db_.prepare_cached(fmt::format("SELECT {} FROM experiments WHERE id = ?1", kJobColumns));
  if (!st) return st.error();
  st->bind(1, id);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<Job>();
  return std::optional<Job>(read_job(*st));
}

Result<std::vector<Job>> NodeStore::jobs(std::size_t limit) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  auto st = db_.prepare(
      fmt::format("SELECT {} FROM experiments ORDER BY started_ms DESC, rowid DESC LIMIT {}", kJobColumns, limit));
  if (!st) return st.error();
  std::vector<Job> out;
  auto rows = st->each([&](const Stmt& row) { out.push_back(read_job(row)); });
  if (!rows) return rows.error();
  return out;
}

Result<core::JobPage> NodeStore::jobs_page(const core::JobQuery& q) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  const JobFilter f = job_filter(q, true);
  core::JobPage page;
  auto count = db_.prepare(fmt::format("SELECT COUNT(*) FROM experiments {}", f.where));
  if (!count) return count.error();
  bind_filter(*count, f);
  auto c = count->step();
  if (!c) return c.error();
  page.total = *c ? static_cast<std::uint64_t>(count->int64(0)) : 0;
  // Without the series, SQLite drops them from each record before it is copied out (kJobColumns with
  // its record column replaced; read_job reads columns by position).
  std::string columns = kJobColumns;
  if (!q.with_series)
    columns.replace(columns.find("record"), 6,
                    "CASE WHEN json_valid(record) AND json_type(record, '$.metrics.gpu_monitoring.series') IS NOT "
                    "NULL THEN json_set(json_remove(record, '$.metrics.gpu_monitoring.series'), "
                    "'$.metrics.gpu_monitoring.has_series', json('true')) ELSE record END");
  auto st =
      db_.prepare(fmt::format("SELECT {} FROM experiments {} ORDER BY started_ms DESC, rowid DESC LIMIT {} OFFSET {}",
                              columns, f.where, q.limit, q.offset));
  if (!st) return st.error();
  bind_filter(*st, f);
  std::size_t bytes = 0;
  auto rows = st->each([&](const Stmt& row) {
    Job j = read_job(row);
    if (q.max_bytes != 0) {
      const std::size_t size = j.record.size() + j.command.size() + j.name.size() + j.id.size() + j.status.size();
      if (!page.jobs.empty() && bytes + size > q.max_bytes) {
        page.truncated = true;
        return false;
      }
      bytes += size;
    }
    page.jobs.push_back(std::move(j));
    return true;
  });
  if (!rows) return rows.error();
  return page;
}

Result<core::TaskPage> NodeStore::task_totals(const core::JobQuery& q) {
  if (auto r = reconcile_jobs(); !r) return r.error();
  JobFilter f = job_filter(q, false);
  f.where += f.where.empty() ? "WHERE task != ''" : " AND task != ''";
  core::TaskPage page;
  // One row per task and owner: task names are one namespace shared by every user, so a task of the
  // same name run by someone else is a row of its own, never added to yours.
  auto count = db_.prepare(
      fmt::format("SELECT COUNT(*) FROM (SELECT 1 FROM experiments {} GROUP BY task, owner_uid, owner_user)", f.where));
  if (!count) return count.error();
  bind_filter(*count, f);
  auto c = count->step();
  if (!c) return c.error();
  page.total = *c ? static_cast<std::uint64_t>(count->int64(0)) : 0;
  // GPU-hours: the GPUs granted (gpu_count, 0 for a run that never got any) times the run's time, up to
  // now for a run still going. TOTAL sums in floating point: a record claiming absurd times can make a
  // sum large, never make the query fail with an integer overflow. The sums run in SQLite over every
  // matching run, so a user with thousands of runs gets exact totals without paging through them.
  const std::string now = std::to_string(now_ms());
  auto st = db_.prepare(fmt::format(
      "SELECT task, COUNT(*), TOTAL(status = 'succeeded'), TOTAL(status = 'failed'), TOTAL(status = 'running'), "
      "TOTAL(gpu_count * MAX(0, MIN(COALESCE(ended_ms, {0}), {0}) - started_ms)) / 3600000.0, MAX(started_ms), "
      "owner_uid, owner_user "
      "FROM experiments {1} GROUP BY task, owner_uid, owner_user ORDER BY MAX(started_ms) DESC, task LIMIT {2} "
      "OFFSET {3}",
      now, f.where, q.limit, q.offset));
  if (!st) return st.error();
  bind_filter(*st, f);
  auto rows = st->each([&](const Stmt& row) {
    core::TaskTotals t;
    t.task = row.text(0);
    t.runs = static_cast<std::uint64_t>(row.int64(1));
    t.succeeded = static_cast<std::uint64_t>(row.opt_double(2).value_or(0));
    t.failed = static_cast<std::uint64_t>(row.opt_double(3).value_or(0));
    t.running = static_cast<std::uint64_t>(row.opt_double(4).value_or(0));
    t.gpu_hours = row.opt_double(5).value_or(0);
    t.owner_uid = opt_uid(row, 7);
    t.owner_user = row.text(8);
    t.last_started_ms = row.int64(6);
    page.tasks.push_back(std::move(t));
  });
  if (!rows) return rows.error();
  return page;
}

Result<std::map<std::string, std::uint64_t>> NodeStore::job_counts() {
  if (auto r = reconcile_jobs(); !r) return r.error();
  auto st = db_.prepare_cached("SELECT status, COUNT(*) FROM experiments GROUP BY status");
  if (!st) return st.error();
  std::map<std::string, std::uint64_t> out;
  auto rows = st->each([&](const Stmt& row) { out[row.text(0)] = static_cast<std::uint64_t>(row.int64(1)); });
  if (!rows) return rows.error();
  return out;
}

}  // namespace gf::store
