#include "store/history.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>

namespace gf::store {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr std::int64_t kSchemaVersion = 1;
constexpr std::int64_t kMinuteMs = 60'000;
constexpr std::int64_t kHourMs = 3'600'000;

// The stored columns of samples_raw, in order; each is rolled up as <col>_n/_min/_max/_avg.
// power is REAL (W); the rest are integers in the unit of the GpuReading field.
constexpr std::array<const char*, 9> kColumns = {"util", "mem_util", "mem_used", "mem_total", "temp",
                                                 "power", "fan", "sm_clock", "mem_clock"};

struct MetricInfo {
  Metric metric;
  std::string_view name;
  const char* column;
};
constexpr std::array<MetricInfo, 8> kMetrics = {{
    {Metric::Utilization, "utilization", "util"},
    {Metric::MemoryUtilization, "memory_utilization", "mem_util"},
    {Metric::MemoryUsed, "memory_used", "mem_used"},
    {Metric::Temperature, "temperature", "temp"},
    {Metric::Power, "power", "power"},
    {Metric::Fan, "fan", "fan"},
    {Metric::SmClock, "sm_clock", "sm_clock"},
    {Metric::MemClock, "mem_clock", "mem_clock"},
}};

const char* column_of(Metric m) {
  for (const auto& i : kMetrics)
    if (i.metric == m) return i.column;
  return "util";  // unreachable: every Metric is in the table
}

// Tiers by index: 0 raw, 1 one minute, 2 one hour.
constexpr std::array<const char*, 3> kTables = {"samples_raw", "samples_1m", "samples_1h"};
constexpr std::array<const char*, 3> kTierNames = {"raw", "1m", "1h"};
constexpr std::array<std::int64_t, 3> kResolutionMs = {1, kMinuteMs, kHourMs};

std::string rollup_table_sql(const char* table) {
  std::string cols;
  for (const char* c : kColumns) cols += fmt::format(" {0}_n INTEGER NOT NULL, {0}_min, {0}_max, {0}_avg REAL,", c);
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
       "CREATE INDEX IF NOT EXISTS alerts_started ON alerts(started_ms);\n";
  return s;
}

// The same folding in both rollups, NULL-aware: COUNT/MIN/MAX/AVG skip NULLs, an all-NULL bucket
// gets count 0 and NULL min/max/avg.
std::string minute_rollup_sql() {
  std::string cols;
  for (const char* c : kColumns) cols += fmt::format(", COUNT({0}), MIN({0}), MAX({0}), AVG({0})", c);
  return fmt::format(
      "INSERT OR REPLACE INTO samples_1m SELECT (ts_ms / {0}) * {0} AS b, gpu, MAX(uuid), COUNT(*){1}"
      " FROM samples_raw WHERE ts_ms >= ?1 AND ts_ms < ?2 GROUP BY b, gpu",
      kMinuteMs, cols);
}

std::string hour_rollup_sql() {
  std::string cols;
  for (const char* c : kColumns)
    cols += fmt::format(", SUM({0}_n), MIN({0}_min), MAX({0}_max), CAST(SUM({0}_avg * {0}_n) AS REAL) / NULLIF(SUM({0}_n), 0)", c);
  return fmt::format(
      "INSERT OR REPLACE INTO samples_1h SELECT (ts_ms / {0}) * {0} AS b, gpu, MAX(uuid), SUM(n){1}"
      " FROM samples_1m WHERE ts_ms >= ?1 AND ts_ms < ?2 GROUP BY b, gpu",
      kHourMs, cols);
}

std::int64_t to_ms(HistoryStore::TimePoint t) { return duration_cast<milliseconds>(t.time_since_epoch()).count(); }
std::int64_t floor_to(std::int64_t v, std::int64_t unit) { return v >= 0 ? v / unit * unit : -((-v + unit - 1) / unit) * unit; }

// Binds a reading, or NULL when it is absent (never a made-up 0).
template <class T>
void bind_reading(Stmt& st, int i, const core::Reading<T>& r) {
  if (!r) st.bind_null(i);
  else if constexpr (std::is_floating_point_v<T>) st.bind(i, static_cast<double>(*r));
  else st.bind(i, static_cast<std::int64_t>(*r));
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

Result<Metric> parse_metric(std::string_view name) {
  for (const auto& i : kMetrics)
    if (i.name == name) return i.metric;
  return make_error(fmt::format("unknown metric '{}' (expected one of utilization, memory_utilization, "
                                "memory_used, temperature, power, fan, sm_clock, mem_clock)",
                                name));
}

core::Field to_field(Metric m) noexcept {
  switch (m) {
    case Metric::Utilization: return core::Field::Utilization;
    case Metric::MemoryUtilization: return core::Field::MemoryUtilization;
    case Metric::MemoryUsed: return core::Field::MemoryUsed;
    case Metric::Temperature: return core::Field::Temperature;
    case Metric::Power: return core::Field::PowerDraw;
    case Metric::Fan: return core::Field::Fan;
    case Metric::SmClock: return core::Field::SmClock;
    case Metric::MemClock: return core::Field::MemClock;
  }
  return core::Field::Utilization;  // unreachable: every Metric is listed
}

std::optional<Metric> metric_of(core::Field f) noexcept {
  for (const auto& i : kMetrics)
    if (to_field(i.metric) == f) return i.metric;
  return std::nullopt;
}

std::string_view to_string(Metric m) noexcept {
  for (const auto& i : kMetrics)
    if (i.metric == m) return i.name;
  return "unknown";
}

Result<std::unique_ptr<HistoryStore>> HistoryStore::open(const std::string& path, HistoryOptions options) {
  auto db = Db::open(path);
  if (!db) return db.error();
  std::unique_ptr<HistoryStore> s(new HistoryStore(std::move(*db), options));
  if (auto m = s->db_.migrate("history", kSchemaVersion, schema_sql().c_str()); !m) return make_error("cannot prepare the history store " + path + ": " + m.error().message);
  return s;
}

Result<void> HistoryStore::insert_rows(const core::Snapshot& s) {
  auto st = db_.prepare(
                         "INSERT INTO samples_raw(ts_ms, gpu, uuid, util, mem_util, mem_used, mem_total, temp, power,"
                         " fan, sm_clock, mem_clock) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  if (!st) return st.error();
  const std::int64_t ts = to_ms(s.timestamp);
  for (const auto& g : s.gpus) {
    st->reset();
    st->bind(1, ts);
    st->bind(2, static_cast<std::int64_t>(g.index));
    st->bind(3, std::string_view(g.uuid));
    bind_reading(*st, 4, g.utilization_pct);
    bind_reading(*st, 5, g.memory_utilization_pct);
    bind_reading(*st, 6, g.memory_used_mib);
    bind_reading(*st, 7, g.memory_total_mib);
    bind_reading(*st, 8, g.temperature_c);
    bind_reading(*st, 9, g.power_draw_w);
    bind_reading(*st, 10, g.fan_pct);
    bind_reading(*st, 11, g.clock_graphics_mhz);
    bind_reading(*st, 12, g.clock_memory_mhz);
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

Result<std::vector<HistoryPoint>> HistoryStore::query(unsigned gpu, core::Field field, TimePoint since,
                                                     TimePoint until, std::chrono::seconds step) {
  const auto metric = metric_of(field);
  if (!metric) {
    std::string kept;
    for (const auto& i : kMetrics) kept += std::string(kept.empty() ? "" : ", ") + std::string(i.name);
    return make_error("the history does not keep this field (it keeps " + kept + ")");
  }
  return query(gpu, *metric, since, until, step);
}

Result<std::vector<HistoryPoint>> HistoryStore::query(unsigned gpu, Metric metric, TimePoint since, TimePoint until,
                                                      std::chrono::seconds step) {
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
  const char* c = column_of(metric);
  std::string parts;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::size_t k = tier + 1; k-- > 0;) {
    const std::int64_t lo = k == tier ? since_ms : std::max(since_ms, (*tiers)[k + 1].rolled_ms);
    const std::int64_t hi = k == 0 ? until_ms : std::min(until_ms, (*tiers)[k].rolled_ms);
    if (!parts.empty()) parts += " UNION ALL ";
    const int p = static_cast<int>(ranges.size()) * 2 + 3;  // ?1 gpu, ?2 step
    if (k == 0) {
      parts += fmt::format("SELECT ts_ms, ({0} IS NOT NULL) AS n, {0} AS mn, {0} AS mx, {0} AS av FROM samples_raw"
                           " WHERE gpu = ?1 AND ts_ms >= ?{1} AND ts_ms < ?{2}",
                           c, p, p + 1);
    } else {
      parts += fmt::format("SELECT ts_ms, {0}_n AS n, {0}_min AS mn, {0}_max AS mx, {0}_avg AS av FROM {1}"
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
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    HistoryPoint p;
    p.ts_ms = st->int64(0);
    p.samples = static_cast<std::size_t>(st->int64(1));
    p.min = st->opt_double(2);
    p.max = st->opt_double(3);
    p.avg = st->opt_double(4);
    out.push_back(p);
  }
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

Result<std::vector<core::Alert>> HistoryStore::recent_alerts(std::size_t limit) {
  auto st = db_.prepare(
      "SELECT alert_id, started_ms, kind, gpu, uuid, severity, message, value, threshold, resolved_ms FROM alerts"
      " ORDER BY started_ms DESC LIMIT ?1");
  if (!st) return st.error();
  st->bind(1, static_cast<std::int64_t>(limit));
  std::vector<core::Alert> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    core::Alert a;
    a.id = st->text(0);
    a.started_at = TimePoint(milliseconds(st->int64(1)));
    const auto kind = core::alert_kind_from_name(st->text(2));
    if (!kind) continue;  // written by a newer gpufleet that knows more rules
    a.kind = *kind;
    a.gpu_index = static_cast<unsigned>(st->int64(3));
    a.gpu_uuid = st->text(4);
    a.severity = st->text(5);
    a.message = st->text(6);
    a.value = st->opt_double(7).value_or(0);
    a.threshold = st->opt_double(8).value_or(0);
    if (st->opt_double(9)) a.resolved_at = TimePoint(milliseconds(st->int64(9)));
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace gf::store
