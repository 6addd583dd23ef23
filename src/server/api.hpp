#pragma once
// The agent's REST API: handlers registered on a Router. They read what the collection loop published
// (Agent); every lease and queue operation goes through the node's arbiter, and job records, counts and
// the store's path are read from the read-only records view (NodeRecords). No HTTP library here.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/job.hpp"
#include "core/policy.hpp"
#include "core/ports/clock.hpp"
#include "node/agent.hpp"
#include "node/arbiter.hpp"
#include "node/node_records.hpp"
#include "node/usage_ledger.hpp"
#include "platform/clock.hpp"
#include "sampler/monitor.hpp"
#include "server/router.hpp"
#include "server/ws_hub.hpp"

namespace gf::server {

// A Docker-image job submitted over HTTP (POST /api/v1/jobs), as validated by the route.
struct JobSubmission {
  std::string image;
  std::vector<std::string> args;  // the container's command; empty: the image's default
  core::GpuNeed need;             // the body gives gpus and min_memory_mb; the rest are the defaults
  std::string name;               // empty: the image
  int priority = 0;
  std::chrono::milliseconds wait{0};  // how long it may wait for GPUs; 0: now or never
};

// Runs submitted jobs (implemented by app/job_service: the arbiter, the Docker engine, the sampler).
// Thread-safety: any thread.
class JobSubmitter {
 public:
  virtual ~JobSubmitter() = default;
  // Records the job ("waiting") and queues it; returns that first record at once (its id included): what
  // the job is when submitted, whatever its thread has done since. Unavailable when too many submitted
  // jobs are in flight.
  virtual Result<core::Job> submit(const JobSubmission& s) = 0;
  // Cancels a job it runs: one still waiting ends without GPUs, a running one's container is stopped.
  // NotFound: no such job in flight here (unknown, finished, or not submitted through the API).
  virtual Result<void> cancel(const std::string& id) = 0;
};

struct ApiContext {
  node::Agent* agent = nullptr;
  sampler::Monitor* monitor = nullptr;
  WsHub* ws = nullptr;  // may be null (no WebSocket)
  // The node's one writer: every lease and queue operation of the routes (allocate, release, the lease
  // list and its queue), as the token holder (an admin). Null, with records, when the node store could
  // not be opened: those routes answer 503.
  node::Arbiter* arbiter = nullptr;
  node::NodeRecords* records = nullptr;  // the rest: job records, task totals, counts, the store's path
  std::string store_error;               // why they are null
  node::UsageLedger* usage = nullptr;    // may be null: no accounting (GET /api/v1/usage answers 503)
  // POST/DELETE /api/v1/jobs: null unless the config says "jobs": {"submit": true} (the routes answer 403).
  JobSubmitter* submitter = nullptr;
  std::string version;
  std::string node_name;
  std::chrono::steady_clock::time_point started{};
  std::chrono::milliseconds interval{1000};
  const core::Clock* clock = &platform::system_clock();  // "now" of the routes (relative times, ages)
  // GET /api/v1/monitoring/metrics reads the host from here (tests point them at a fixture tree).
  std::string proc_root = "/proc";
  std::string disk_path = "/";
};

void add_monitoring_routes(Router& r, ApiContext& ctx);
// POST /api/v1/gpus/{gpu}/health/clear (api_health.cpp; add_monitoring_routes adds it).
void add_health_clear_route(Router& r, ApiContext& ctx);
void add_job_routes(Router& r, ApiContext& ctx);
// GET /api/v1/usage (api_usage.cpp).
void add_usage_routes(Router& r, ApiContext& ctx);
// GET /api/openapi.json, GET /metrics.
void add_meta_routes(Router& r, ApiContext& ctx);

// The OpenAPI 3 document describing every route (api_openapi.cpp).
const std::string& openapi_document();

// Query helpers shared by the handlers. Each returns an error sentence for a 400 when the value is bad.
Result<std::optional<std::int64_t>> query_int(const Request& req, const std::string& key, std::int64_t min,
                                              std::int64_t max);
// "true"/"1" or "false"/"0"; `def` when the parameter is not given.
Result<bool> query_bool(const Request& req, const std::string& key, bool def);
// Epoch seconds (fractions allowed), ISO 8601 UTC ("2026-11-23T10:00:00Z"), or a duration before now
// ("90s", "15m", "2h", "7d").
Result<std::chrono::system_clock::time_point> parse_time(std::string_view text,
                                                         std::chrono::system_clock::time_point now);

}  // namespace gf::server
