#pragma once
// Availability scoring: how free each GPU is for new work. Pure functions. Which GPUs qualify for a
// request is allocator::check_availability's to say (the one availability check).
#include <cstdint>
#include <vector>

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

// Fills memory_unattributed_mib from used memory and the processes' memory (when every process's
// memory is known, else only what is known is subtracted and the result is still a lower bound).
void attribute_memory(GpuReading& g);

}  // namespace gf::core
