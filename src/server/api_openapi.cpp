// The OpenAPI 3 description of the agent's API. A test checks that its paths and methods are exactly
// the router's routes.
#include <string>

#include "server/api.hpp"

namespace gf::server {

const std::string& openapi_document() {
  static const std::string doc = R"json({
  "openapi": "3.0.3",
  "info": {"title": "gpufleet agent", "version": "0.1.0",
           "description": "What this node's GPUs are doing, who uses them, leases and jobs. Errors are {\"error\": code, \"message\": text}. Requests that change state need Authorization: Bearer <token>."},
  "paths": {
    "/api/v1/monitoring/gpu-metrics": {"get": {"summary": "The latest reading of every GPU (the gpufleet status --json document)", "parameters": [{"$ref": "#/components/parameters/fresh"}], "responses": {"200": {"description": "snapshot"}, "503": {"description": "no reading"}}}},
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
      {"name": "min_memory_mb", "in": "query", "schema": {"type": "integer", "minimum": 0}},
      {"name": "max_utilization", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 100}}], "responses": {"200": {"description": "availability"}}}},
    "/api/v1/allocations": {"post": {"summary": "Lease GPUs", "security": [{"bearer": []}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"gpus": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1}, "min_memory_mb": {"type": "integer", "minimum": 0, "default": 8000}, "max_utilization": {"type": "integer", "minimum": 0, "maximum": 100, "default": 50}, "allow_busy": {"type": "boolean"}, "name": {"type": "string"}, "pid": {"type": "integer", "minimum": 1, "description": "the lease ends when this process ends; without it the agent owns the lease until DELETE"}}}}}}, "responses": {"201": {"description": "lease"}, "409": {"description": "not enough GPUs"}}}},
    "/api/v1/allocations/{id}": {"delete": {"summary": "Release a lease", "security": [{"bearer": []}], "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "released"}, "404": {"description": "no such lease"}}}},
    "/api/v1/leases": {"get": {"summary": "Active leases and waiting jobs", "parameters": [{"name": "all", "in": "query", "description": "also ended leases", "schema": {"type": "boolean"}}], "responses": {"200": {"description": "leases"}}}},
    "/api/v1/jobs": {"get": {"summary": "Recorded job runs", "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000}}], "responses": {"200": {"description": "jobs"}}}},
    "/api/v1/experiments/{id}": {"get": {"summary": "One job run's record", "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "experiment"}, "404": {"description": "no such experiment"}}}},
    "/api/v1/estimate": {"post": {"summary": "GPUs and memory a task needs", "parameters": [{"name": "engine", "in": "query", "schema": {"type": "string"}}], "requestBody": {"content": {"application/json": {"schema": {"type": "object", "description": "the task: parallelism parameters (tensor_parallel_size, pipeline_parallel_size, data_parallel_size, …, with their aliases) and model facts"}}}}, "responses": {"200": {"description": "estimate"}, "400": {"description": "bad task"}}}},
    "/api/v1/cluster/nodes": {"get": {"summary": "Fleet: per-node GPU summaries (serve --cluster-config)", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "nodes"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/gpus": {"get": {"summary": "Fleet: every GPU with metrics, and the nodes without", "parameters": [{"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"}], "responses": {"200": {"description": "GPUs"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/v1/cluster/select": {"get": {"summary": "Fleet: the node a job of N GPUs should go to ({\"node\": null} when none qualifies), with the reasoning", "parameters": [
      {"name": "gpus", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 4096, "default": 1}},
      {"$ref": "#/components/parameters/utilization_threshold"}, {"$ref": "#/components/parameters/memory_threshold"},
      {"name": "fallback", "in": "query", "description": "when no node has enough idle GPUs: none (no pin) or least-loaded", "schema": {"type": "string", "enum": ["none", "least-loaded"]}}], "responses": {"200": {"description": "selection"}, "400": {"description": "bad parameter"}, "503": {"description": "no fleet view, or no refresh yet"}}}},
    "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3"}}}},
    "/metrics": {"get": {"summary": "Prometheus metrics (dcgm-exporter names)", "responses": {"200": {"description": "text exposition format"}}}}
  },
  "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                 "parameters": {"fresh": {"name": "fresh", "in": "query", "description": "1: query the driver now instead of serving the latest reading", "schema": {"type": "boolean"}},
                                "utilization_threshold": {"name": "utilization_threshold", "in": "query", "description": "a GPU is idle below this utilization (%)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": 30}},
                                "memory_threshold": {"name": "memory_threshold", "in": "query", "description": "and below this memory use (% of capacity)", "schema": {"type": "number", "minimum": 0, "maximum": 100, "default": 50}}}}
})json";
  return doc;
}

}  // namespace gf::server
