#pragma once
// The agent's metric history: its own tables in the node's SQLite file (WAL, synchronous=NORMAL), on
// connections of its own (a writer for the collection loop, a reader for the routes).
// Three tiers: samples_raw (one row per GPU per snapshot), samples_1m and samples_1h (per GPU per bucket:
// count, min/max/avg of each metric). Absent readings are stored as NULL and stay NULL through the
// rollups; nothing is ever written as a made-up 0.
// Not thread-safe: one HistoryStore per thread (the agent gives it one owner thread).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/alerts.hpp"
#include "core/fields.hpp"
#include "core/ports/metric_history.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "store/sqlite.hpp"

namespace gf::store {

struct HistoryOptions {
  std::chrono::seconds raw_retention = std::chrono::hours(1);
  std::chrono::seconds minute_retention = std::chrono::hours(24 * 7);
  std::chrono::seconds hour_retention = std::chrono::hours(24 * 90);
};

using HistoryPoint = core::HistoryPoint;

class HistoryStore final : public core::MetricHistory {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  static Result<std::unique_ptr<HistoryStore>> open(const std::string& path, HistoryOptions options = {});

  // One row per GPU of the snapshot, in one transaction.
  Result<void> append(const core::Snapshot& s);
  // All snapshots in ONE transaction: all rows or none (a null pointer fails the whole batch).
  // Batching writes off the request path is the caller's job.
  Result<void> append_batch(const std::vector<core::SnapshotPtr>& batch) override;

  // Folds complete minutes of raw into samples_1m and complete hours of samples_1m into samples_1h, then
  // deletes rows older than each tier's retention, measured from now. Idempotent: each tier keeps a
  // watermark (all buckets before it are rolled up), and a bucket is written with INSERT OR REPLACE
  // recomputed from its source. Raw rows that arrive later than their minute's rollup are not folded
  // in (they stay queryable while raw keeps them). Call it about once a minute.
  Result<void> maintain(TimePoint now) override;

  // Points of one GPU's metric with since <= ts < until, in step buckets (step 0: the tier's own
  // resolution, one point per raw sample for raw). Reads the finest tier whose retention still covers
  // since (as of the last maintain); the part of the range newer than that tier's watermark comes from
  // the finer tiers, so the newest samples are never missing. Oldest first.
  // A field the history does not keep is an error naming those it keeps.
  Result<std::vector<HistoryPoint>> query(unsigned gpu, core::Field metric, TimePoint since, TimePoint until,
                                          std::chrono::seconds step) override;

  // Alert episodes: a Fired event inserts one, its Resolved event completes it. One transaction.
  Result<void> record_alerts(const std::vector<core::AlertEvent>& events) override;
  // The newest `q.limit` episodes of q's GPU (all when none) that overlap q's range, newest first
  // (resolved_at set on those that ended). The filter is the query's WHERE clause, so an old episode of
  // one GPU is found however many newer ones the other GPUs have.
  Result<std::vector<core::Alert>> recent_alerts(const core::AlertQuery& q) override;

  const std::string& path() const noexcept { return db_.path(); }
  std::string location() const override { return db_.path(); }

 private:
  HistoryStore(Db db, HistoryOptions options) : db_(std::move(db)), options_(options) {}
  Result<void> insert_rows(const core::Snapshot& s);

  Db db_;
  HistoryOptions options_;
  // The raw insert, prepared at the first batch and kept (after db_: finalized before the connection
  // closes). Parsing the 24-column statement anew for every batch was most of a batch's cost.
  std::optional<Stmt> insert_raw_;
};

}  // namespace gf::store
