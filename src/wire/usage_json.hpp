#pragma once
// The accounting documents: a lease's efficiency line, GET /api/v1/usage, and their reading back by
// the CLI. Pure; no I/O. Hours and kWh in documents (what people compare), exact seconds alongside.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "core/usage.hpp"

namespace gf::wire {

// "2.0 GPU-h held, 1.4 busy (70 %), mean util 63 %, 1.2 kWh": what `leases --all` prints after
// "efficiency: ". Small amounts keep more digits (0.004 GPU-h) and energy under 0.1 kWh is in Wh.
std::string efficiency_line(const core::LeaseUsage& u);

// One lease's usage: {held_gpu_s, busy_gpu_s, held_gpu_h, busy_gpu_h, busy_pct, mean_util_pct,
// energy_wh, energy_kwh, peak_mem_mib, final, line}. Absent values are null.
nlohmann::json lease_usage_json(const core::LeaseUsage& u);

// GET /api/v1/usage?since=…&by=user|job: {node, since, by, rows: [{key, leases, held_gpu_h,
// busy_gpu_h, busy_pct, mean_util_pct, energy_kwh, peak_mem_mib, held_gpu_s, busy_gpu_s, energy_wh}],
// total: {same without key}}. Rows come from core::group_usage (largest held first).
nlohmann::json usage_json(const std::string& node, std::int64_t since_ms, core::UsageGroup by,
                          const std::vector<core::LeaseUsage>& rows);

// A row of that document read back (the CLI's table).
struct UsageRow {
  std::string key;
  std::size_t leases = 0;
  double held_gpu_h = 0, busy_gpu_h = 0, energy_kwh = 0;
  std::optional<double> busy_pct, mean_util_pct;
  std::optional<std::uint64_t> peak_mem_mib;
};
struct UsageDoc {
  std::string node, by;
  std::vector<UsageRow> rows;
  UsageRow total;
};
// An Invalid error naming what is wrong when the text is not such a document.
Result<UsageDoc> parse_usage_json(const std::string& text);

}  // namespace gf::wire
