#include "allocator/availability.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gf::allocator {

Availability check_availability(const core::Snapshot& s, const core::Topology& t, const SelectRequest& r) {
  Availability a;
  a.request = r;
  const auto refused = eligibility(s, r);
  for (const auto& g : s.gpus) {
    auto it = std::find_if(refused.begin(), refused.end(), [&](const Refusal& rf) { return rf.index == g.index; });
    GpuAvailability ga{&g, it == refused.end(), it == refused.end() ? std::string() : it->reason};
    a.qualifying += ga.qualifies;
    a.gpus.push_back(std::move(ga));
  }
  a.available = a.qualifying >= r.need.gpus;
  if (a.available)
    if (auto sel = select_gpus(s, t, r); sel) a.would_choose = std::move(*sel);
  return a;
}

std::string describe(const Availability& a) {
  std::string msg = fmt::format("{} of {} GPUs qualify, {} needed ({} MiB free, at most {} % busy): {}", a.qualifying,
                                a.gpus.size(), a.request.need.gpus, a.request.need.min_free_memory_mib,
                                a.request.need.max_utilization_pct, a.available ? "available" : "not available");
  for (const auto& g : a.gpus)
    if (g.qualifies)
      msg += fmt::format("\n  GPU {} qualifies: {} MiB free, {} % busy, score {:.2f}", g.gpu->index,
                         g.gpu->memory_free_mib.value_or(0), g.gpu->utilization_pct.value_or(0),
                         g.gpu->availability_score.value_or(0.0));
  for (const auto& g : a.gpus)
    if (!g.qualifies) msg += fmt::format("\n  GPU {} does not: {}", g.gpu->index, g.reason);
  return msg;
}

}  // namespace gf::allocator
