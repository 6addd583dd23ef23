// eligibility(): which GPUs may not be offered, and why, in words the user reads.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "allocator/select.hpp"
#include "core/gpu_health.hpp"
#include "core/policy.hpp"

namespace gf::allocator {
namespace {

// Enough processes to recognise whose GPU it is without drowning the line.
constexpr std::size_t kBusyProcessesShown = 3;

std::string describe_process(const core::GpuProcess& p) {
  if (!p.name.empty() && !p.user.empty()) return fmt::format("pid {} ({}, {})", p.pid, p.name, p.user);
  if (!p.name.empty() || !p.user.empty()) return fmt::format("pid {} ({})", p.pid, p.name.empty() ? p.user : p.name);
  return fmt::format("pid {}", p.pid);
}

std::string busy_reason(const core::GpuReading& g, const std::set<std::uint32_t>& own_pids) {
  std::vector<std::string> foreign;
  std::size_t hidden = 0;
  for (const auto& p : g.processes) {
    if (own_pids.contains(p.pid)) continue;
    if (foreign.size() < kBusyProcessesShown)
      foreign.push_back(describe_process(p));
    else
      ++hidden;
  }
  if (foreign.empty()) return {};
  std::string out = fmt::format("busy: {}", fmt::join(foreign, ", "));
  if (hidden > 0) out += fmt::format(" and {} more", hidden);
  return out;
}

// Why `g` may not be offered; empty when it may.
std::string refusal_reason(const core::GpuReading& g, const SelectRequest& r) {
  // A lost or failing GPU, or one we have leased, is refused for that alone: its other readings are
  // absent, or are the lease holder's own load, and would only distract.
  if (g.health == core::Health::Lost)
    return fmt::format("lost: {}", g.health_message.empty() ? "GPU is lost" : g.health_message);
  if (g.health == core::Health::Error)
    return fmt::format("error: {}", g.health_message.empty() ? "the GPU answers errors" : g.health_message);
  // Unhealthy (a critical XID, a failed row remap): refused whatever else it offers; the reason names the XID.
  if (auto verdict = core::judge_health(g); !verdict.healthy) return verdict.summary;
  if (r.leased.contains(g.index)) return "leased";
  // A GPU in MIG mode is handed out only by its instances (--mig PROFILE), never whole.
  if (g.mig_enabled.value_or(false)) return "in MIG mode (lease one of its instances with --mig PROFILE)";

  std::vector<std::string> reasons;
  if (!g.memory_free_mib) {
    if (r.need.min_free_memory_mib > 0) reasons.push_back("free memory unknown");
  } else if (*g.memory_free_mib < r.need.min_free_memory_mib) {
    reasons.push_back(fmt::format("{} MiB free < {} MiB floor", *g.memory_free_mib, r.need.min_free_memory_mib));
  }
  if (!g.utilization_pct) {
    if (r.need.max_utilization_pct < 100) reasons.push_back("utilization unknown");
  } else if (!core::available_utilization(*g.utilization_pct, r.need.max_utilization_pct)) {
    reasons.push_back(fmt::format("utilization {} % > {} %", *g.utilization_pct, r.need.max_utilization_pct));
  }
  if (!r.need.allow_busy)
    if (auto busy = busy_reason(g, r.own_pids); !busy.empty()) reasons.push_back(std::move(busy));
  return fmt::format("{}", fmt::join(reasons, "; "));
}

}  // namespace

std::vector<Refusal> eligibility(const core::Snapshot& s, const SelectRequest& r) {
  std::vector<Refusal> out;
  for (const auto& g : s.gpus)
    if (auto reason = refusal_reason(g, r); !reason.empty()) out.push_back({g.index, std::move(reason)});
  std::stable_sort(out.begin(), out.end(), [](const Refusal& a, const Refusal& b) { return a.index < b.index; });
  return out;
}

}  // namespace gf::allocator
