#pragma once
// The placement policy's defaults and its one rule for "available" and "busy", used by every
// allocation path (CLI, REST API, scheduler), the summaries and the terminal renderer.
//
// A GPU is available for new work when its utilization is at most the ceiling (inclusive, the seeds'
// rule: 50 % is still available) and busy when it is above it; there is no third state.
//
// GpuNeed is what a job asks of the node's GPUs, the one request type of every layer: the allocator's
// SelectRequest, the node allocator's AllocationRequest, the arbiter's AcquireRequest (the socket's
// AcquireArgs) and the CLI's AllocCommand each hold one, plus what is theirs alone. Its one JSON codec
// is wire/gpu_need.hpp. A new criterion (a GPU model, say) is one member here and its lines there.
#include <cstdint>
#include <string>

namespace gf::core {

// Free memory a GPU needs for a job unless the caller asks otherwise (MiB).
inline constexpr std::uint64_t kDefaultMinFreeMemoryMib = 8000;
// Highest utilization at which a GPU still counts as available (percent, inclusive).
inline constexpr unsigned kDefaultMaxUtilizationPct = 50;

struct GpuNeed {
  unsigned gpus = 1;                                             // how many GPUs (1 with a MIG profile)
  std::uint64_t min_free_memory_mib = kDefaultMinFreeMemoryMib;  // free memory each must have
  unsigned max_utilization_pct = kDefaultMaxUtilizationPct;      // inclusive ceiling
  bool allow_busy = false;  // also GPUs running processes gpufleet did not start (else: refused)
  // Not empty: one free MIG instance of this profile ("1g.10gb") instead of whole GPUs.
  std::string mig_profile;
  bool operator==(const GpuNeed&) const = default;
};

constexpr bool available_utilization(unsigned utilization_pct,
                                     unsigned ceiling_pct = kDefaultMaxUtilizationPct) noexcept {
  return utilization_pct <= ceiling_pct;
}
constexpr bool busy_utilization(unsigned utilization_pct, unsigned ceiling_pct = kDefaultMaxUtilizationPct) noexcept {
  return !available_utilization(utilization_pct, ceiling_pct);
}

}  // namespace gf::core
