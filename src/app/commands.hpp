#pragma once
// The CLI verbs. Each returns the process exit code (app/exit_codes.hpp).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "core/policy.hpp"
#include "core/ports/lease_store.hpp"
#include "core/result.hpp"

namespace gf::app {

int run_status(const GlobalOptions& g, bool json);
int run_ps(const GlobalOptions& g, bool json);
int run_backends(const GlobalOptions& g, bool json);
// The metric field table: key, unit, Prometheus name and type, history metric (--json: GET /api/v1/fields).
int run_fields(bool json);
// count 0: until interrupted.
int run_watch(const GlobalOptions& g, double interval_s, unsigned count);

struct MonitorCommand {
  double interval_s = 1.0;
  bool json = false;
  bool no_series = false;
  std::string output;          // write the JSON report here instead of stdout
  std::vector<unsigned> gpus;  // report only these (empty: all)
  std::vector<std::string> argv;
};
int run_monitor(const GlobalOptions& g, const MonitorCommand& m);

// --gpus, --min-memory-mb (MiB), --max-utilization, --allow-busy and --mig fill the need; with --mig the
// lease is one instance of that profile and CUDA_VISIBLE_DEVICES is its MIG-<uuid>.
struct AllocCommand {
  core::GpuNeed need;
  bool uuids = false;  // CUDA_VISIBLE_DEVICES as UUIDs
  bool json = false;
  std::string name;
  std::string db;
};
int run_alloc(const GlobalOptions& g, const AllocCommand& a);
int run_release(const GlobalOptions& g, const std::string& lease_id, const std::string& db);
int run_leases(const GlobalOptions& g, bool json, bool all, const std::string& db);

// `gpufleet usage` (cmd_usage.cpp).
struct UsageCommand {
  std::string since = "7d";
  std::string by = "user";
  bool json = false;
  std::string agent;  // an agent's base URL (http://host:port); empty: this node's file
  std::string db;
};
// Returns the GET /api/v1/usage document for a path with its query; tests stub it.
using UsageFetch = std::function<Result<std::string>(const std::string& path_query)>;
Result<std::string> fetch_usage_document(const UsageCommand& u, const std::string& path_query);
int run_usage(const GlobalOptions& g, const UsageCommand& u, const UsageFetch& fetch = {});
// The efficiency lines of the ended leases, by lease id, from the node file's usage table.
std::map<std::string, std::string> efficiency_lines(const std::string& db_path, const std::vector<core::Lease>& leases);

struct RunCommand {
  AllocCommand alloc;
  double wait_s = 300;
  int priority = 0;
  double interval_s = 1.0;
  std::string docker_image;
  std::vector<std::string> docker_volumes;  // --volume HOST:CONTAINER[:ro], with --docker
  std::vector<std::string> docker_publish;  // --publish [IP:]HOST_PORT:CONTAINER_PORT, with --docker
  std::vector<std::string> argv;
  std::string task;  // set by `task run`: the task this run is one grid point of
};
// Waits for GPUs, runs the command on them, samples, releases, records. Returns CMD's status.
int run_job(const GlobalOptions& g, const RunCommand& r);
// Whether the last run_job was interrupted by a signal (Ctrl-C, SIGTERM, SIGHUP).
bool last_run_interrupted();
int run_jobs(const GlobalOptions& g, bool json, const std::string& db);

int run_estimate(const GlobalOptions& g, const std::string& task_path, const std::string& engine,
                 const std::string& method, bool json);

struct TaskCommand {
  std::string path;
  std::string engine;
  std::string method = "weights";  // the estimate's memory method: "weights" or "seed"
  bool min_memory_given = false;   // --min-memory-mb given: it overrides the estimate
  RunCommand run;                  // options shared by every job of the grid
};
// Expands the task's parameter grid and runs each job through the queue.
int run_task(const GlobalOptions& g, const TaskCommand& t);
struct ServeCommand;  // app/serve_config.hpp
// The node agent: REST, WebSocket, /metrics, history, alerts, the dashboard. Runs until SIGINT/SIGTERM.
int run_serve(const GlobalOptions& g, const ServeCommand& s);

int run_show(const GlobalOptions& g, const std::string& id, bool json, const std::string& db);

// `gpufleet health clear GPU` (cmd_health.cpp): the agent's POST /api/v1/gpus/{gpu}/health/clear.
struct HealthClearCommand {
  std::string gpu;                              // index or UUID
  std::string agent = "http://127.0.0.1:9401";  // the node's agent
  std::string token_file;                       // empty: $GPUFLEET_TOKEN, else the agent's default file
  std::string note;                             // why, for the agent's log
  bool json = false;
};
int run_health_clear(const GlobalOptions& g, const HealthClearCommand& h);

}  // namespace gf::app
