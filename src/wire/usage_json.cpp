#include "wire/usage_json.hpp"

#include <fmt/format.h>

#include <cmath>

namespace gf::wire {

using nlohmann::json;

namespace {

// One decimal from 0.1 up; smaller amounts keep two significant digits (a short lease is not "0.0").
std::string amount(double v) { return v >= 0.1 || v <= 0 ? fmt::format("{:.1f}", v) : fmt::format("{:.2g}", v); }

// Rounded for documents: 4 decimals is well below a sampling interval for GPU-hours.
double round4(double v) { return std::round(v * 1e4) / 1e4; }

json totals_json(const core::UsageTotals& t) {
  json j;
  j["leases"] = t.leases;
  j["held_gpu_s"] = round4(t.held_gpu_s);
  j["busy_gpu_s"] = round4(t.busy_gpu_s);
  j["energy_wh"] = round4(t.energy_wh);
  j["held_gpu_h"] = round4(t.held_gpu_s / 3600.0);
  j["busy_gpu_h"] = round4(t.busy_gpu_s / 3600.0);
  j["energy_kwh"] = round4(t.energy_wh / 1000.0);
  j["busy_pct"] = t.held_gpu_s > 0 ? json(round4(100.0 * t.busy_gpu_s / t.held_gpu_s)) : json(nullptr);
  j["mean_util_pct"] = t.covered_gpu_s > 0 ? json(round4(t.util_gpu_s / t.covered_gpu_s)) : json(nullptr);
  j["peak_mem_mib"] = t.peak_mem_mib ? json(*t.peak_mem_mib) : json(nullptr);
  return j;
}

std::optional<double> opt_number(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Result<UsageRow> row_from(const json& j) {
  if (!j.is_object()) return make_error(ErrorKind::Invalid, "a usage row is not an object");
  UsageRow r;
  if (auto k = j.find("key"); k != j.end() && k->is_string()) r.key = k->get<std::string>();
  const auto held = opt_number(j, "held_gpu_h");
  const auto busy = opt_number(j, "busy_gpu_h");
  if (!held || !busy) return make_error(ErrorKind::Invalid, "a usage row lacks held_gpu_h or busy_gpu_h");
  r.held_gpu_h = *held;
  r.busy_gpu_h = *busy;
  r.energy_kwh = opt_number(j, "energy_kwh").value_or(0);
  r.busy_pct = opt_number(j, "busy_pct");
  r.mean_util_pct = opt_number(j, "mean_util_pct");
  if (auto n = opt_number(j, "leases"); n && *n >= 0) r.leases = static_cast<std::size_t>(*n);
  if (auto m = opt_number(j, "peak_mem_mib"); m && *m >= 0) r.peak_mem_mib = static_cast<std::uint64_t>(*m);
  return r;
}

}  // namespace

std::string efficiency_line(const core::LeaseUsage& u) {
  const double held_h = u.held_gpu_s / 3600.0, busy_h = u.busy_gpu_s / 3600.0;
  std::string out = amount(held_h) + " GPU-h held, " + amount(busy_h) + " busy";
  if (auto f = u.busy_fraction()) out += fmt::format(" ({:.0f} %)", *f * 100.0);
  if (auto m = u.mean_util_pct())
    out += fmt::format(", mean util {:.0f} %", *m);
  else
    out += ", mean util n/a";
  if (u.energy_wh >= 100.0)
    out += ", " + amount(u.energy_wh / 1000.0) + " kWh";
  else
    out += fmt::format(", {:.1f} Wh", u.energy_wh);
  return out;
}

json lease_usage_json(const core::LeaseUsage& u) {
  json j;
  j["held_gpu_s"] = round4(u.held_gpu_s);
  j["busy_gpu_s"] = round4(u.busy_gpu_s);
  j["held_gpu_h"] = round4(u.held_gpu_s / 3600.0);
  j["busy_gpu_h"] = round4(u.busy_gpu_s / 3600.0);
  const auto f = u.busy_fraction();
  j["busy_pct"] = f ? json(round4(*f * 100.0)) : json(nullptr);
  const auto m = u.mean_util_pct();
  j["mean_util_pct"] = m ? json(round4(*m)) : json(nullptr);
  j["energy_wh"] = round4(u.energy_wh);
  j["energy_kwh"] = round4(u.energy_wh / 1000.0);
  j["peak_mem_mib"] = u.peak_mem_mib ? json(*u.peak_mem_mib) : json(nullptr);
  j["final"] = u.released_at_ms.has_value();
  j["line"] = efficiency_line(u);
  return j;
}

json usage_json(const std::string& node, std::int64_t since_ms, core::UsageGroup by,
                const std::vector<core::LeaseUsage>& rows) {
  json out;
  out["node"] = node;
  out["since"] = static_cast<double>(since_ms) / 1000.0;
  out["by"] = by == core::UsageGroup::User ? "user" : "job";
  json list = json::array();
  core::UsageTotals total;
  for (const auto& t : core::group_usage(rows, by)) {
    auto j = totals_json(t);
    j["key"] = t.key;
    if (t.uid) j["uid"] = *t.uid;
    list.push_back(std::move(j));
    total.add(t);
  }
  out["rows"] = std::move(list);
  out["total"] = totals_json(total);
  return out;
}

Result<UsageDoc> parse_usage_json(const std::string& text) {
  const auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(ErrorKind::Invalid, "the usage document is not JSON");
  const auto rows = j.find("rows");
  if (rows == j.end() || !rows->is_array()) return make_error(ErrorKind::Invalid, "the usage document has no rows");
  UsageDoc d;
  if (auto n = j.find("node"); n != j.end() && n->is_string()) d.node = n->get<std::string>();
  if (auto b = j.find("by"); b != j.end() && b->is_string()) d.by = b->get<std::string>();
  for (const auto& r : *rows) {
    auto row = row_from(r);
    if (!row) return row.error();
    d.rows.push_back(std::move(*row));
  }
  if (auto t = j.find("total"); t != j.end()) {
    auto row = row_from(*t);
    if (!row) return row.error();
    d.total = std::move(*row);
  }
  return d;
}

}  // namespace gf::wire
