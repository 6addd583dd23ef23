// The OpenAPI 3 description of the agent's API. A test checks that its paths and methods are exactly
// the router's routes. The parts that list metrics (the history's metric names and units) are filled in
// from core::kFields, not written here.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "allocator/node_rank.hpp"
#include "core/fields.hpp"
#include "core/policy.hpp"
#include "server/api.hpp"

namespace gf::server {
namespace {

// The policy's defaults (core/policy.hpp) and the fleet's idle thresholds (allocator::IdleThresholds)
// are written into the text, so the document cannot drift from what the handlers apply.
std::string with_policy_defaults(std::string doc) {
  const allocator::IdleThresholds idle;
  const std::pair<std::string_view, std::string> values[] = {
      {"@MIN_FREE_MIB@", std::to_string(core::kDefaultMinFreeMemoryMib)},
      {"@MAX_UTIL_PCT@", std::to_string(core::kDefaultMaxUtilizationPct)},
      {"@IDLE_UTIL_PCT@", fmt::format("{}", idle.utilization_pct)},  // shortest form: 30, not 30.000000
      {"@IDLE_MEM_PCT@", fmt::format("{}", idle.memory_pct)}};
  for (const auto& [key, value] : values)
    for (auto at = doc.find(key); at != std::string::npos; at = doc.find(key, at + value.size()))
      doc.replace(at, key.size(), value);
  return doc;
}

const char* const kHandWritten = R"json({
  "openapi": "3.0.3",
  "info": {"title": "gpufleet agent", "version": "0.1.0",
           "description": "What this node's GPUs are doing, who uses them, leases and jobs. Errors are {\"error\": code, \"message\": text}. Requests that change state need Authorization: Bearer <token>."},
  "paths": {
    "/api/v1/monitoring/gpu-metrics": {"get": {"summary": "The latest reading of every GPU (the gpufleet status --json document)", "description": "A value the GPU does not report is null; each GPU's missing_reasons maps the key of every null metric (see /api/v1/fields) to why it is missing. A node with no GPUs answers 200 with an empty list and a message.", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "snapshot"}, "500": {"description": "no good reading: none yet, a failed fresh query, or one older than two collection intervals", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SeedDetailError"}}}}}}},
    "/api/v1/monitoring/health": {"get": {"summary": "Liveness in the fleet manager's shape (GPU and store health: /api/health)", "responses": {"200": {"description": "alive", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/MonitoringHealth"}}}}}}},
    "/api/v1/monitoring/metrics": {"get": {"summary": "The host's CPU, memory and disk (from /proc and statvfs)", "description": "cpu_percent is over cpu_interval_s, the time since a sample kept from an earlier request (at least 1 s old once there is one); null until two samples exist. Sizes in bytes.", "responses": {"200": {"description": "host metrics", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HostMetrics"}}}}, "500": {"description": "neither /proc/stat nor /proc/meminfo is readable", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SeedDetailError"}}}}}}},
    "/api/gpu/summary": {"get": {"summary": "Dashboard summary", "description": "monitoring_available is false when no GPU backend is usable; a node with no GPUs answers 200 with gpu_count 0 and a message.", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "summary"}, "500": {"description": "no good reading (none, a failed fresh query, or stale)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HomeSummaryError"}}}}}}},
    "/api/gpu/metrics": {"get": {"summary": "Detailed metrics with processes and firing alerts", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "metrics"}, "500": {"description": "no good reading (none, a failed fresh query, or stale)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HomeMetricsError"}}}}}}},
    "/api/gpu/processes": {"get": {"summary": "Why is my GPU fan running? One sentence naming the processes on the GPUs (or what else keeps a fan turning), the process list and counts per kind", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "processes", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/GpuProcesses"}}}}, "500": {"description": "no good reading (none, a failed fresh query, or stale)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HomeProcessesError"}}}}}}},
    "/api/health": {"get": {"summary": "Agent, backend and store status, with the home monitor's keys (gpu_monitoring is its string; gpufleet's detail is monitoring)", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}, "503": {"description": "degraded (the same document, status degraded, problems say why)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}}}},
    "/api/v1/gpus": {"get": {"summary": "Every GPU's latest reading, marked stale (with its age) when older than two collection intervals", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "snapshot with stale and age_s"}, "503": {"description": "no reading"}}}},
    "/api/v1/gpus/{index}": {"get": {"summary": "One GPU (with stale and age_s)", "parameters": [{"name": "index", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 0}}], "responses": {"200": {"description": "GPU"}, "400": {"description": "bad index"}, "404": {"description": "no such GPU"}}}},
    "/api/v1/gpus/{gpu}/health/clear": {"post": {"summary": "Clear the XIDs recorded on one GPU (after a reset), as dcgmi health --clear: later readings no longer list them, the GPU is healthy again unless it is lost or a row remap failed (state, read anew), and the xid_errors alert resolves at the next collection. Logged with the time and the optional note", "security": [{"bearer": []}], "parameters": [{"name": "gpu", "in": "path", "required": true, "description": "the GPU's index or UUID", "schema": {"type": "string", "maxLength": 96}}], "requestBody": {"required": false, "content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"note": {"type": "string", "maxLength": 200, "description": "who and why, for the agent's log"}}}}}}, "responses": {"200": {"description": "{node, gpu, uuid, cleared_at, cleared_xids: [{xid, time, description}], last_xid_cleared, healthy_before, healthy, health_problems (what stays), note}"}, "400": {"description": "a bad body"}, "404": {"description": "no such GPU"}}}},
    "/api/v1/processes": {"get": {"summary": "Processes on the GPUs (with stale and age_s)", "responses": {"200": {"description": "processes"}}}},
    "/api/v1/history": {"get": {"summary": "Downsampled history of one metric", "parameters": [
      {"name": "gpu", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
      {"name": "metric", "in": "query", "schema": {"type": "string", "default": "utilization"}},
      {"name": "since", "in": "query", "description": "epoch seconds, ISO 8601 UTC, or a duration before now (90s, 15m, 6h, 7d)", "schema": {"type": "string", "default": "1h"}},
      {"name": "until", "in": "query", "description": "as since; default now", "schema": {"type": "string"}},
      {"name": "step", "in": "query", "description": "seconds per point; default: the range over about 300 points", "schema": {"type": "integer", "minimum": 1}}], "responses": {"200": {"description": "series"}, "400": {"description": "bad parameter"}}}},
    "/api/v1/alerts": {"get": {"summary": "Firing and recent alerts, and the rules", "description": "recent: the newest limit episodes that match the filters, newest first; firing: those firing now that match them. With since/until, an episode matches when it overlaps the range (started before until, not resolved before since).", "parameters": [
      {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}},
      {"name": "gpu", "in": "query", "description": "only this GPU's episodes (its index); default all GPUs", "schema": {"type": "integer", "minimum": 0}},
      {"name": "since", "in": "query", "description": "epoch seconds, ISO 8601 UTC, or a duration before now (90s, 15m, 6h, 7d); default: no lower bound", "schema": {"type": "string"}},
      {"name": "until", "in": "query", "description": "as since; default: no upper bound", "schema": {"type": "string"}}], "responses": {"200": {"description": "alerts"}, "400": {"description": "bad parameter"}}}},
    "/api/v1/availability": {"get": {"summary": "Whether GPUs qualify for a job now", "parameters": [
      {"name": "gpus", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1024}},
      {"name": "min_memory_mb", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": @MIN_FREE_MIB@}},
      {"name": "max_utilization", "in": "query", "description": "inclusive: a GPU at exactly this utilization still qualifies", "schema": {"type": "integer", "minimum": 0, "maximum": 100, "default": @MAX_UTIL_PCT@}},
      {"name": "exclusive", "in": "query", "description": "also refuse every GPU running a process gpufleet did not start (default: the seeds' rule, memory floor and utilization ceiling only)", "schema": {"type": "boolean", "default": false}}], "responses": {"200": {"description": "availability"}, "400": {"description": "bad parameter"}}}},
    "/api/v1/allocations": {"post": {"summary": "Lease GPUs", "security": [{"bearer": []}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"gpus": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1}, "min_memory_mb": {"type": "integer", "minimum": 0, "default": @MIN_FREE_MIB@}, "max_utilization": {"type": "integer", "minimum": 0, "maximum": 100, "default": @MAX_UTIL_PCT@}, "allow_busy": {"type": "boolean"}, "name": {"type": "string"}, "pid": {"type": "integer", "minimum": 1, "description": "the lease ends when this process ends; without it the agent owns the lease until DELETE"}, "mig": {"type": "string", "pattern": "^[0-9a-z.+]{1,32}$", "description": "lease one free MIG instance of this profile (e.g. 1g.10gb) instead of whole GPUs; gpus must be 1"}}}}}}, "responses": {"201": {"description": "lease"}, "409": {"description": "not enough GPUs"}}}},
    "/api/v1/allocations/{id}": {"delete": {"summary": "Release a lease", "security": [{"bearer": []}], "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "released"}, "404": {"description": "no such lease"}}}},
    "/api/v1/leases": {"get": {"summary": "Active leases and waiting jobs; ended leases carry their usage (efficiency line)", "parameters": [{"name": "all", "in": "query", "description": "also ended leases", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "leases"}}}},
    "/api/v1/usage": {"get": {"summary": "GPU accounting per user or job: GPU-hours held and busy, energy, peak memory, of the leases held since a time", "parameters": [{"name": "since", "in": "query", "description": "epoch seconds, ISO 8601 UTC, or a duration before now (90s, 15m, 2h, 7d); default 7d", "schema": {"type": "string"}}, {"name": "by", "in": "query", "schema": {"type": "string", "enum": ["user", "job"], "default": "user"}}], "responses": {"200": {"description": "usage"}, "400": {"description": "bad parameter"}, "503": {"description": "no accounting"}}}},
    "/api/v1/jobs": {"get": {"summary": "Recorded jobs, newest first, a page at a time ({node, jobs, total, limit, offset}; a job is one recorded run of a command on leased GPUs)", "parameters": [{"name": "limit", "in": "query", "description": "page size (default 200)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "offset", "in": "query", "description": "jobs skipped, newest first", "schema": {"type": "integer", "minimum": 0}}, {"name": "status", "in": "query", "description": "only jobs in this status", "schema": {"type": "string", "enum": ["waiting", "running", "succeeded", "failed", "no_gpus", "interrupted", "lost"]}}, {"name": "user", "in": "query", "description": "only jobs of this user name", "schema": {"type": "string", "maxLength": 64}}, {"name": "uid", "in": "query", "description": "only jobs of this uid", "schema": {"type": "integer", "minimum": 0}}, {"name": "task", "in": "query", "description": "only runs of this task grid", "schema": {"type": "string", "maxLength": 200}}, {"name": "series", "in": "query", "description": "false: leave each record's sample series out (has_series: true marks it)", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "jobs"}, "400": {"description": "a bad parameter"}}},
      "post": {"summary": "Submit a Docker-image job: queued through the node's arbiter as `gpufleet run --docker` is, run on the GPUs it gets (DeviceRequests), recorded; events job_queued, job_started, job_finished, job_failed on /ws and Socket.IO. Off unless the agent's config says \"jobs\": {\"submit\": true}; a job is as powerful as the Docker socket", "security": [{"bearer": []}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["image"], "additionalProperties": false, "properties": {"image": {"type": "string", "maxLength": 512}, "args": {"type": "array", "maxItems": 256, "items": {"type": "string"}, "description": "the container's command; default: the image's"}, "gpus": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1}, "min_memory_mb": {"type": "integer", "minimum": 0, "default": @MIN_FREE_MIB@}, "name": {"type": "string", "maxLength": 200}, "priority": {"type": "integer", "default": 0}, "wait_s": {"type": "number", "minimum": 0, "maximum": 604800, "default": 0, "description": "how long it may wait for GPUs; past it the job fails with status no_gpus"}}}}}}, "responses": {"202": {"description": "the job, waiting"}, "400": {"description": "a bad body"}, "403": {"description": "submission is off on this agent"}, "429": {"description": "too many submitted jobs in flight"}}}},
    "/api/v1/tasks": {"get": {"summary": "Task grids with their totals over all their runs, one row per task and owner: {node, tasks: [{task, user, uid, runs, succeeded, failed, running, gpu_hours, last_started_at}], total, limit, offset}", "parameters": [{"name": "limit", "in": "query", "description": "tasks per page (default 100)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "offset", "in": "query", "description": "tasks skipped", "schema": {"type": "integer", "minimum": 0}}, {"name": "user", "in": "query", "description": "count only runs of this user name", "schema": {"type": "string", "maxLength": 64}}, {"name": "uid", "in": "query", "description": "count only runs of this uid", "schema": {"type": "integer", "minimum": 0}}, {"name": "task", "in": "query", "description": "only this task (its rows, one per owner)", "schema": {"type": "string", "maxLength": 200}}], "responses": {"200": {"description": "tasks"}, "400": {"description": "a bad parameter"}}}},
    "/api/v1/session": {"get": {"summary": "What this request's credentials may do here: {writer: it carries the agent's (write) token, jobs_submit: POST /api/v1/jobs is on}", "responses": {"200": {"description": "session"}}}},
    "/api/v1/jobs/{id}": {"get": {"summary": "One job's record", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "job"}, "404": {"description": "no such job"}}},
      "delete": {"summary": "Cancel a submitted job: one waiting ends without GPUs, a running one's container is stopped (status interrupted)", "security": [{"bearer": []}], "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "cancelled"}, "403": {"description": "submission is off on this agent"}, "404": {"description": "no such job waiting or running that was submitted through the API"}}}},
    "/api/v1/experiments/{id}": {"get": {"summary": "One job's record, under the seeds' name for a run of a task's parameter grid (an alias of /api/v1/jobs/{id})", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "job"}, "404": {"description": "no such job"}}}},
    "/api/v1/estimate": {"post": {"summary": "GPUs and memory a task needs", "parameters": [{"name": "engine", "in": "query", "schema": {"type": "string"}}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "description": "the task: parallelism parameters (tensor_parallel_size, pipeline_parallel_size, data_parallel_size, …, with their aliases) and model facts"}}}}, "responses": {"200": {"description": "estimate"}, "400": {"description": "bad task"}}}},
    "/api/v1/cluster/nodes": {"get": {"summary": "Fleet: per-node GPU summaries (serve --cluster-config, or its source options)", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "nodes"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/gpus": {"get": {"summary": "Fleet: every GPU with metrics, and the nodes without", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "GPUs"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/select": {"get": {"summary": "Fleet: the node a job of N GPUs should go to ({\"node\": null} when none qualifies), with the reasoning", "parameters": [
      {"name": "gpus", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 1}},
      {"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"},
      {"name": "fallback", "in": "query", "description": "when no node has enough idle GPUs: none (no pin) or least-loaded", "schema": {"type": "string", "enum": ["none", "least-loaded"]}},
      {"name": "gpu_resource", "in": "query", "description": "only nodes whose GPUs are this Kubernetes resource (the vendor a workload is built for)", "schema": {"type": "string", "enum": ["nvidia.com/gpu", "amd.com/gpu", "any"], "default": "any"}}], "responses": {"200": {"description": "selection; node null when none qualifies, or with source_failed true when the configured Kubernetes source did not answer (no node is chosen from partial facts)"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3"}}}},
    "/api/v1/fields": {"get": {"summary": "Every GPU metric: its key in the GPU documents, unit, label, description, Prometheus name and type, history metric name, and the codes of missing_reasons", "responses": {"200": {"description": "fields"}}}},
    "/metrics": {"get": {"summary": "Prometheus metrics (dcgm-exporter names)", "responses": {"200": {"description": "text exposition format"}}}}
  },
  "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                 "schemas": {
                   "SeedDetailError": {"type": "object", "required": ["detail"], "properties": {"detail": {"type": "string", "example": "Failed to get GPU metrics: the last reading is 7.0 s old (the collection interval is 1.0 s); the last collection failed: NVML_ERROR_UNKNOWN"}}},
                   "HomeSummaryError": {"type": "object", "required": ["error", "gpu_count", "monitoring_available"], "properties": {"error": {"type": "string", "enum": ["Failed to get GPU information"]}, "gpu_count": {"type": "integer", "enum": [0]}, "monitoring_available": {"type": "boolean", "enum": [false]}}},
                   "HomeMetricsError": {"type": "object", "required": ["error", "gpus"], "properties": {"error": {"type": "string", "enum": ["Failed to get GPU metrics"]}, "gpus": {"type": "array", "maxItems": 0, "items": {}}}},
                   "HomeProcessesError": {"type": "object", "required": ["error", "processes"], "properties": {"error": {"type": "string", "enum": ["Failed to get GPU processes"]}, "processes": {"type": "array", "maxItems": 0, "items": {}}}},
                   "MonitoringHealth": {"type": "object", "required": ["status", "timestamp", "version"], "properties": {"status": {"type": "string", "enum": ["healthy"]}, "timestamp": {"type": "string", "description": "UTC, microseconds, no zone suffix: 2025-03-04T23:02:50.123456"}, "version": {"type": "string"}}},
                   "Health": {"type": "object", "required": ["status", "service", "version", "database", "gpu_monitoring", "monitoring"], "properties": {
                     "status": {"type": "string", "enum": ["ok", "degraded"]}, "service": {"type": "string", "enum": ["gpufleet"]}, "version": {"type": "string"},
                     "database": {"type": "string", "enum": ["connected", "unavailable"], "description": "the store: unavailable when it cannot be opened or history writes fail"},
                     "gpu_monitoring": {"type": "string", "enum": ["available", "unavailable"], "description": "the home monitor's word: available while a backend gives good, fresh readings (a node whose backend sees no GPU included)"},
                     "monitoring": {"type": "object", "description": "gpufleet's detail of gpu_monitoring", "properties": {"available": {"type": "boolean"}, "gpu_count": {"type": "integer"}, "last_error": {"type": "string", "nullable": true}, "backend": {"type": "string"}, "stale": {"type": "boolean"}, "age_s": {"type": "number", "nullable": true}}},
                     "node": {"type": "string"}, "uptime_s": {"type": "number"}, "problems": {"type": "array", "items": {"type": "string"}},
                     "backend": {"type": "object", "description": "name, ok, error, gpus, collections, collection_errors, and collection: {last_success, last_duration_s, last_error (the latest failure, kept after later successes), last_error_at}"}, "store": {"type": "object"}, "websocket_clients": {"type": "integer"},
                     "gpus": {"type": "object", "description": "unhealthy GPUs (a critical XID, a failed row remap, lost) are named here; they do not make the status degraded", "properties": {"count": {"type": "integer", "nullable": true}, "unhealthy": {"type": "array", "items": {"type": "object", "properties": {"index": {"type": "integer"}, "uuid": {"type": "string"}, "reason": {"type": "string"}, "problems": {"type": "array", "items": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}}}}}}},
                   "HostMetrics": {"type": "object", "required": ["timestamp", "system"], "properties": {
                     "timestamp": {"type": "string"},
                     "system": {"type": "object", "required": ["cpu_percent", "memory", "disk"], "description": "the seed's shape: memory and disk inside system", "properties": {"cpu_percent": {"type": "number", "nullable": true}, "cpu_count": {"type": "integer"}, "cpu_interval_s": {"type": "number"},
                       "memory": {"type": "object", "required": ["total", "available", "percent"], "description": "bytes; null when /proc/meminfo is unreadable", "properties": {"total": {"type": "integer", "nullable": true}, "available": {"type": "integer", "nullable": true}, "used": {"type": "integer", "nullable": true}, "free": {"type": "integer", "nullable": true}, "percent": {"type": "number", "nullable": true}}},
                       "disk": {"type": "object", "required": ["total", "used", "free", "percent"], "description": "bytes, of the filesystem holding path", "properties": {"path": {"type": "string"}, "total": {"type": "integer", "nullable": true}, "used": {"type": "integer", "nullable": true}, "free": {"type": "integer", "nullable": true}, "percent": {"type": "number", "nullable": true}, "error": {"type": "string", "nullable": true}}}}}}},
                   "GpuProcesses": {"type": "object", "required": ["explanation", "processes", "counts"], "properties": {
                     "timestamp": {"type": "string"}, "node": {"type": "string"},
                     "explanation": {"type": "string", "description": "one sentence; process text capped and with control characters escaped"},
                     "gpu_count": {"type": "integer"}, "process_count": {"type": "integer"},
                     "counts": {"type": "object", "properties": {"compute": {"type": "integer"}, "graphics": {"type": "integer"}, "compute+graphics": {"type": "integer"}, "mps": {"type": "integer"}}},
                     "processes": {"type": "array", "items": {"type": "object"}},
                     "gpus": {"type": "array", "items": {"type": "object", "properties": {"index": {"type": "integer"}, "name": {"type": "string"}, "utilization": {"type": "integer", "nullable": true}, "temperature": {"type": "integer", "nullable": true}, "fan_speed": {"type": "integer", "nullable": true}, "power_draw": {"type": "number", "nullable": true}, "persistence_mode": {"type": "boolean", "nullable": true}, "idle": {"type": "boolean", "nullable": true}, "process_count": {"type": "integer"}}}},
                     "message": {"type": "string", "description": "only on a node with no GPUs"}}}},
                 "parameters": {"fresh": {"name": "fresh", "in": "query", "description": "1: query the driver now instead of serving the latest reading", "schema": {"type": "boolean"}},
                                "utilization_threshold": {"name": "utilization_threshold", "in": "query", "description": "a GPU is idle below this utilization (%)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": @IDLE_UTIL_PCT@}},
                                "memory_threshold": {"name": "memory_threshold", "in": "query", "description": "and below this memory use (% of capacity)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": @IDLE_MEM_PCT@}}}}
})json";

// The history route's metric parameter: an enum of the table's history metrics, their units in the text.
void fill_metric_lists(nlohmann::json& doc) {
  nlohmann::json names = nlohmann::json::array();
  std::string units;
  for (const auto& f : core::kFields) {
    if (f.history_metric.empty()) continue;
    names.push_back(f.history_metric);
    if (!units.empty()) units += ", ";
    units += std::string(f.history_metric) + (f.unit.empty() ? "" : " (" + std::string(f.unit) + ")");
  }
  for (auto& p : doc["paths"]["/api/v1/history"]["get"]["parameters"])
    if (p["name"] == "metric") {
      p["schema"]["enum"] = names;
      p["description"] = "the metric, in the unit the response names: " + units;
    }
}

// The routes kept for the seeds' clients: marked with their dialect and grouped under a tag per seed,
// so a reader can tell them from gpufleet's own (whose shapes and errors they do not follow).
void mark_seed_routes(nlohmann::json& doc) {
  struct Seed {
    std::string_view path, tag;
  };
  constexpr std::string_view kFleet = "seed: fleet manager", kHome = "seed: home monitor";
  const Seed seeds[] = {{"/api/v1/monitoring/gpu-metrics", kFleet},
                        {"/api/v1/monitoring/health", kFleet},
                        {"/api/v1/monitoring/metrics", kFleet},
                        {"/api/gpu/summary", kHome},
                        {"/api/gpu/metrics", kHome},
                        {"/api/gpu/processes", kHome},
                        {"/api/health", kHome}};
  for (const auto& s : seeds)
    for (auto& [method, op] : doc["paths"][std::string(s.path)].items()) {
      op["x-gpufleet-dialect"] = "seed";
      op["tags"] = nlohmann::json::array({s.tag});
    }
  doc["tags"] = nlohmann::json::array(
      {{{"name", kFleet},
        {"description",
         "The GPU fleet manager's monitoring routes: its keys, and errors as {\"detail\": text} with 500"}},
       {{"name", kHome},
        {"description",
         "The home GPU monitor's routes: its keys, and its error documents ({\"error\": text, ...}) with 500"}}});
}

}  // namespace

const std::string& openapi_document() {
  static const std::string doc = [] {
    auto j = nlohmann::json::parse(with_policy_defaults(kHandWritten));
    fill_metric_lists(j);
    mark_seed_routes(j);
    return j.dump(1);
  }();
  return doc;
}

}  // namespace gf::server
