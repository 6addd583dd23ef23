// The OpenAPI 3 description of the agent's API. A test checks that its paths and methods are exactly
// the router's routes. The parts that list metrics (the history's metric names and units) are filled in
// from core::kFields, not written here.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "core/policy.hpp"

#include "core/fields.hpp"
#include "server/api.hpp"

namespace gf::server {
namespace {

// The policy's defaults (core/policy.hpp) are written into the text, so the document cannot drift
// from what the handlers apply.
std::string with_policy_defaults(std::string doc) {
  const std::pair<std::string_view, std::string> values[] = {
      {"@MIN_FREE_MIB@", std::to_string(core::kDefaultMinFreeMemoryMib)},
      {"@MAX_UTIL_PCT@", std::to_string(core::kDefaultMaxUtilizationPct)}};
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
    "/api/v1/monitoring/gpu-metrics": {"get": {"summary": "The latest reading of every GPU (the gpufleet status --json document)", "description": "A value the GPU does not report is null; each GPU's missing_reasons maps the key of every null metric (see /api/v1/fields) to why it is missing.", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "snapshot"}, "503": {"description": "no reading"}}}},
    "/api/gpu/summary": {"get": {"summary": "Dashboard summary", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "summary"}}}},
    "/api/gpu/metrics": {"get": {"summary": "Detailed metrics with processes and firing alerts", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "metrics"}}}},
    "/api/health": {"get": {"summary": "Agent, backend and store status", "responses": {"200": {"description": "ok"}, "503": {"description": "degraded"}}}},
    "/api/v1/gpus/{index}": {"get": {"summary": "One GPU", "parameters": [{"name": "index", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 0}}], "responses": {"200": {"description": "GPU"}, "400": {"description": "bad index"}, "404": {"description": "no such GPU"}}}},
    "/api/v1/processes": {"get": {"summary": "Processes on the GPUs", "responses": {"200": {"description": "processes"}}}},
    "/api/v1/history": {"get": {"summary": "Downsampled history of one metric", "parameters": [
      {"name": "gpu", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
      {"name": "metric", "in": "query", "schema": {"type": "string", "default": "utilization"}},
      {"name": "since", "in": "query", "description": "epoch seconds, ISO 8601 UTC, or a duration before now (90s, 15m, 6h, 7d)", "schema": {"type": "string", "default": "1h"}},
      {"name": "until", "in": "query", "description": "as since; default now", "schema": {"type": "string"}},
      {"name": "step", "in": "query", "description": "seconds per point; default: the range over about 300 points", "schema": {"type": "integer", "minimum": 1}}], "responses": {"200": {"description": "series"}, "400": {"description": "bad parameter"}}}},
    "/api/v1/alerts": {"get": {"summary": "Firing and recent alerts, and the rules", "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000}}], "responses": {"200": {"description": "alerts"}}}},
    "/api/v1/availability": {"get": {"summary": "Whether GPUs qualify for a job now", "parameters": [
      {"name": "gpus", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1024}},
      {"name": "min_memory_mb", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": @MIN_FREE_MIB@}},
      {"name": "max_utilization", "in": "query", "description": "inclusive: a GPU at exactly this utilization still qualifies", "schema": {"type": "integer", "minimum": 0, "maximum": 100, "default": @MAX_UTIL_PCT@}}], "responses": {"200": {"description": "availability"}}}},
    "/api/v1/allocations": {"post": {"summary": "Lease GPUs", "security": [{"bearer": []}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"gpus": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1}, "min_memory_mb": {"type": "integer", "minimum": 0, "default": @MIN_FREE_MIB@}, "max_utilization": {"type": "integer", "minimum": 0, "maximum": 100, "default": @MAX_UTIL_PCT@}, "allow_busy": {"type": "boolean"}, "name": {"type": "string"}, "pid": {"type": "integer", "minimum": 1, "description": "the lease ends when this process ends; without it the agent owns the lease until DELETE"}}}}}}, "responses": {"201": {"description": "lease"}, "409": {"description": "not enough GPUs"}}}},
    "/api/v1/allocations/{id}": {"delete": {"summary": "Release a lease", "security": [{"bearer": []}], "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "released"}, "404": {"description": "no such lease"}}}},
    "/api/v1/leases": {"get": {"summary": "Active leases and waiting jobs; ended leases carry their usage (efficiency line)", "parameters": [{"name": "all", "in": "query", "description": "also ended leases", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "leases"}}}},
    "/api/v1/usage": {"get": {"summary": "GPU accounting per user or job: GPU-hours held and busy, energy, peak memory, of the leases held since a time", "parameters": [{"name": "since", "in": "query", "description": "epoch seconds, ISO 8601 UTC, or a duration before now (90s, 15m, 2h, 7d); default 7d", "schema": {"type": "string"}}, {"name": "by", "in": "query", "schema": {"type": "string", "enum": ["user", "job"], "default": "user"}}], "responses": {"200": {"description": "usage"}, "400": {"description": "bad parameter"}, "503": {"description": "no accounting"}}}},
    "/api/v1/jobs": {"get": {"summary": "Recorded jobs, newest first, a page at a time ({node, jobs, total, limit, offset}; a job is one recorded run of a command on leased GPUs)", "parameters": [{"name": "limit", "in": "query", "description": "page size (default 200)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "offset", "in": "query", "description": "jobs skipped, newest first", "schema": {"type": "integer", "minimum": 0}}, {"name": "status", "in": "query", "description": "only jobs in this status", "schema": {"type": "string", "enum": ["waiting", "running", "succeeded", "failed", "no_gpus", "interrupted", "lost"]}}, {"name": "user", "in": "query", "description": "only jobs of this user name", "schema": {"type": "string", "maxLength": 64}}, {"name": "uid", "in": "query", "description": "only jobs of this uid", "schema": {"type": "integer", "minimum": 0}}, {"name": "task", "in": "query", "description": "only runs of this task grid", "schema": {"type": "string", "maxLength": 200}}, {"name": "series", "in": "query", "description": "false: leave each record's sample series out (has_series: true marks it)", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "jobs"}, "400": {"description": "a bad parameter"}}}},
    "/api/v1/tasks": {"get": {"summary": "Task grids with their totals over all their runs: {node, tasks: [{task, runs, succeeded, failed, running, gpu_hours, last_started_at}], total, limit, offset}", "parameters": [{"name": "limit", "in": "query", "description": "tasks per page (default 100)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "offset", "in": "query", "description": "tasks skipped", "schema": {"type": "integer", "minimum": 0}}, {"name": "user", "in": "query", "description": "count only runs of this user name", "schema": {"type": "string", "maxLength": 64}}, {"name": "uid", "in": "query", "description": "count only runs of this uid", "schema": {"type": "integer", "minimum": 0}}], "responses": {"200": {"description": "tasks"}, "400": {"description": "a bad parameter"}}}},
    "/api/v1/jobs/{id}": {"get": {"summary": "One job's record", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "job"}, "404": {"description": "no such job"}}}},
    "/api/v1/experiments/{id}": {"get": {"summary": "One job's record, under the seeds' name for a run of a task's parameter grid (an alias of /api/v1/jobs/{id})", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "job"}, "404": {"description": "no such job"}}}},
    "/api/v1/estimate": {"post": {"summary": "GPUs and memory a task needs", "parameters": [{"name": "engine", "in": "query", "schema": {"type": "string"}}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "description": "the task: parallelism parameters (tensor_parallel_size, pipeline_parallel_size, data_parallel_size, …, with their aliases) and model facts"}}}}, "responses": {"200": {"description": "estimate"}, "400": {"description": "bad task"}}}},
    "/api/v1/cluster/nodes": {"get": {"summary": "Fleet: per-node GPU summaries (serve --cluster-config)", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "nodes"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/gpus": {"get": {"summary": "Fleet: every GPU with metrics, and the nodes without", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "GPUs"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/select": {"get": {"summary": "Fleet: the node a job of N GPUs should go to ({\"node\": null} when none qualifies), with the reasoning", "parameters": [
      {"name": "gpus", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 1}},
      {"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"},
      {"name": "fallback", "in": "query", "description": "when no node has enough idle GPUs: none (no pin) or least-loaded", "schema": {"type": "string", "enum": ["none", "least-loaded"]}}], "responses": {"200": {"description": "selection"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3"}}}},
    "/api/v1/fields": {"get": {"summary": "Every GPU metric: its key in the GPU documents, unit, label, description, Prometheus name and type, history metric name, and the codes of missing_reasons", "responses": {"200": {"description": "fields"}}}},
    "/metrics": {"get": {"summary": "Prometheus metrics (dcgm-exporter names)", "responses": {"200": {"description": "text exposition format"}}}}
  },
  "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                 "parameters": {"fresh": {"name": "fresh", "in": "query", "description": "1: query the driver now instead of serving the latest reading", "schema": {"type": "boolean"}},
                                "utilization_threshold": {"name": "utilization_threshold", "in": "query", "description": "a GPU is idle below this utilization (%)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": 30}},
                                "memory_threshold": {"name": "memory_threshold", "in": "query", "description": "and below this memory use (% of capacity)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": 50}}}}
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

}  // namespace

const std::string& openapi_document() {
  static const std::string doc = [] {
    auto j = nlohmann::json::parse(with_policy_defaults(kHandWritten));
    fill_metric_lists(j);
    return j.dump(1);
  }();
  return doc;
}

}  // namespace gf::server
