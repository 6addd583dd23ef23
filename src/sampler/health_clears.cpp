// Cleared XIDs and the evidence of resets (see health_clears.hpp).
#include "sampler/health_clears.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_set>

namespace gf::sampler {

std::string HealthClears::key_of(const core::GpuReading& g) const {
  if (!g.uuid.empty()) return g.uuid;
  const auto it = uuid_at_.find(g.index);
  return it != uuid_at_.end() ? it->second : "#" + std::to_string(g.index);
}

HealthClears::Cleared HealthClears::taken_out(const core::XidClear& c, const core::GpuReading& g) {
  Cleared out;
  auto after = g;
  core::apply_xid_clear(c, after);
  for (const auto& e : g.recent_xids) {
    const bool kept = std::any_of(after.recent_xids.begin(), after.recent_xids.end(),
                                  [&](const core::XidEvent& x) { return x.xid == e.xid && x.time == e.time; });
    if (!kept) out.events.push_back(e);
  }
  if (g.last_xid && *g.last_xid != 0 && after.last_xid && *after.last_xid != *g.last_xid) out.last_xid = *g.last_xid;
  return out;
}

Result<HealthClears::Cleared> HealthClears::clear(const core::GpuReading& shown,
                                                  std::chrono::system_clock::time_point at) {
  std::lock_guard lock(mu_);
  const auto key = key_of(shown);
  if (!gpus_.contains(key) && gpus_.size() >= kMaxTrackedGpus) {
    std::erase_if(gpus_, [](const auto& kv) { return !kv.second.present; });  // GPUs gone from this node
    if (gpus_.size() >= kMaxTrackedGpus)
      return make_error(ErrorKind::Unavailable,
                        fmt::format("this agent already follows {} GPUs' clears", kMaxTrackedGpus));
  }
  auto& p = gpus_[key];
  const auto before = p.clear;
  p.clear = core::xid_clear_of(shown, at, before ? &*before : nullptr);
  return taken_out(*p.clear, shown);
}

std::vector<std::string> HealthClears::apply(core::Snapshot& s) {
  std::vector<std::string> lines;
  std::lock_guard lock(mu_);
  std::unordered_set<std::string> present;
  for (const auto& g : s.gpus)
    if (!g.uuid.empty() && (uuid_at_.size() < kMaxTrackedGpus || uuid_at_.contains(g.index)))
      uuid_at_[g.index] = g.uuid;
  for (auto& g : s.gpus) {
    auto key = key_of(g);
    auto it = gpus_.find(key);
    if (it == gpus_.end()) {
      if (gpus_.size() >= kMaxTrackedGpus) continue;  // not followed: nothing was cleared on it either
      it = gpus_.emplace(key, PerGpu{}).first;
    }
    present.insert(std::move(key));
    auto& p = it->second;
    p.present = true;
    if (g.health == core::Health::Lost) {
      p.down = Down::Lost;
    } else if (g.health == core::Health::Ok && p.down != Down::No) {
      // Back after being lost or gone: a reset (or a driver reload). What was recorded until now goes.
      const auto before = p.clear;
      const Down was = p.down;
      p.down = Down::No;
      if (before) core::apply_xid_clear(*before, g);
      p.clear = core::xid_clear_of(g, s.timestamp, before ? &*before : nullptr);
      const auto out = taken_out(*p.clear, g);
      if (out.anything()) {
        std::vector<unsigned> xids;
        for (const auto& e : out.events) xids.push_back(e.xid);
        if (xids.empty() && out.last_xid) xids.push_back(*out.last_xid);
        lines.push_back(
            fmt::format("GPU {} ({}) answers again after {}: taken as a reset, its recorded XIDs ({}) "
                        "are cleared",
                        g.index, g.uuid.empty() ? "no UUID" : g.uuid,
                        was == Down::Lost ? "being lost" : "being gone from the driver's list", fmt::join(xids, ", ")));
      }
    }
    if (p.clear) core::apply_xid_clear(*p.clear, g);
  }
  for (auto& [key, p] : gpus_)
    if (p.present && !present.contains(key)) {
      p.present = false;
      p.down = Down::Gone;
    }
  return lines;
}

}  // namespace gf::sampler
