#pragma once
// The placement policy's defaults and its one rule for "available" and "busy", used by every
// allocation path (CLI, REST API, scheduler), the summaries and the terminal renderer.
//
// A GPU is available for new work when its utilization is at most the ceiling (inclusive, the seeds'
// rule: 50 % is still available) and busy when it is above it; there is no third state.
#include <cstdint>

namespace gf::core {

// Free memory a GPU needs for a job unless the caller asks otherwise (MiB).
inline constexpr std::uint64_t kDefaultMinFreeMemoryMib = 8000;
// Highest utilization at which a GPU still counts as available (percent, inclusive).
inline constexpr unsigned kDefaultMaxUtilizationPct = 50;

constexpr bool available_utilization(unsigned utilization_pct,
                                     unsigned ceiling_pct = kDefaultMaxUtilizationPct) noexcept {
  return utilization_pct <= ceiling_pct;
}
constexpr bool busy_utilization(unsigned utilization_pct, unsigned ceiling_pct = kDefaultMaxUtilizationPct) noexcept {
  return !available_utilization(utilization_pct, ceiling_pct);
}

}  // namespace gf::core
