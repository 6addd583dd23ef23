#include "core/usage.hpp"

#include <algorithm>

namespace gf::core {

std::int64_t to_epoch_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

namespace {

const GpuReading* find_gpu(const Snapshot& s, const LeasedGpu& g) {
  for (const auto& r : s.gpus)
    if (r.index == g.index && (g.uuid.empty() || r.uuid.empty() || r.uuid == g.uuid)) return &r;
  return nullptr;
}

void set_held(LeaseUsage& row, std::int64_t until_ms) {
  const std::int64_t end = row.released_at_ms ? *row.released_at_ms : until_ms;
  row.held_gpu_s = end > row.created_at_ms ? static_cast<double>(end - row.created_at_ms) / 1000.0 * row.gpus : 0.0;
}

}  // namespace

void UsageAccumulator::add(const Snapshot& snapshot, const std::vector<Lease>& leases) {
  const std::int64_t now = to_epoch_ms(snapshot.timestamp);
  if (last_ms_ && now < *last_ms_) return;

  for (const auto& lease : leases) {
    auto [it, fresh] = rows_.try_emplace(lease.id);
    LeaseUsage& row = it->second;
    if (fresh) {
      row.lease_id = lease.id;
      row.job_id = lease.job_id;
      row.user = lease.owner.user;
      row.uid = lease.owner.uid;
      row.gpus = static_cast<unsigned>(lease.gpus.size());
      row.created_at_ms = lease.created_at_ms;
    }
    if (row.released_at_ms) continue;  // already final: an ended lease shown again adds nothing
    row.released_at_ms = lease.released_at_ms;
    set_held(row, now);

    const std::int64_t lease_end = lease.released_at_ms.value_or(now);
    for (const auto& lg : lease.gpus) {
      const GpuReading* cur = find_gpu(snapshot, lg);
      if (!cur) continue;
      if (now >= lease.created_at_ms && now <= lease_end && cur->memory_used_mib)
        row.peak_mem_mib = std::max(row.peak_mem_mib.value_or(0), *cur->memory_used_mib);

      const auto prev = previous_.find(lg.index);
      if (prev == previous_.end()) continue;
      const std::int64_t a = prev->second.at_ms;
      if (now <= a || now - a > options_.max_gap.count()) continue;  // nothing to integrate, or a gap
      const std::int64_t lo = std::max(a, lease.created_at_ms);
      const std::int64_t hi = std::min(now, lease_end);
      if (hi <= lo) continue;
      const double dt = static_cast<double>(hi - lo) / 1000.0;
      if (cur->utilization_pct) {
        const unsigned u = *cur->utilization_pct;
        row.covered_gpu_s += dt;
        row.util_gpu_s += u * dt;
        if (u >= options_.busy_threshold_pct) row.busy_gpu_s += dt;
      }
      if (cur->power_draw_w && prev->second.power_w) {
        // Linear between the two samples, integrated over the part inside the lease.
        const double pa = *prev->second.power_w, pb = *cur->power_draw_w;
        const auto at = [&](std::int64_t t) {
          return pa + (pb - pa) * static_cast<double>(t - a) / static_cast<double>(now - a);
        };
        row.energy_wh += (at(lo) + at(hi)) / 2.0 * dt / 3600.0;
      }
    }
  }

  std::map<unsigned, Sample> next;
  for (const auto& g : snapshot.gpus) {
    Sample s;
    s.at_ms = now;
    s.util_pct = g.utilization_pct.optional();
    s.power_w = g.power_draw_w.optional();
    next[g.index] = s;
  }
  previous_ = std::move(next);
  last_ms_ = now;
}

void UsageAccumulator::seed(LeaseUsage row) {
  const std::string id = row.lease_id;
  rows_.try_emplace(id, std::move(row));
}

void UsageAccumulator::settle(std::int64_t now_ms) {
  for (auto& [id, row] : rows_)
    if (!row.released_at_ms) set_held(row, now_ms);
}

std::vector<LeaseUsage> UsageAccumulator::take_final() {
  std::vector<LeaseUsage> out;
  for (auto it = rows_.begin(); it != rows_.end();) {
    if (it->second.released_at_ms) {
      out.push_back(std::move(it->second));
      it = rows_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void UsageTotals::add(const LeaseUsage& r) {
  ++leases;
  held_gpu_s += r.held_gpu_s;
  busy_gpu_s += r.busy_gpu_s;
  energy_wh += r.energy_wh;
  util_gpu_s += r.util_gpu_s;
  covered_gpu_s += r.covered_gpu_s;
  if (r.peak_mem_mib) peak_mem_mib = std::max(peak_mem_mib.value_or(0), *r.peak_mem_mib);
}

void UsageTotals::add(const UsageTotals& o) {
  leases += o.leases;
  held_gpu_s += o.held_gpu_s;
  busy_gpu_s += o.busy_gpu_s;
  energy_wh += o.energy_wh;
  util_gpu_s += o.util_gpu_s;
  covered_gpu_s += o.covered_gpu_s;
  if (o.peak_mem_mib) peak_mem_mib = std::max(peak_mem_mib.value_or(0), *o.peak_mem_mib);
}

std::vector<UsageTotals> group_usage(const std::vector<LeaseUsage>& rows, UsageGroup by) {
  std::map<std::string, UsageTotals> groups;
  for (const auto& r : rows) {
    const bool by_user = by == UsageGroup::User;
    // By job, keyed by (uid, job id): a job id another user also used is not merged into theirs.
    auto& t = groups[by_user ? r.user : (r.uid ? std::to_string(*r.uid) : std::string("-")) + '\n' + r.job_id];
    t.key = by_user ? r.user : r.job_id;
    if (!by_user) t.uid = r.uid;
    t.add(r);
  }
  std::vector<UsageTotals> out;
  out.reserve(groups.size());
  for (auto& [k, t] : groups) out.push_back(std::move(t));
  std::stable_sort(out.begin(), out.end(),
                   [](const UsageTotals& x, const UsageTotals& y) { return x.held_gpu_s > y.held_gpu_s; });
  return out;
}

}  // namespace gf::core
