#include "core/gpu_health.hpp"

#include <algorithm>

namespace gf::core {
namespace {

std::string xid_words(unsigned xid) {
  const auto what = xid_description(xid);
  std::string out = "XID " + std::to_string(xid);
  if (!what.empty()) out += " (" + std::string(what) + ")";
  return out;
}

std::string gpu(const GpuReading& g) { return "GPU " + std::to_string(g.index); }

HealthProblem xid_problem(const GpuReading& g, unsigned xid) {
  return {"xid_" + std::to_string(xid),
          gpu(g) + " had " + xid_words(xid) + ": it needs a reset or an operator's attention"};
}

HealthProblem xid_note(const GpuReading& g, unsigned xid) {
  return {"xid_" + std::to_string(xid),
          gpu(g) + " had " + xid_words(xid) + " (an application fault; the GPU stays usable)"};
}

bool listed(const std::vector<HealthProblem>& list, const std::string& code) {
  return std::any_of(list.begin(), list.end(), [&](const HealthProblem& p) { return p.code == code; });
}

}  // namespace

bool xid_needs_reset(unsigned xid) noexcept {
  return std::find(kCriticalXids.begin(), kCriticalXids.end(), xid) != kCriticalXids.end();
}

std::string_view xid_description(unsigned xid) noexcept {
  // Names from NVIDIA's XID catalog, for the XIDs an operator of compute GPUs meets most.
  switch (xid) {
    case 13: return "graphics engine exception";
    case 31: return "GPU memory page fault";
    case 43: return "GPU stopped processing";
    case 45: return "preemptive cleanup";
    case 48: return "double-bit ECC error";
    case 61: return "internal micro-controller breakpoint";
    case 62: return "internal micro-controller halt";
    case 63: return "row remapping or page retirement recorded";
    case 64: return "row remapping or page retirement recording failure";
    case 68: return "video processor exception";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    default: return {};
  }
}

HealthVerdict judge_health(const GpuReading& g) {
  HealthVerdict v;
  if (g.health == Health::Lost)
    v.problems.push_back(
        {"gpu_lost", gpu(g) + " is lost: " + (g.health_message.empty() ? "GPU is lost" : g.health_message)});
  // Newest first, each XID once: the latest occurrence is the one people ask about. A backend that
  // reports only the last XID (no list) is judged on that.
  std::vector<unsigned> xids;
  for (auto it = g.recent_xids.rbegin(); it != g.recent_xids.rend(); ++it) xids.push_back(it->xid);
  if (xids.empty() && g.last_xid && *g.last_xid != 0) xids.push_back(*g.last_xid);
  unsigned first_critical = 0;
  for (unsigned xid : xids) {
    const std::string code = "xid_" + std::to_string(xid);
    if (xid_needs_reset(xid)) {
      if (listed(v.problems, code)) continue;
      v.problems.push_back(xid_problem(g, xid));
      if (first_critical == 0) first_critical = xid;
    } else if (!listed(v.notes, code)) {
      v.notes.push_back(xid_note(g, xid));
    }
  }
  if (g.remapped_rows_failure && *g.remapped_rows_failure)
    v.problems.push_back({"row_remap_failure", gpu(g) +
                                                   " failed to remap a memory row: its memory can no longer repair "
                                                   "itself; the GPU needs service"});
  v.healthy = v.problems.empty();
  if (!v.healthy) {
    if (g.health == Health::Lost)
      v.summary = "unhealthy: GPU lost";
    else if (first_critical != 0)
      v.summary = "unhealthy: " + xid_words(first_critical);
    else
      v.summary = "unhealthy: row remap failure";
  }
  return v;
}

}  // namespace gf::core
