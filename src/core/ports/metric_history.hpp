#pragma once
// MetricHistory port: where the node agent keeps its metric samples and alert episodes, and reads them
// back downsampled. The agent (node/) depends on this interface only; store/ implements it on SQLite.
// Implementations need not be thread-safe: the agent gives each instance one owner at a time.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/alerts.hpp"
#include "core/fields.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

// One bucket of a query. ts_ms: the bucket's start (Unix ms, aligned to a multiple of the step).
// samples: how many raw samples with a value for the metric went into it; 0 (and no avg/min/max) when
// the GPU was sampled but did not report the metric.
struct HistoryPoint {
  std::int64_t ts_ms = 0;
  std::optional<double> avg, min, max;
  std::size_t samples = 0;
};

class MetricHistory {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  virtual ~MetricHistory() = default;

  // All snapshots in one transaction: all rows or none.
  virtual Result<void> append_batch(const std::vector<SnapshotPtr>& batch) = 0;
  // Rollups and retention as of `now` (wall time). Idempotent; meant to run about once a minute.
  virtual Result<void> maintain(TimePoint now) = 0;
  // One GPU's field with since <= ts < until in step buckets (step 0: the stored resolution), oldest
  // first. An error for a field the history does not keep.
  virtual Result<std::vector<HistoryPoint>> query(unsigned gpu, Field field, TimePoint since, TimePoint until,
                                                  std::chrono::seconds step) = 0;
  // Alert episodes: a Fired event opens one, its Resolved event completes it.
  virtual Result<void> record_alerts(const std::vector<AlertEvent>& events) = 0;
  // The newest `q.limit` episodes that match q (its GPU, overlapping its time range), newest first.
  virtual Result<std::vector<Alert>> recent_alerts(const AlertQuery& q) = 0;
  // Where the history lives, for people (a file path); empty when it has no such place.
  virtual std::string location() const = 0;
};

}  // namespace gf::core
