#pragma once
// The JSON documents of the agent's REST API that are not a plain reading: the summary, health,
// availability, alerts, leases and allocations. Pure functions of what the handler gathered; no
// I/O, no clock, no HTTP. The handlers in server/ fetch the facts and send what these return.
#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "allocator/availability.hpp"
#include "allocator/select.hpp"
#include "core/alerts.hpp"
#include "core/fields.hpp"
#include "core/job.hpp"
#include "core/ports/job_store.hpp"
#include "core/ports/lease_store.hpp"
#include "core/ports/metric_history.hpp"
#include "core/snapshot.hpp"

namespace gf::wire {

// GET /api/gpu/summary: GPU counts (available/busy by core/policy.hpp's rule, lost), memory totals
// in MiB, averages rounded to 0.1, the busiest GPU, process and firing-alert counts.
nlohmann::json summary_json(const core::Snapshot& s, const std::string& node, std::size_t alerts_firing);

// GET /api/gpu/metrics: snapshot_json with the node, the processes, the firing alerts and the summary.
nlohmann::json metrics_json(const core::Snapshot& s, const std::string& node, const std::vector<core::Alert>& firing);

// GET /api/v1/gpus/{index}: gpu_json with the reading's timestamp, the node and whether it is simulated.
nlohmann::json gpu_detail_json(const core::Snapshot& s, const core::GpuReading& g, const std::string& node);

// A list of alerts (alert_json of each).
nlohmann::json alerts_json(const std::vector<core::Alert>& alerts);

// GET /api/v1/alerts: {node, firing, recent, rules: [{rule, event, enabled, threshold, duration_s, severity}]}.
nlohmann::json alerts_doc_json(const std::string& node, const std::vector<core::Alert>& firing,
                               const std::vector<core::Alert>& recent, const std::vector<core::AlertRule>& rules);

// What GET /api/health reports, gathered by the handler.
struct HealthFacts {
  std::string node;
  std::string version;
  double uptime_s = 0;
  std::vector<std::string> problems;  // empty: "ok", else "degraded"
  std::string backend_name;
  bool backend_ok = false;
  std::string backend_error;               // empty: none
  const core::Snapshot* latest = nullptr;  // the last published reading, if any
  std::optional<double> last_collection_age_s;
  std::uint64_t collections = 0;
  std::uint64_t collection_errors = 0;
  // Collection itself: when it last worked, how long the last one took, the latest failure (kept after
  // later successes) and when.
  std::optional<std::chrono::system_clock::time_point> last_success;
  std::optional<double> last_duration_s;
  std::string last_failure;
  std::optional<std::chrono::system_clock::time_point> last_failure_at;
  bool store_ok = false;
  std::optional<std::string> store_path;  // absent: no store
  bool history = false;
  std::string store_error;  // empty: none
  std::size_t websocket_clients = 0;
};
// {status, node, version, uptime_s, problems, backend: {…, collection: {last_success, last_duration_s,
// last_error, last_error_at}}, store, websocket_clients, gpus: {count, unhealthy: [{index, uuid, reason,
// problems: [{code, message}]}]}}. Unhealthy GPUs (core/gpu_health.hpp) are named but do not make the
// status "degraded": the agent itself is fine, and a probe that restarts it would not mend a GPU.
nlohmann::json health_json(const HealthFacts& h);

// GET /api/v1/availability: {available, needed, qualifying, min_memory_mb, max_utilization, exclusive,
// timestamp, would_choose: {indices, method, why} or null, gpus: [{index, name, qualifies, reason,
// memory_free_mb, utilization, availability_score}]}. `s` is the snapshot `a` was computed from.
nlohmann::json availability_json(const allocator::Availability& a, const core::Snapshot& s);

// A waiting request: {id, name, priority, gpus, owner: {pid, user}, enqueued_at}.
nlohmann::json waiter_json(const core::Waiter& w);
// waiter_json back: a default for a missing or odd field, never an exception.
core::Waiter waiter_from_json(const nlohmann::json& j);
// GET /api/v1/leases: {node, leases: [lease_json…], waiting: [waiter_json…]}.
nlohmann::json leases_json(const std::string& node, const std::vector<core::Lease>& leases,
                           const std::vector<core::Waiter>& waiting);

// A job's record (core/job.hpp): the JSON the job wrote (gpu_info, metrics, …) with the row's own
// columns laid over it, since they are the truth (a run whose owner died is "lost" there, whatever it
// wrote): {id, name, status, exit_code, started_at, ended_at, command, lease_id, task, user, uid, …}.
nlohmann::json job_json(const core::Job& j);
// job_json back, or job_put's "job" (wire::job_to_json: times as "started_at_ms"/"ended_at_ms", the record
// under "record"). Without "record", the record is the whole object. A default for a missing or odd
// field, never an exception.
core::Job job_from_json(const nlohmann::json& j);
// The size of a job as the limits on job records count it (issue 20, finding 4): the larger of its
// served document (job_json, serialized) and the text the store keeps for it (record, command, name
// and every other text column), so neither a record that does not parse nor one whose text grows when
// escaped slips under the limit.
std::size_t job_document_bytes(const core::Job& j);
// Epoch milliseconds as the documents write times (ISO 8601 UTC).
nlohmann::json ms_time_json(std::int64_t ms);
// {node, jobs: [job_json…]}.
nlohmann::json jobs_json(const std::string& node, const std::vector<core::Job>& jobs);
// GET /api/v1/jobs: jobs_json of the page with {total, limit, offset}: `total` rows match the filters
// over all pages, `limit` and `offset` are the query's.
nlohmann::json jobs_page_json(const std::string& node, const core::JobPage& page, std::size_t limit,
                              std::size_t offset);
// GET /api/v1/tasks: {node, tasks: [{task, user, uid (null: unknown), runs, succeeded, failed, running,
// gpu_hours (4 decimals), last_started_at}], total, limit, offset}.
nlohmann::json tasks_json(const std::string& node, const core::TaskPage& page, std::size_t limit, std::size_t offset);
// DELETE /api/v1/allocations/{id}: {id, released: true}.
nlohmann::json released_json(const std::string& lease_id);

// POST /api/v1/estimate and `gpufleet estimate --json`: {gpus, memory_mb_per_gpu (MiB),
// memory_fraction (null: none), engine, method ("weights"|"seed"), explanation, warnings: [sentence]}
// (estimate::Estimate's fields; wire/ does not know estimate/).
nlohmann::json estimate_json(unsigned gpus, std::uint64_t memory_mib_per_gpu, std::optional<double> memory_fraction,
                             const std::string& engine, const std::string& explanation, std::string_view method,
                             const std::vector<std::string>& warnings);

// The seed's record of a GPU allocation, shared by the CLI (`alloc --json`, job records) and the
// agent: {model, count, device_ids, world_size, gpu_info: {count, indices, allocation_method, why,
// details: [{index, name, uuid, memory_free_mb, utilization_percent, availability_score}]}}.
// `s` is the reading the selection was made on.
nlohmann::json gpu_info_json(const allocator::Selection& sel, const core::Snapshot& s, unsigned world_size);

// POST /api/v1/allocations: lease_json with cuda_visible_devices ("0,1"), why and gpu_info.
nlohmann::json allocation_json(const core::Lease& lease, const allocator::Selection& sel, const core::Snapshot& s,
                               unsigned world_size);

// GET /api/v1/history: one series per GPU, {"gpu", "points": [{t (Unix ms), avg, min, max (2 decimals,
// null without samples), samples}]}, with the metric's history name and unit from the field table.
struct HistorySeries {
  unsigned gpu = 0;
  std::vector<core::HistoryPoint> points;
};
nlohmann::json history_json(core::Field metric, const std::string& node, std::chrono::system_clock::time_point since,
                            std::chrono::system_clock::time_point until, std::chrono::seconds step,
                            const std::vector<HistorySeries>& series);

}  // namespace gf::wire
