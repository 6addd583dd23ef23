#include "core/gpu_health.hpp"

#include <algorithm>

#include "core/text.hpp"

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
  for (unsigned xid : xids) {
    const std::string code = "xid_" + std::to_string(xid);
    if (xid_needs_reset(xid)) {
      if (listed(v.problems, code)) continue;
      v.problems.push_back(xid_problem(g, xid));
    } else if (!listed(v.notes, code)) {
      v.notes.push_back(xid_note(g, xid));
    }
  }
  if (g.remapped_rows_failure && *g.remapped_rows_failure)
    v.problems.push_back({"row_remap_failure", gpu(g) +
                                                   " failed to remap a memory row: its memory can no longer repair "
                                                   "itself; the GPU needs service"});
  v.healthy = v.problems.empty();
  // The first problem is the worst: lost, then the newest critical XID, then the row remap.
  if (!v.healthy) v.summary = "unhealthy: " + problem_words(v.problems.front().code);
  return v;
}

std::string problem_words(std::string_view code) {
  if (code == "gpu_lost") return "GPU lost";
  if (code == "row_remap_failure") return "row remap failure";
  if (code.starts_with("xid_")) {
    const auto xid = parse_uint(code.substr(4), 0, 999999);
    return xid ? xid_words(static_cast<unsigned>(*xid)) : std::string();
  }
  return {};
}

namespace {

bool same_event(const XidEvent& a, const XidEvent& b) { return a.xid == b.xid && a.time == b.time; }

bool has_event(const std::vector<XidEvent>& list, const XidEvent& e) {
  return std::any_of(list.begin(), list.end(), [&](const XidEvent& x) { return same_event(x, e); });
}

}  // namespace

XidClear xid_clear_of(const GpuReading& g, std::chrono::system_clock::time_point at, const XidClear* before) {
  XidClear c;
  c.at = at;
  if (before) c.events = before->events;
  for (const auto& e : g.recent_xids)
    if (!has_event(c.events, e)) c.events.push_back(e);
  std::stable_sort(c.events.begin(), c.events.end(),
                   [](const XidEvent& a, const XidEvent& b) { return a.time < b.time; });
  if (c.events.size() > kMaxClearedXids)
    c.events.erase(c.events.begin(), c.events.end() - static_cast<std::ptrdiff_t>(kMaxClearedXids));
  // The last XID g shows now; when g shows none (an earlier clear hid it), the one that clear hid.
  c.last_xid = g.last_xid && *g.last_xid != 0 ? *g.last_xid : (before ? before->last_xid : 0);
  return c;
}

bool apply_xid_clear(const XidClear& c, GpuReading& g) {
  const bool listed = !g.recent_xids.empty();
  const auto before = g.recent_xids.size();
  std::erase_if(g.recent_xids, [&](const XidEvent& e) { return has_event(c.events, e); });
  const bool dropped = g.recent_xids.size() != before;
  if (!g.last_xid || *g.last_xid == 0) return dropped;
  if (!g.recent_xids.empty()) {
    if (*g.last_xid == g.recent_xids.back().xid) return dropped;
    g.last_xid = g.recent_xids.back().xid;
    return true;
  }
  // Nothing listed now: the last XID goes when the list it came with was cleared, or (a backend with no
  // list) when it is still the value the clear saw.
  if ((listed && dropped) || (!listed && *g.last_xid == c.last_xid)) {
    g.last_xid = 0u;
    return true;
  }
  return dropped;
}

}  // namespace gf::core
