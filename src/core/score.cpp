#include "core/score.hpp"

#include <algorithm>

namespace gf::core {

Reading<double> availability_score(const GpuReading& g, const ScoreWeights& w) {
  if (g.health == Health::Lost) return Reading<double>::absent(Absent::GpuLost);
  if (g.health != Health::Ok) return Reading<double>::absent(Absent::Unavailable);
  if (!g.memory_total_mib || !g.memory_free_mib || *g.memory_total_mib == 0 || !g.utilization_pct)
    return Reading<double>::absent(Absent::Unavailable);
  const double free_frac =
      std::clamp(static_cast<double>(*g.memory_free_mib) / static_cast<double>(*g.memory_total_mib), 0.0, 1.0);
  const double idle_frac = (100.0 - std::min(*g.utilization_pct, 100u)) / 100.0;
  return w.memory * free_frac + w.utilization * idle_frac;
}

void score_gpus(Snapshot& s, const ScoreWeights& w) {
  for (auto& g : s.gpus) g.availability_score = availability_score(g, w);
}

void attribute_memory(GpuReading& g) {
  if (!g.memory_used_mib) {
    g.memory_unattributed_mib = Reading<std::uint64_t>::absent(Absent::Unavailable);
    return;
  }
  std::uint64_t known = 0;
  for (const auto& p : g.processes) known += p.used_memory_mib.value_or(0);
  const std::uint64_t used = *g.memory_used_mib;
  g.memory_unattributed_mib = used > known ? used - known : 0;
}

}  // namespace gf::core
