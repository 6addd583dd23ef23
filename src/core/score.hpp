#pragma once
// Availability scoring and filtering: which GPUs are free enough for new work. Pure functions.
#include <cstdint>
#include <vector>

#include "core/policy.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

struct ScoreWeights {
  double memory = 0.6;       // weight of free/total memory
  double utilization = 0.4;  // weight of (100 - util)/100
};

// score = w.memory * free/total + w.utilization * (100 - util)/100, in [0, 1] for weights summing to 1.
// Absent for a GPU that is not healthy or lacks memory or utilization readings.
Reading<double> availability_score(const GpuReading& g, const ScoreWeights& w = {});

// Fills availability_score of every GPU.
void score_gpus(Snapshot& s, const ScoreWeights& w = {});

struct AvailabilityFilter {
  std::uint64_t min_free_memory_mib = 0;
  unsigned max_utilization_pct = kDefaultMaxUtilizationPct;  // inclusive ceiling
};

// Indices of GPUs that are healthy, have at least the free memory and at most the utilization asked,
// best score first (ties: lower index first). Expects scores filled (score_gpus).
std::vector<unsigned> available_gpus(const Snapshot& s, const AvailabilityFilter& f);

// Fills memory_unattributed_mib from used memory and the processes' memory (when every process's
// memory is known, else only what is known is subtracted and the result is still a lower bound).
void attribute_memory(GpuReading& g);

}  // namespace gf::core
