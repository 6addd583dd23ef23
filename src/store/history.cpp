#include "store/history.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

namespace gf::store {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

// 2: alerts_gpu_started (GET /api/v1/alerts?gpu=N reads one GPU's episodes by it). The schema text is all
// IF NOT EXISTS: a version bump runs it again over a version-1 file and adds what is new.
// 3: the profiling (NVML GPM) columns, added by ALTER TABLE (schema_v3_sql), which runs once per file
// after version 2 is in place, on new and old files alike. Files written before keep their rows: the new
// columns read NULL there (absent, never 0), and older gpufleet versions, which name their columns,
// still read and write a version-3 file.
constexpr std::int64_t kSchemaBase = 2;
constexpr std::int64_t kSchemaProfiling = 3;
constexpr std::int64_t kMinuteMs = 60'000;
constexpr std::int64_t kHourMs = 3'600'000;

// The columns of samples_raw in schema version 1, in their on-disk order; each is rolled up as
// <col>_n/_min/_max/_avg. power is REAL (W); the rest are integers in the unit of the GpuReading field.
// Then the columns schema version 3 adds: profiling ratios (0..1) and bytes/s, all REAL.
// These lists are the stored schema: they change only with a migration. Which field fills which column
// comes from core::kFields (history_column); the check below keeps the two in step.
constexpr std::array<std::string_view, 9> kColumnsV1 = {"util",  "mem_util", "mem_used", "mem_total", "temp",
                                                        "power", "fan",      "sm_clock", "mem_clock"};
constexpr std::array<std::string_view, 12> kColumnsV3 = {
    "prof_gr",   "prof_sm",   "prof_occ",     "prof_tensor",  "prof_dram",      "prof_fp64",
    "prof_fp32", "prof_fp16", "prof_pcie_tx", "prof_pcie_rx", "prof_nvlink_tx", "prof_nvlink_rx"};
constexpr auto kColumns = [] {
  std::array<std::string_view, kColumnsV1.size() + kColumnsV3.size()> out{};
  std::size_t n = 0;
  for (auto c : kColumnsV1) out[n++] = c;
  for (auto c : kColumnsV3) out[n++] = c;
  return out;
}();

constexpr bool columns_match_field_table() {
  std::size_t stored = 0;
  for (const auto& f : core::kFields) {
    if (f.history_column.empty()) continue;
    ++stored;
    bool found = false;
    for (auto c : kColumns) found = found || c == f.history_column;
    if (!found) return false;  // a new stored field needs a schema migration first
  }
  return stored == kColumns.size();
}
static_assert(columns_match_field_table(), "core::kFields' history columns differ from the stored schema");

// The stored fields, in table order; every statement names its columns, so this order need not be the
// on-disk one.
constexpr auto kStored = [] {
  std::array<core::Field, kColumns.size()> out{};
  std::size_t n = 0;
  for (const auto& f : core::kFields)
    if (!f.history_column.empty()) out[n++] = f.id;
  return out;
}();

std::string_view column_of(core::Field f) { return core::info(f).history_column; }

// Tiers by index: 0 raw, 1 one minute, 2 one hour.
constexpr std::array<const char*, 3> kTables = {"samples_raw", "samples_1m", "samples_1h"};
constexpr std::array<const char*, 3> kTierNames = {"raw", "1m", "1h"};
constexpr std::array<std::int64_t, 3> kResolutionMs = {1, kMinuteMs, kHourMs};

std::string rollup_table_sql(const char* table) {
  std::string cols;
  for (auto c : kColumnsV1) cols += fmt::format(" {0}_n INTEGER NOT NULL, {0}_min, {0}_max, {0}_avg REAL,", c);
  return fmt::format(
      "CREATE TABLE IF NOT EXISTS {0}(ts_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, uuid TEXT NOT NULL, "
      "n INTEGER NOT NULL,{1} PRIMARY KEY(gpu, ts_ms));\n"
      "CREATE INDEX IF NOT EXISTS {0}_ts ON {0}(ts_ms);\n",
      table, cols);
}

std::string schema_sql() {
  std::string s =
      "CREATE TABLE IF NOT EXISTS samples_raw(ts_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, uuid TEXT NOT NULL,"
      " util INTEGER, mem_util INTEGER, mem_used INTEGER, mem_total INTEGER, temp INTEGER, power REAL,"
      " fan INTEGER, sm_clock INTEGER, mem_clock INTEGER);\n"
      "CREATE INDEX IF NOT EXISTS samples_raw_gpu_ts ON samples_raw(gpu, ts_ms);\n"
      "CREATE INDEX IF NOT EXISTS samples_raw_ts ON samples_raw(ts_ms);\n";
  s += rollup_table_sql("samples_1m");
  s += rollup_table_sql("samples_1h");
  // rolled_ms: every bucket before it has been rolled up into this tier (unused for raw).
  // pruned_ms: rows before it have been deleted, so the tier no longer covers earlier times.
  s += "CREATE TABLE IF NOT EXISTS history_tiers(tier TEXT PRIMARY KEY, rolled_ms INTEGER NOT NULL DEFAULT 0,"
       " pruned_ms INTEGER NOT NULL DEFAULT 0);\n"
       "INSERT OR IGNORE INTO history_tiers(tier) VALUES ('raw'), ('1m'), ('1h');\n";
  // One row per alert episode: inserted when it fires, completed when it resolves.
  s += "CREATE TABLE IF NOT EXISTS alerts(alert_id TEXT NOT NULL, started_ms INTEGER NOT NULL, kind TEXT NOT NULL,"
       " gpu INTEGER NOT NULL, uuid TEXT NOT NULL, severity TEXT NOT NULL, message TEXT NOT NULL,"
       " value REAL NOT NULL, threshold REAL NOT NULL, resolved_ms INTEGER, PRIMARY KEY(alert_id, started_ms));\n"
       "CREATE INDEX IF NOT EXISTS alerts_started ON alerts(started_ms);\n"
       "CREATE INDEX IF NOT EXISTS alerts_gpu_started ON alerts(gpu, started_ms);\n";
  return s;
}

std::string schema_v3_sql() {
  std::string s;
  for (auto c : kColumnsV3) {
    s += fmt::format("ALTER TABLE samples_raw ADD COLUMN {} REAL;\n", c);
    for (const char* t : {"samples_1m", "samples_1h"})
      s += fmt::format(
          "ALTER TABLE {0} ADD COLUMN {1}_n INTEGER NOT NULL DEFAULT 0; ALTER TABLE {0} ADD COLUMN {1}_min;"
          " ALTER TABLE {0} ADD COLUMN {1}_max; ALTER TABLE {0} ADD COLUMN {1}_avg REAL;\n",
          t, c);
  }
  return s;
}

// The same folding in both rollups, NULL-aware: COUNT/MIN/MAX/AVG skip NULLs, an all-NULL bucket
// gets count 0 and NULL min/max/avg.
// The target columns of a rollup insert, named (so the statement does not depend on column order).
std::string rollup_targets() {
  std::string t = "ts_ms, gpu, uuid, n";
  for (auto f : kStored) t += fmt::format(", {0}_n, {0}_min, {0}_max, {0}_avg", column_of(f));
  return t;
}

std::string minute_rollup_sql() {
  std::string cols;
  for (auto f : kStored) cols += fmt::format(", COUNT({0}), MIN({0}), MAX({0}), AVG({0})", column_of(f));
  return fmt::format(
      "INSERT OR REPLACE INTO samples_1m({2}) SELECT (ts_ms / {0}) * {0} AS b, gpu, MAX(uuid), COUNT(*){1}"
      " FROM samples_raw WHERE ts_ms >= ?1 AND ts_ms < ?2 GROUP BY b, gpu",
      kMinuteMs, cols, rollup_targets());
}

std::string hour_rollup_sql() {
  std::string cols;
  for (auto f : kStored)
    cols += fmt::format(
        ", SUM({0}_n), MIN({0}_min), MAX({0}_max), CAST(SUM({0}_avg * {0}_n) AS REAL) / NULLIF(SUM({0}_n), 0)",
        column_of(f));
  return fmt::format(
      "INSERT OR REPLACE INTO samples_1h({2}) SELECT (ts_ms / {0}) * {0} AS b, gpu, MAX(uuid), SUM(n){1}"
      " FROM samples_1m WHERE ts_ms >= ?1 AND ts_ms < ?2 GROUP BY b, gpu",
      kHourMs, cols, rollup_targets());
}

std::string insert_raw_sql() {
  std::string cols, params;
  int p = 4;  // ?1 ts_ms, ?2 gpu, ?3 uuid
  for (auto f : kStored) {
    cols += fmt::format(", {}", column_of(f));
    params += fmt::format(", ?{}", p++);
  }
  return fmt::format("INSERT INTO samples_raw(ts_ms, gpu, uuid{}) VALUES (?1, ?2, ?3{})", cols, params);
}

std::int64_t to_ms(HistoryStore::TimePoint t) { return duration_cast<milliseconds>(t.time_since_epoch()).count(); }
std::int64_t floor_to(std::int64_t v, std::int64_t unit) {
  return v >= 0 ? v / unit * unit : -((-v + unit - 1) / unit) * unit;
}

// Binds a field's value, or NULL when it is absent (never a made-up 0).
void bind_field(Stmt& st, int i, const core::FieldValue& v) {
  switch (v.kind) {
    case core::FieldValue::Kind::Unsigned: st.bind(i, static_cast<std::int64_t>(v.u)); return;
    case core::FieldValue::Kind::Signed: st.bind(i, v.i); return;
    case core::FieldValue::Kind::Double: st.bind(i, v.d); return;
    case core::FieldValue::Kind::Absent: st.bind_null(i); return;
  }
}

struct TierState {
  std::int64_t rolled_ms = 0;
  std::int64_t pruned_ms = 0;
};

Result<std::array<TierState, 3>> read_tiers(Db& db) {
  auto st = db.prepare("SELECT rolled_ms, pruned_ms FROM history_tiers WHERE tier = ?1");
  if (!st) return st.error();
  std::array<TierState, 3> out{};
  for (std::size_t t = 0; t < out.size(); ++t) {
    st->reset();
    st->bind(1, std::string_view(kTierNames[t]));
    auto row = st->step();
    if (!row) return row.error();
    if (*row) {
      out[t].rolled_ms = st->int64(0);
      out[t].pruned_ms = st->int64(1);
    }
  }
  return out;
}

Result<void> run_sql(Db& db, const std::string& sql, std::int64_t a, std::int64_t b) {
  auto st = db.prepare(sql);
  if (!st) return st.error();
  st->bind(1, a);
  st->bind(2, b);
  return st->run();
}

}  // namespace

Result<std::unique_ptr<HistoryStore>> HistoryStore::open(const std::string& path, HistoryOptions options) {
  auto db = Db::open(path);
  if (!db) return db.error();
  std::unique_ptr<HistoryStore> s(new HistoryStore(std::move(*db), options));
  if (auto m = s->db_.migrate("history", kSchemaBase, schema_sql().c_str()); !m)
    return make_error("cannot prepare the history store " + path + ": " + m.error().message);
  if (auto m = s->db_.migrate("history", kSchemaProfiling, schema_v3_sql().c_str()); !m)
    return make_error("cannot add the profiling columns to the history store " + path + ": " + m.error().message);
  return s;
}

Result<void> HistoryStore::insert_rows(const core::Snapshot& s) {
  if (!insert_raw_) {
    auto prepared = db_.prepare(insert_raw_sql());
    if (!prepared) return prepared.error();
    insert_raw_.emplace(std::move(*prepared));
  }
  Stmt* st = &*insert_raw_;
  const std::int64_t ts = to_ms(s.timestamp);
  for (const auto& g : s.gpus) {
    st->reset();
    st->bind(1, ts);
    st->bind(2, static_cast<std::int64_t>(g.index));
    st->bind(3, std::string_view(g.uuid));
    int p = 4;
    for (auto f : kStored) bind_field(*st, p++, core::read(f, g));
    if (auto r = st->run(); !r) return r;
  }
  return {};
}

Result<void> HistoryStore::append(const core::Snapshot& s) {
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r;
  if (auto r = insert_rows(s); !r) return r;
  return txn.commit();
}

Result<void> HistoryStore::append_batch(const std::vector<core::SnapshotPtr>& batch) {
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r;
  for (const auto& s : batch) {
    if (!s) return make_error("history batch holds a null snapshot; nothing of the batch was written");
    if (auto r = insert_rows(*s); !r) return r;
  }
  return txn.commit();
}

Result<void> HistoryStore::maintain(TimePoint now) {
  const std::int64_t now_ms = to_ms(now);
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r;
  auto tiers = read_tiers(db_);
  if (!tiers) return tiers.error();
  auto set_state = [this](std::size_t tier, const TierState& st) -> Result<void> {
    auto u = db_.prepare("UPDATE history_tiers SET rolled_ms = ?1, pruned_ms = ?2 WHERE tier = ?3");
    if (!u) return u.error();
    u->bind(1, st.rolled_ms);
    u->bind(2, st.pruned_ms);
    u->bind(3, std::string_view(kTierNames[tier]));
    return u->run();
  };

  // Roll up first, so that pruning raw never drops a minute that has not been folded yet. A clock
  // that went back leaves the watermarks where they are.
  auto& minute = (*tiers)[1];
  if (const std::int64_t hi = floor_to(now_ms, kMinuteMs); hi > minute.rolled_ms) {
    if (auto r = run_sql(db_, minute_rollup_sql(), minute.rolled_ms, hi); !r) return r;
    minute.rolled_ms = hi;
  }
  auto& hour = (*tiers)[2];
  if (const std::int64_t hi = floor_to(minute.rolled_ms, kHourMs); hi > hour.rolled_ms) {
    if (auto r = run_sql(db_, hour_rollup_sql(), hour.rolled_ms, hi); !r) return r;
    hour.rolled_ms = hi;
  }

  const std::array<std::chrono::seconds, 3> keep = {options_.raw_retention, options_.minute_retention,
                                                    options_.hour_retention};
  for (std::size_t t = 0; t < keep.size(); ++t) {
    const std::int64_t cutoff = now_ms - duration_cast<milliseconds>(keep[t]).count();
    auto& st = (*tiers)[t];
    if (cutoff > st.pruned_ms) {
      auto d = db_.prepare(fmt::format("DELETE FROM {} WHERE ts_ms < ?1", kTables[t]));
      if (!d) return d.error();
      d->bind(1, cutoff);
      if (auto r = d->run(); !r) return r;
      st.pruned_ms = cutoff;
    }
    if (auto r = set_state(t, st); !r) return r;
  }
  return txn.commit();
}

Result<std::vector<HistoryPoint>> HistoryStore::query(unsigned gpu, core::Field metric, TimePoint since,
                                                      TimePoint until, std::chrono::seconds step) {
  const std::int64_t since_ms = to_ms(since);
  const std::int64_t until_ms = to_ms(until);
  // One read transaction, so that a maintain in another process cannot move rows between tiers
  // while the parts below are read.
  if (auto r = db_.exec("BEGIN"); !r) return r.error();
  struct EndRead {
    Db& db;
    ~EndRead() { (void)db.exec("COMMIT"); }
  } end_read{db_};

  auto tiers = read_tiers(db_);
  if (!tiers) return tiers.error();
  std::size_t tier = 2;
  if (since_ms >= (*tiers)[0].pruned_ms) {
    tier = 0;
  } else if (since_ms >= (*tiers)[1].pruned_ms) {
    tier = 1;
  }
  const std::int64_t step_ms = step.count() > 0 ? duration_cast<milliseconds>(step).count() : kResolutionMs[tier];

  // The chosen tier up to its watermark, then each finer tier from the coarser one's watermark on:
  // every sample is counted once, and the newest (not yet rolled up) ones are included.
  const std::string_view c = column_of(metric);
  if (c.empty() || core::info(metric).history_metric.empty())
    return make_error(fmt::format("the history keeps no '{}' (it keeps {})", core::info(metric).json_key,
                                  core::history_metric_list()));
  std::string parts;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::size_t k = tier + 1; k-- > 0;) {
    const std::int64_t lo = k == tier ? since_ms : std::max(since_ms, (*tiers)[k + 1].rolled_ms);
    const std::int64_t hi = k == 0 ? until_ms : std::min(until_ms, (*tiers)[k].rolled_ms);
    if (!parts.empty()) parts += " UNION ALL ";
    const int p = static_cast<int>(ranges.size()) * 2 + 3;  // ?1 gpu, ?2 step
    if (k == 0) {
      parts += fmt::format(
          "SELECT ts_ms, ({0} IS NOT NULL) AS n, {0} AS mn, {0} AS mx, {0} AS av FROM samples_raw"
          " WHERE gpu = ?1 AND ts_ms >= ?{1} AND ts_ms < ?{2}",
          c, p, p + 1);
    } else {
      parts += fmt::format(
          "SELECT ts_ms, {0}_n AS n, {0}_min AS mn, {0}_max AS mx, {0}_avg AS av FROM {1}"
          " WHERE gpu = ?1 AND ts_ms >= ?{2} AND ts_ms < ?{3}",
          c, kTables[k], p, p + 1);
    }
    ranges.emplace_back(lo, hi);
  }
  const std::string sql = fmt::format(
      "SELECT (ts_ms / ?2) * ?2 AS b, SUM(n), MIN(mn), MAX(mx), CAST(SUM(av * n) AS REAL) / NULLIF(SUM(n), 0)"
      " FROM ({}) GROUP BY b ORDER BY b",
      parts);
  auto st = db_.prepare(sql);
  if (!st) return st.error();
  st->bind(1, static_cast<std::int64_t>(gpu));
  st->bind(2, step_ms);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    st->bind(static_cast<int>(i) * 2 + 3, ranges[i].first);
    st->bind(static_cast<int>(i) * 2 + 4, ranges[i].second);
  }
  std::vector<HistoryPoint> out;
  auto rows = st->each([&](const Stmt& row) {
    HistoryPoint p;
    p.ts_ms = row.int64(0);
    p.samples = static_cast<std::size_t>(row.int64(1));
    p.min = row.opt_double(2);
    p.max = row.opt_double(3);
    p.avg = row.opt_double(4);
    out.push_back(p);
  });
  if (!rows) return rows.error();
  return out;
}

Result<void> HistoryStore::record_alerts(const std::vector<core::AlertEvent>& events) {
  if (events.empty()) return {};
  WriteTxn txn(db_);
  if (auto r = txn.begin(); !r) return r;
  auto fired = db_.prepare(
      "INSERT OR REPLACE INTO alerts(alert_id, started_ms, kind, gpu, uuid, severity, message, value, threshold,"
      " resolved_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)");
  if (!fired) return fired.error();
  auto resolved = db_.prepare(
      "UPDATE alerts SET resolved_ms = ?3, value = ?4, message = ?5 WHERE alert_id = ?1 AND started_ms = ?2");
  if (!resolved) return resolved.error();
  for (const auto& e : events) {
    const auto& a = e.alert;
    if (e.type == core::AlertEvent::Type::Fired) {
      fired->reset();
      fired->bind(1, std::string_view(a.id));
      fired->bind(2, to_ms(a.started_at));
      fired->bind(3, core::event_name(a.kind));
      fired->bind(4, static_cast<std::int64_t>(a.gpu_index));
      fired->bind(5, std::string_view(a.gpu_uuid));
      fired->bind(6, std::string_view(a.severity));
      fired->bind(7, std::string_view(a.message));
      fired->bind(8, a.value);
      fired->bind(9, a.threshold);
      if (auto r = fired->run(); !r) return r;
    } else {
      resolved->reset();
      resolved->bind(1, std::string_view(a.id));
      resolved->bind(2, to_ms(a.started_at));
      resolved->bind(3, to_ms(a.resolved_at.value_or(a.started_at)));
      resolved->bind(4, a.value);
      resolved->bind(5, std::string_view(a.message));
      if (auto r = resolved->run(); !r) return r;
    }
  }
  return txn.commit();
}

Result<std::vector<core::Alert>> HistoryStore::recent_alerts(const core::AlertQuery& q) {
  // The WHERE clause names only the filters given (from fixed text; the values are bound), so that
  // SQLite's planner sees "gpu = ?" and walks alerts_gpu_started for one GPU instead of every newer
  // episode of the node: "(?2 IS NULL OR gpu = ?2)" can use no index. ?2 gpu, ?3 since, ?4 until (ms).
  std::string sql =
      "SELECT alert_id, started_ms, kind, gpu, uuid, severity, message, value, threshold, resolved_ms FROM alerts"
      " WHERE 1";
  if (q.gpu) sql += " AND gpu = ?2";
  if (q.until) sql += " AND started_ms < ?4";
  if (q.since) sql += " AND (resolved_ms IS NULL OR resolved_ms >= ?3)";
  sql += " ORDER BY started_ms DESC LIMIT ?1";
  auto st = db_.prepare(sql);
  if (!st) return st.error();
  st->bind(1, static_cast<std::int64_t>(std::min<std::size_t>(q.limit, 1u << 30)));
  if (q.gpu) st->bind(2, static_cast<std::int64_t>(*q.gpu));
  if (q.since) st->bind(3, to_ms(*q.since));
  if (q.until) st->bind(4, to_ms(*q.until));
  std::vector<core::Alert> out;
  auto rows = st->each([&](const Stmt& row) {
    core::Alert a;
    a.id = row.text(0);
    a.started_at = TimePoint(milliseconds(row.int64(1)));
    const auto kind = core::alert_kind_from_name(row.text(2));
    if (!kind) return;  // written by a newer gpufleet that knows more rules
    a.kind = *kind;
    a.gpu_index = static_cast<unsigned>(row.int64(3));
    a.gpu_uuid = row.text(4);
    a.severity = row.text(5);
    a.message = row.text(6);
    a.value = row.opt_double(7).value_or(0);
    a.threshold = row.opt_double(8).value_or(0);
    if (row.opt_double(9)) a.resolved_at = TimePoint(milliseconds(row.int64(9)));
    out.push_back(std::move(a));
  });
  if (!rows) return rows.error();
  return out;
}

}  // namespace gf::store
