#include "backends/intel/engine_usage.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace gf::backends::intel {
namespace {

using core::Absent;
using core::Reading;

// A counter that went backwards (the spec allows it briefly) is held at its earlier, larger value.
drm::CounterMap held(const drm::CounterMap& now, const drm::CounterMap* before) {
  drm::CounterMap out = now;
  if (before == nullptr) return out;
  for (auto& [name, v] : out)
    if (const auto it = before->find(name); it != before->end()) v = std::max(v, it->second);
  return out;
}

std::uint64_t capacity_of(const drm::CounterMap& capacity, std::string_view cls) {
  const auto it = capacity.find(cls);
  return it == capacity.end() ? 1 : it->second;  // the parser refuses 0
}

std::optional<std::uint64_t> lookup(const drm::CounterMap& m, std::string_view key) {
  const auto it = m.find(key);
  return it == m.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
}

Reading<unsigned> to_pct(double share) {
  return static_cast<unsigned>(std::lround(std::clamp(share, 0.0, 1.0) * 100.0));
}

double busiest(const std::map<std::string, double, std::less<>>& by_class) {
  double top = 0;
  for (const auto& [cls, share] : by_class) top = std::max(top, share);
  return top;
}

}  // namespace

void EngineUsage::update(const drm::DrmClientTally& tally, std::chrono::steady_clock::time_point now, bool complete) {
  const bool have_interval = previous_time_.has_value() && now > *previous_time_;
  const double wall_ns = have_interval ? std::chrono::duration<double, std::nano>(now - *previous_time_).count() : 0.0;
  decltype(previous_) next;
  gpu_.clear();
  process_.clear();

  for (const std::string& pdev : tally.pdevs()) {
    std::map<std::string, double, std::less<>> gpu_classes;
    std::set<std::uint64_t> gpu_counted;  // a client held by two processes (after fork) counts once
    bool gpu_has_engines = false;
    for (const drm::ProcessClients& pc : tally.processes_on(pdev)) {
      std::map<std::string, double, std::less<>> classes;
      bool has_engines = false;
      bool measured = false;
      for (const drm::DrmFdinfo* c : pc.clients) {
        ClientKey key{pdev, pc.pid, *c->client_id};
        const auto before = previous_.find(key);
        const Counters* prev = before == previous_.end() ? nullptr : &before->second;
        Counters cur{held(c->engine_busy_ns, prev ? &prev->busy_ns : nullptr),
                     held(c->engine_cycles, prev ? &prev->cycles : nullptr),
                     held(c->engine_total_cycles, prev ? &prev->total_cycles : nullptr)};
        has_engines = has_engines || !cur.busy_ns.empty() || !cur.cycles.empty();
        if (prev != nullptr && have_interval) {
          measured = true;
          std::map<std::string, double, std::less<>> shares;
          // xe: busy cycles against the GPU's own timestamp, so the CPU's scheduling of this scan
          // does not enter the figure.
          for (const auto& [cls, cycles] : cur.cycles) {
            const auto total = lookup(cur.total_cycles, cls);
            const auto cycles0 = lookup(prev->cycles, cls);
            const auto total0 = lookup(prev->total_cycles, cls);
            if (!total || !cycles0 || !total0 || *total <= *total0) continue;
            const double span = static_cast<double>(*total - *total0);
            shares[cls] = static_cast<double>(cycles - *cycles0) /
                          (span * static_cast<double>(capacity_of(c->engine_capacity, cls)));
          }
          // i915: busy nanoseconds against wall time.
          for (const auto& [cls, ns] : cur.busy_ns) {
            const auto ns0 = lookup(prev->busy_ns, cls);
            if (!ns0 || shares.contains(cls)) continue;
            shares[cls] =
                static_cast<double>(ns - *ns0) / (wall_ns * static_cast<double>(capacity_of(c->engine_capacity, cls)));
          }
          const bool first_holder = gpu_counted.insert(*c->client_id).second;
          for (const auto& [cls, share] : shares) {
            classes[cls] += share;
            if (first_holder) gpu_classes[cls] += share;
          }
        }
        next.insert_or_assign(std::move(key), std::move(cur));
      }
      gpu_has_engines = gpu_has_engines || has_engines;
      Reading<unsigned> r = !has_engines ? Reading<unsigned>::absent(Absent::NotSupported)
                            : !measured  ? Reading<unsigned>::absent(Absent::Unavailable)
                                         : to_pct(busiest(classes));
      process_.insert_or_assign(std::pair{pdev, pc.pid}, r);
    }
    if (have_interval && complete)
      gpu_.insert_or_assign(
          pdev, gpu_has_engines ? to_pct(busiest(gpu_classes)) : Reading<unsigned>::absent(Absent::NotSupported));
  }
  previous_ = std::move(next);
  previous_time_ = now;
  have_interval_ = have_interval;
  complete_ = complete;
}

Reading<unsigned> EngineUsage::gpu_utilization(std::string_view pdev) const {
  if (!have_interval_) return Reading<unsigned>::absent(Absent::Unavailable);
  if (!complete_) return Reading<unsigned>::absent(Absent::NoPermission);
  if (const auto it = gpu_.find(pdev); it != gpu_.end()) return it->second;
  return 0u;  // no process holds the GPU open: nothing can run on it
}

Reading<unsigned> EngineUsage::process_utilization(std::string_view pdev, std::uint32_t pid) const {
  if (const auto it = process_.find(std::pair{std::string(pdev), pid}); it != process_.end()) return it->second;
  return Reading<unsigned>::absent(Absent::Unavailable);
}

std::optional<std::uint64_t> process_memory_mib(const drm::ProcessClients& clients) {
  const auto device_local = [](std::string_view region) {
    return region.starts_with("vram") || region.starts_with("local");
  };
  bool discrete = false;
  for (const drm::DrmFdinfo* c : clients.clients)
    for (const auto& [region, bytes] : c->total_bytes) discrete = discrete || device_local(region);
  std::optional<std::uint64_t> sum;
  for (const drm::DrmFdinfo* c : clients.clients)
    for (const auto& [region, bytes] : c->total_bytes)
      if (!discrete || device_local(region)) sum = drm::saturating_add(sum.value_or(0), bytes);
  if (!sum) return std::nullopt;
  return *sum >> 20;
}

}  // namespace gf::backends::intel
