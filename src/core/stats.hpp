#pragma once
// Statistics of GPU readings over a job's run: what the GPUs did while it ran. Pure: the caller feeds
// snapshots with the time they were taken (steady clock) and asks for the report at the end.
//
// Means are time-weighted (trapezoids between consecutive samples), so late or missing samples do not
// skew them; percentiles are over the samples. Energy comes from the driver's energy counter when every
// sample of a GPU has one, else from integrating power over time.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/fields.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

struct MetricStats {
  double min = 0, max = 0, mean = 0, p50 = 0, p95 = 0;
  std::size_t samples = 0;  // samples in which the GPU reported this value
};

enum class EnergySource { None, Counter, IntegratedPower };

// The profiling (NVML GPM) fields a run's statistics cover, in table order: activity ratios 0..1, then
// PCIe and NVLink throughput in bytes/s.
inline constexpr std::array<Field, 12> kProfilingFields = {
    Field::ProfGraphicsActive, Field::ProfSmActive,    Field::ProfSmOccupancy,   Field::ProfTensorActive,
    Field::ProfDramActive,     Field::ProfFp64Active,  Field::ProfFp32Active,    Field::ProfFp16Active,
    Field::ProfPcieTxBytes,    Field::ProfPcieRxBytes, Field::ProfNvlinkTxBytes, Field::ProfNvlinkRxBytes};

struct GpuRunStats {
  std::string name;
  std::string uuid;
  std::size_t sample_count = 0;  // samples in which this GPU appeared (GPUs can come and go)
  std::optional<MetricStats> utilization;
  std::optional<MetricStats> memory_used_mb;
  std::optional<MetricStats> memory_usage_percent;
  std::optional<MetricStats> temperature_c;
  std::optional<MetricStats> power_draw_w;
  std::optional<double> energy_joules;
  EnergySource energy_source = EnergySource::None;
  // Per kProfilingFields entry: its statistics over the samples that had it (what the "utilization"
  // above was made of: SM activity, tensor work, …); nullopt when none had it.
  std::array<std::optional<MetricStats>, kProfilingFields.size()> profiling;
  // When no sample had profiling readings: the GPU's last profiling_note (why); empty otherwise.
  std::string profiling_note;
};

struct SeriesPoint {
  double t_s = 0;  // seconds since the first sample
  std::optional<double> utilization, memory_used_mb, temperature_c, power_draw_w;
};

struct RunReport {
  double duration_s = 0;  // first to last sample
  std::size_t sample_count = 0;
  std::map<unsigned, GpuRunStats> gpus;                 // by GPU index
  std::map<unsigned, std::vector<SeriesPoint>> series;  // for charts, decimated to at most max_points
};

// Not thread-safe: the owner (sampler::Sampler) serialises calls. Memory is bounded however long the
// run: min, max and the time-weighted integral are kept as running values; percentiles come from at
// most kMaxKept values per metric, thinned evenly (every other one dropped) when full.
class RunAggregator {
 public:
  static constexpr std::size_t kMaxKept = 16384;
  // max_points bounds the stored time series per GPU; older points are thinned (every other one kept)
  // when it is reached, so a long run keeps its whole shape in bounded memory.
  explicit RunAggregator(std::size_t max_points = 2048) : max_points_(max_points < 4 ? 4 : max_points) {}

  // Adds one snapshot taken at `at`. Snapshots must come in time order; `gpu_filter`, when non-empty,
  // restricts the report to those indices.
  void add(const Snapshot& s, std::chrono::steady_clock::time_point at);
  void set_gpu_filter(std::vector<unsigned> indices) { filter_ = std::move(indices); }
  RunReport report() const;
  std::size_t sample_count() const noexcept { return samples_; }

 private:
  // One metric of one GPU: exact running min/max/integral, bounded sample for percentiles.
  struct Metric {
    std::size_t count = 0;
    double min = 0, max = 0, area = 0, span = 0, last_t = 0, last_v = 0;
    std::vector<float> kept;
    std::size_t stride = 1, seen = 0;
    void add(double t_s, double v);
    std::optional<MetricStats> stats() const;
  };
  struct Track {
    Metric utilization, mem_used, mem_pct, temperature, power;
    std::array<Metric, kProfilingFields.size()> profiling;
    std::string profiling_note;
    double energy_integrated_j = 0;  // trapezoids of power over time
    std::optional<std::uint64_t> energy_first_mj, energy_last_mj;
    bool energy_counter_ok = true;
    std::string name, uuid;
    std::size_t count = 0;
    std::vector<SeriesPoint> series;
    std::size_t series_stride = 1;  // keep every stride-th sample once thinned
    std::size_t series_seen = 0;
  };
  std::size_t max_points_;
  std::vector<unsigned> filter_;
  std::optional<std::chrono::steady_clock::time_point> first_;
  double last_t_ = 0;
  std::size_t samples_ = 0;
  std::map<unsigned, Track> tracks_;
};

// Time-weighted statistics of a series (exposed for tests). Empty input → nullopt.
std::optional<MetricStats> summarize(const std::vector<double>& t_s, const std::vector<double>& values);

}  // namespace gf::core
