#include "core/reclaim.hpp"

#include <algorithm>
#include <set>

#include "core/usage.hpp"

namespace gf::core {

std::string_view to_string(ReclaimAction a) noexcept { return a == ReclaimAction::Warn ? "warn" : "release"; }

namespace {

std::string minutes_text(std::chrono::milliseconds d) {
  const auto m = std::chrono::duration_cast<std::chrono::minutes>(d).count();
  if (m >= 1) return std::to_string(m) + " min";
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

// The lease's GPUs as evidence, or nullopt when it is not idle in this reading.
std::optional<std::vector<ReclaimEvidence>> idle_evidence(const Snapshot& s, const Lease& lease, unsigned threshold) {
  if (!s.process_visibility.complete) return std::nullopt;
  std::vector<ReclaimEvidence> out;
  for (const auto& lg : lease.gpus) {
    const auto g = std::find_if(s.gpus.begin(), s.gpus.end(), [&](const GpuReading& r) {
      return r.index == lg.index && (lg.uuid.empty() || r.uuid.empty() || r.uuid == lg.uuid);
    });
    if (g == s.gpus.end() || !g->utilization_pct || *g->utilization_pct >= threshold) return std::nullopt;
    ReclaimEvidence e;
    e.gpu = lg.index;
    e.utilization_pct = *g->utilization_pct;
    e.max_utilization_pct = *g->utilization_pct;
    for (const auto& p : g->processes) {
      // Compared by user name: the reading's processes carry no uid. Unknown user: maybe the owner.
      if (p.user.empty() || p.user == lease.owner.user) return std::nullopt;
      e.process_users.push_back(p.user);
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace

std::vector<ReclaimDecision> ReclaimPolicy::evaluate(const Snapshot& snapshot, const std::vector<Lease>& active) {
  std::vector<ReclaimDecision> out;
  if (!options_.enabled) return out;
  const std::int64_t now = to_epoch_ms(snapshot.timestamp);
  std::set<std::string> seen;
  for (const auto& lease : active) {
    if (lease.released_at_ms) continue;
    seen.insert(lease.id);
    auto evidence = idle_evidence(snapshot, lease, options_.utilization_threshold_pct);
    if (!evidence) {
      state_.erase(lease.id);  // busy again (or we cannot tell): the count starts over
      continue;
    }
    // An idle period starts no earlier than the lease itself.
    auto [it, fresh] = state_.try_emplace(lease.id);
    State& st = it->second;
    if (fresh) st.idle_since_ms = std::max(now, lease.created_at_ms);
    for (auto& e : *evidence) {
      auto& m = st.max_util[e.gpu];
      m = std::max(m, e.utilization_pct.value_or(0));
      e.max_utilization_pct = m;
    }
    const std::int64_t idle_ms = now - st.idle_since_ms;
    const auto decide = [&](ReclaimAction a, std::string message) {
      ReclaimDecision d;
      d.action = a;
      d.lease_id = lease.id;
      d.user = lease.owner.user;
      d.at_ms = now;
      d.idle_since_ms = st.idle_since_ms;
      d.message = std::move(message);
      d.evidence = *evidence;
      out.push_back(std::move(d));
    };
    // The release comes a whole grace period after the warning, even when readings were missed.
    if (st.warned_at_ms && !st.released && now - *st.warned_at_ms >= options_.grace.count()) {
      st.released = true;
      decide(ReclaimAction::Release, "lease " + lease.id + " released: its GPUs were idle for " +
                                         minutes_text(std::chrono::milliseconds(idle_ms)));
    } else if (!st.warned_at_ms && idle_ms >= options_.idle_for.count()) {
      st.warned_at_ms = now;
      decide(ReclaimAction::Warn, "lease " + lease.id + " has been idle for " +
                                      minutes_text(std::chrono::milliseconds(idle_ms)) + "; it will be released in " +
                                      minutes_text(options_.grace) + " unless its GPUs are used");
    }
  }
  for (auto it = state_.begin(); it != state_.end();) it = seen.count(it->first) ? std::next(it) : state_.erase(it);
  return out;
}

}  // namespace gf::core
