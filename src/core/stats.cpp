#include "core/stats.hpp"

#include <algorithm>
#include <cmath>

namespace gf::core {
namespace {

double percentile(std::vector<double> v, double p) {
  // Linear interpolation between closest ranks (numpy's default).
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = static_cast<std::size_t>(std::ceil(rank));
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

template <class T>
std::optional<double> as_double(const Reading<T>& r) {
  if (!r) return std::nullopt;
  return static_cast<double>(*r);
}

}  // namespace

std::optional<MetricStats> summarize(const std::vector<double>& t, const std::vector<double>& v) {
  if (v.empty() || t.size() != v.size()) return std::nullopt;
  MetricStats s;
  s.samples = v.size();
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  double area = 0, span = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    const double dt = t[i] - t[i - 1];
    if (dt <= 0) continue;
    area += (v[i] + v[i - 1]) / 2.0 * dt;
    span += dt;
  }
  if (span > 0) {
    s.mean = area / span;
  } else {
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / static_cast<double>(v.size());
  }
  s.p50 = percentile(v, 50);
  s.p95 = percentile(v, 95);
  return s;
}

void RunAggregator::Metric::add(double t_s, double v) {
  if (count == 0) {
    min = max = v;
  } else {
    min = std::min(min, v);
    max = std::max(max, v);
    const double dt = t_s - last_t;
    if (dt > 0) {
      area += (v + last_v) / 2.0 * dt;
      span += dt;
    }
  }
  ++count;
  last_t = t_s;
  last_v = v;
  if (seen++ % stride == 0) {
    kept.push_back(static_cast<float>(v));
    if (kept.size() >= kMaxKept) {
      std::size_t j = 0;
      for (std::size_t i = 0; i < kept.size(); i += 2) kept[j++] = kept[i];
      kept.resize(j);
      stride *= 2;
      seen = 1;
    }
  }
}

std::optional<MetricStats> RunAggregator::Metric::stats() const {
  if (count == 0) return std::nullopt;
  MetricStats s;
  s.samples = count;
  s.min = min;
  s.max = max;
  if (span > 0) {
    s.mean = area / span;
  } else {  // every sample at one instant: a plain average of what we kept
    double sum = 0;
    for (float x : kept) sum += x;
    s.mean = sum / static_cast<double>(kept.size());
  }
  std::vector<double> v(kept.begin(), kept.end());
  s.p50 = percentile(v, 50);
  s.p95 = percentile(std::move(v), 95);
  return s;
}

void RunAggregator::add(const Snapshot& s, std::chrono::steady_clock::time_point at) {
  if (!first_) first_ = at;
  const double t = std::chrono::duration<double>(at - *first_).count();
  if (samples_ > 0 && t < last_t_) return;  // out of order: ignore rather than corrupt the integrals
  last_t_ = t;
  ++samples_;
  for (const auto& g : s.gpus) {
    if (!filter_.empty() && std::find(filter_.begin(), filter_.end(), g.index) == filter_.end()) continue;
    Track& tr = tracks_[g.index];
    tr.name = g.name;
    tr.uuid = g.uuid;
    ++tr.count;
    if (g.health != Health::Ok) continue;
    SeriesPoint pt{t, as_double(g.utilization_pct), as_double(g.memory_used_mib), as_double(g.temperature_c),
                   as_double(g.power_draw_w)};
    if (pt.utilization) tr.utilization.add(t, *pt.utilization);
    if (pt.memory_used_mb) tr.mem_used.add(t, *pt.memory_used_mb);
    if (g.memory_used_mib && g.memory_total_mib && *g.memory_total_mib > 0)
      tr.mem_pct.add(t, 100.0 * static_cast<double>(*g.memory_used_mib) / static_cast<double>(*g.memory_total_mib));
    if (pt.power_draw_w) {
      if (tr.power.count > 0 && t > tr.power.last_t)
        tr.energy_integrated_j += (*pt.power_draw_w + tr.power.last_v) / 2.0 * (t - tr.power.last_t);
      tr.power.add(t, *pt.power_draw_w);
    }
    if (pt.temperature_c) tr.temperature.add(t, *pt.temperature_c);
    for (std::size_t i = 0; i < kProfilingFields.size(); ++i)
      if (const FieldValue v = read(kProfilingFields[i], g); v.has_value()) tr.profiling[i].add(t, v.as_double());
    tr.profiling_note = g.profiling_note;
    if (g.energy_mj) {
      if (!tr.energy_first_mj) tr.energy_first_mj = *g.energy_mj;
      if (tr.energy_last_mj && *g.energy_mj < *tr.energy_last_mj) tr.energy_counter_ok = false;  // driver reloaded
      tr.energy_last_mj = *g.energy_mj;
    } else {
      tr.energy_counter_ok = false;
    }
    // Bounded series: when full, drop every other point and keep only every stride-th new one.
    if (tr.series_seen++ % tr.series_stride == 0) {
      tr.series.push_back(pt);
      if (tr.series.size() >= max_points_) {
        std::vector<SeriesPoint> half;
        half.reserve(max_points_ / 2 + 1);
        for (std::size_t i = 0; i < tr.series.size(); i += 2) half.push_back(tr.series[i]);
        tr.series = std::move(half);
        tr.series_stride *= 2;
        tr.series_seen = 1;
      }
    }
  }
}

RunReport RunAggregator::report() const {
  RunReport r;
  r.duration_s = last_t_;
  r.sample_count = samples_;
  for (const auto& [index, tr] : tracks_) {
    GpuRunStats g;
    g.name = tr.name;
    g.uuid = tr.uuid;
    g.sample_count = tr.count;
    g.utilization = tr.utilization.stats();
    g.memory_used_mb = tr.mem_used.stats();
    g.memory_usage_percent = tr.mem_pct.stats();
    g.temperature_c = tr.temperature.stats();
    g.power_draw_w = tr.power.stats();
    if (tr.energy_counter_ok && tr.energy_first_mj && tr.energy_last_mj) {
      g.energy_joules = static_cast<double>(*tr.energy_last_mj - *tr.energy_first_mj) / 1000.0;
      g.energy_source = EnergySource::Counter;
    } else if (tr.power.count >= 2) {
      g.energy_joules = tr.energy_integrated_j;
      g.energy_source = EnergySource::IntegratedPower;
    }
    bool any_profiling = false;
    for (std::size_t i = 0; i < kProfilingFields.size(); ++i) {
      g.profiling[i] = tr.profiling[i].stats();
      any_profiling = any_profiling || g.profiling[i].has_value();
    }
    if (!any_profiling) g.profiling_note = tr.profiling_note;
    r.gpus.emplace(index, std::move(g));
    r.series.emplace(index, tr.series);
  }
  return r;
}

}  // namespace gf::core
