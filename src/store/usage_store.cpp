#include "store/usage_store.hpp"

#include <fmt/format.h>

namespace gf::store {

namespace {

constexpr std::int64_t kSchemaVersion = 1;
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS lease_usage (
  lease_id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  user TEXT NOT NULL,
  uid INTEGER,
  gpus INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  released_at_ms INTEGER,
  held_gpu_s REAL NOT NULL,
  busy_gpu_s REAL NOT NULL,
  energy_wh REAL NOT NULL,
  util_gpu_s REAL NOT NULL,
  covered_gpu_s REAL NOT NULL,
  mean_util REAL,
  peak_mem_mib INTEGER
);
CREATE INDEX IF NOT EXISTS lease_usage_released ON lease_usage(released_at_ms);
CREATE TABLE IF NOT EXISTS reclaim_audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  lease_id TEXT NOT NULL,
  user TEXT NOT NULL,
  action TEXT NOT NULL,
  idle_since_ms INTEGER NOT NULL,
  message TEXT NOT NULL,
  evidence TEXT NOT NULL
);
)sql";

constexpr const char* kColumns =
    "lease_id, job_id, user, uid, gpus, created_at_ms, released_at_ms, held_gpu_s, busy_gpu_s, energy_wh, "
    "util_gpu_s, covered_gpu_s, peak_mem_mib";

// A JSON string: the evidence holds user names, which come from /proc and are not ours to trust.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string evidence_json(const std::vector<core::ReclaimEvidence>& ev) {
  std::string out = "[";
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (i) out += ",";
    out += fmt::format(R"({{"gpu":{},"utilization_pct":{},"max_utilization_pct":{},"process_users":[)", e.gpu,
                       e.utilization_pct ? std::to_string(*e.utilization_pct) : "null", e.max_utilization_pct);
    for (std::size_t k = 0; k < e.process_users.size(); ++k) out += (k ? "," : "") + json_string(e.process_users[k]);
    out += "]}";
  }
  return out + "]";
}

core::LeaseUsage row_of(const Stmt& st) {
  core::LeaseUsage r;
  r.lease_id = st.text(0);
  r.job_id = st.text(1);
  r.user = st.text(2);
  if (auto uid = st.opt_int64(3)) r.uid = static_cast<std::uint32_t>(*uid);
  r.gpus = static_cast<unsigned>(st.int64(4));
  r.created_at_ms = st.int64(5);
  r.released_at_ms = st.opt_int64(6);
  r.held_gpu_s = st.opt_double(7).value_or(0);
  r.busy_gpu_s = st.opt_double(8).value_or(0);
  r.energy_wh = st.opt_double(9).value_or(0);
  r.util_gpu_s = st.opt_double(10).value_or(0);
  r.covered_gpu_s = st.opt_double(11).value_or(0);
  if (auto m = st.opt_int64(12)) r.peak_mem_mib = static_cast<std::uint64_t>(*m);
  return r;
}

}  // namespace

Result<std::unique_ptr<UsageStore>> UsageStore::open(const std::string& path) {
  auto db = Db::open(path);
  if (!db) return db.error();
  std::unique_ptr<UsageStore> s(new UsageStore(std::move(*db)));
  if (auto m = s->db_.migrate("usage", kSchemaVersion, kSchema); !m)
    return make_error("cannot prepare the usage tables in " + path + ": " + m.error().message);
  return s;
}

Result<void> UsageStore::put(const std::vector<core::LeaseUsage>& rows) {
  if (rows.empty()) return {};
  WriteTxn txn(db_);
  if (auto b = txn.begin(); !b) return b;
  auto st =
      db_.prepare(fmt::format("INSERT OR REPLACE INTO lease_usage ({}, mean_util) VALUES "
                              "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                              kColumns));
  if (!st) return st.error();
  for (const auto& r : rows) {
    st->reset();
    st->bind(1, r.lease_id).bind(2, r.job_id).bind(3, r.user);
    if (r.uid)
      st->bind(4, static_cast<std::int64_t>(*r.uid));
    else
      st->bind_null(4);
    st->bind(5, static_cast<std::int64_t>(r.gpus)).bind(6, r.created_at_ms);
    if (r.released_at_ms)
      st->bind(7, *r.released_at_ms);
    else
      st->bind_null(7);
    st->bind(8, r.held_gpu_s).bind(9, r.busy_gpu_s).bind(10, r.energy_wh).bind(11, r.util_gpu_s);
    st->bind(12, r.covered_gpu_s);
    if (r.peak_mem_mib)
      st->bind(13, static_cast<std::int64_t>(*r.peak_mem_mib));
    else
      st->bind_null(13);
    if (auto m = r.mean_util_pct())
      st->bind(14, *m);
    else
      st->bind_null(14);
    if (auto run = st->run(); !run) return with_context("cannot write lease usage: ", run.error());
  }
  return txn.commit();
}

Result<std::vector<core::LeaseUsage>> UsageStore::load(const char* where_sql, std::int64_t arg) {
  auto st = db_.prepare(
      fmt::format("SELECT {} FROM lease_usage WHERE {} ORDER BY created_at_ms, lease_id", kColumns, where_sql));
  if (!st) return st.error();
  st->bind(1, arg);
  std::vector<core::LeaseUsage> out;
  auto rows = st->each([&](const Stmt& row) { out.push_back(row_of(row)); });
  if (!rows) return rows.error();
  return out;
}

Result<std::vector<core::LeaseUsage>> UsageStore::since(std::int64_t since_ms) {
  return load("released_at_ms IS NULL OR released_at_ms >= ?1", since_ms);
}

Result<std::vector<core::LeaseUsage>> UsageStore::unfinished() { return load("released_at_ms IS NULL AND ?1 = ?1", 0); }

Result<std::optional<core::LeaseUsage>> UsageStore::get(const std::string& lease_id) {
  auto st = db_.prepare(fmt::format("SELECT {} FROM lease_usage WHERE lease_id = ?1", kColumns));
  if (!st) return st.error();
  st->bind(1, lease_id);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<core::LeaseUsage>{};
  return std::optional<core::LeaseUsage>(row_of(*st));
}

Result<std::map<std::string, core::UsageTotals>> UsageStore::final_totals_by_user() {
  auto st = db_.prepare(
      "SELECT user, COUNT(*), SUM(held_gpu_s), SUM(busy_gpu_s), SUM(energy_wh), SUM(util_gpu_s), "
      "SUM(covered_gpu_s), MAX(peak_mem_mib) FROM lease_usage WHERE released_at_ms IS NOT NULL GROUP BY user");
  if (!st) return st.error();
  std::map<std::string, core::UsageTotals> out;
  auto rows = st->each([&](const Stmt& row) {
    core::UsageTotals t;
    t.key = row.text(0);
    t.leases = static_cast<std::size_t>(row.int64(1));
    t.held_gpu_s = row.opt_double(2).value_or(0);
    t.busy_gpu_s = row.opt_double(3).value_or(0);
    t.energy_wh = row.opt_double(4).value_or(0);
    t.util_gpu_s = row.opt_double(5).value_or(0);
    t.covered_gpu_s = row.opt_double(6).value_or(0);
    if (auto m = row.opt_int64(7)) t.peak_mem_mib = static_cast<std::uint64_t>(*m);
    out[t.key] = t;
  });
  if (!rows) return rows.error();
  return out;
}

Result<void> UsageStore::audit(const core::ReclaimDecision& d) {
  auto st = db_.prepare(
      "INSERT INTO reclaim_audit (at_ms, lease_id, user, action, idle_since_ms, message, evidence) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st) return st.error();
  st->bind(1, d.at_ms).bind(2, d.lease_id).bind(3, d.user).bind(4, core::to_string(d.action));
  st->bind(5, d.idle_since_ms).bind(6, d.message).bind(7, evidence_json(d.evidence));
  if (auto r = st->run(); !r) return with_context("cannot write the reclaim audit: ", r.error());
  return {};
}

}  // namespace gf::store
