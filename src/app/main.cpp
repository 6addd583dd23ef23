// gpufleet: one binary, one verb per job. Command-line parsing lives here alone (CLI11 is heavy to
// compile); the verbs are in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "allocator/mig_select.hpp"
#include "app/cmd_cluster.hpp"
#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/serve_config.hpp"
#include "backends/backend.hpp"

namespace {

// Follows "Backends: auto-detection tries <the registry's order>" (backends/registry.cpp).
constexpr const char* kFooter =
    R"(, and says which it chose
(`gpufleet backends`); it never falls back to simulated GPUs. --backend sim shows clearly labelled
simulated GPUs for demos. Environment: GPUFLEET_NVML_LIBRARY, GPUFLEET_NVIDIA_SMI, GPUFLEET_SYSFS_ROOT,
GPUFLEET_PROC_ROOT, GPUFLEET_KMSG, GPUFLEET_SIM_SCENARIO, GPUFLEET_DB (the node store), GPUFLEET_SOCKET, DOCKER_HOST, NO_COLOR.

Shared nodes: when the node's agent runs (its socket is found: --socket, $GPUFLEET_SOCKET,
/run/gpufleet/agent.sock, then this user's own), alloc, run, release, leases, jobs and show go through
it and it alone writes the store; GPUFLEET_DB is then not used, and --db is refused (it would bypass
the agent). A stuck agent is reported after 5 s ("not answering", exit 1).

Exit codes: 0 ok; 1 a query or I/O failed; 2 bad command line; 3 the backend asked for is not usable
here (or, for `backends`, none is); 75 `alloc`/`run`: not enough GPUs (within --wait), `cluster select`: no node qualifies. `monitor` and
`run` exit with CMD's status, or 125 when gpufleet failed, 126 when CMD cannot be executed, 127 when
CMD is not found.)";

// The fleet's source options, the same on every `cluster` verb and on `serve` (its fleet view). A
// non-empty group puts them under their own heading in the help.
void add_fleet_source_options(CLI::App* sub, gf::app::ClusterCommand& c, const std::string& group = {}) {
  const auto in_group = [&group](CLI::Option* o) { return group.empty() ? o : o->group(group); };
  auto* kubeconfig = in_group(sub->add_option(
      "--kubeconfig", c.kubeconfig, "Kubernetes: this kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"));
  in_group(sub->add_option("--context", c.context, "Kubernetes: this kubeconfig context instead of current-context"));
  in_group(
      sub->add_flag("--in-cluster", c.in_cluster, "Kubernetes: the pod's service account (KUBERNETES_SERVICE_HOST)"))
      ->excludes(kubeconfig);
  in_group(sub->add_option("--prometheus", c.prometheus, "Prometheus base URL (queries dcgm-exporter's metrics)"));
  in_group(sub->add_option("--prometheus-token-file", c.prometheus_token_file,
                           "file whose first line is sent to Prometheus as a bearer token"));
  in_group(sub->add_option("--node-label", c.node_label, "the label naming the node (default Hostname)"));
  in_group(
      sub->add_option("--max-age", c.max_age_s, "seconds after which metrics count as none (default 60; 0: never)"))
      ->check(CLI::Range(0.0, 86400.0));
  in_group(sub->add_option("--agents", c.agents_file, "file of gpufleet agent base URLs, one per line (# comments)"));
  in_group(sub->add_option("--agent", c.agents, "a gpufleet agent's base URL (repeatable)"));
  in_group(sub->add_option("--timeout", c.timeout_s,
                           "seconds each request to Kubernetes, Prometheus or an agent may take (default 10)"))
      ->check(CLI::Range(0.1, 600.0));
  in_group(sub->add_flag("--exec-nvidia-smi", c.exec_nvidia_smi,
                         "Kubernetes: run nvidia-smi through pods/exec in a pod that requests nvidia.com/gpu on each "
                         "node without other metrics (seed 002's way; needs RBAC create on pods/exec)"));
  in_group(sub->add_option("--exec-parallel", c.exec_parallel, "pods exec'ed at once (default 8)"))
      ->check(CLI::Range(1u, 64u));
  in_group(sub->add_option("--exec-timeout", c.exec_timeout_s, "seconds each pod's exec may take (default 10)"))
      ->check(CLI::Range(0.1, 600.0));
  in_group(sub->add_option("--utilization-threshold", c.utilization_threshold,
                           "a GPU is idle below this utilization (%, default 30)"))
      ->check(CLI::Range(0.0, 100.0));
  in_group(sub->add_option("--memory-threshold", c.memory_threshold,
                           "... and below this memory use (% of capacity, default 50)"))
      ->check(CLI::Range(0.0, 100.0));
}

// What every verb adds to the parser: its subcommand, its
// options (written into its command struct, which outlives parsing) and how it runs once chosen.
// `command` is what followed the first "--": only the verbs that run a command take it.
using Command = std::vector<std::string>;
struct Verb {
  CLI::App* sub = nullptr;
  std::function<int(const gf::app::GlobalOptions&, Command&)> run;
  bool takes_command = false;
};

// The verbs whose options are a --json flag and little else.
struct JsonArgs {
  bool json = false;
};
struct WatchArgs {
  double interval_s = 1.0;
  unsigned count = 0;
};
struct ReleaseArgs {
  std::string lease_id, db;
};
struct LeasesArgs {
  bool json = false, all = false;
  std::string db;
};
struct EstimateArgs {
  std::string task_path, engine, method = "weights";
  bool json = false;
};
struct JobsArgs {
  bool json = false;
  std::string db;
};
struct ShowArgs {
  std::string job_id, db;
  bool json = false;
};

void declare_global_options(CLI::App& app, gf::app::GlobalOptions& g) {
  std::vector<std::string> backend_names{"auto"};
  for (const auto& b : gf::backends::registered_backends()) backend_names.emplace_back(b.name);
  app.add_option("--backend", g.backend, gf::backends::backend_choices())
      ->check(CLI::IsMember(backend_names))
      ->capture_default_str();
  app.add_option("--sim-scenario", g.sim_scenario, "JSON scenario for --backend sim (default: built-in demo)")
      ->check(CLI::ExistingFile);
  app.add_option("--sim-gpus", g.sim_gpus, "number of simulated GPUs (default: the scenario's)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--nvidia-smi-timeout", g.nvidia_smi_timeout_s, "seconds before a hung nvidia-smi is killed")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_option("--gpm-interval", g.gpm_interval_s,
                 "least seconds between two NVML GPM (profiling) samples of a GPU: each reading averages that "
                 "span; 0: GPM off")
      ->envname("GPUFLEET_GPM_INTERVAL")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            // NVML wants more than 100 ms between samples; an hour is longer than any useful average.
            double v = -1;
            try {
              v = std::stod(text);
            } catch (const std::exception&) {
            }
            return v == 0 || (v >= 0.2 && v <= 3600) ? std::string() : "must be 0 (off) or 0.2 to 3600 seconds";
          },
          "0 or 0.2..3600"))
      ->capture_default_str();
  app.add_flag("--no-color", g.no_color, "no colours (also: NO_COLOR set, or output not a terminal)");
  app.add_option("--socket", g.socket,
                 "the node agent's socket (default: $GPUFLEET_SOCKET, /run/gpufleet/agent.sock, this user's own; "
                 "none: no agent, use the store)");
}

Verb declare_status(CLI::App& app, JsonArgs& a) {
  auto* sub = app.add_subcommand("status", "one line per GPU: load, memory, power, processes");
  sub->add_flag("--json", a.json, "print the document GET /api/v1/monitoring/gpu-metrics serves");
  return {sub, [&a](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_status(g, a.json); }};
}

Verb declare_ps(CLI::App& app, JsonArgs& a) {
  auto* sub = app.add_subcommand("ps", "processes on the GPUs, biggest memory first: who is using what");
  sub->add_flag("--json", a.json, "print JSON");
  return {sub, [&a](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_ps(g, a.json); }};
}

Verb declare_backends(CLI::App& app, JsonArgs& a) {
  auto* sub = app.add_subcommand("backends", "which GPU backends are usable here, and which one is chosen");
  sub->add_flag("--json", a.json, "print JSON");
  return {sub, [&a](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_backends(g, a.json); }};
}

Verb declare_fields(CLI::App& app, JsonArgs& a) {
  auto* sub =
      app.add_subcommand("fields", "the GPU metrics gpufleet reports: key, unit, Prometheus name, history name");
  sub->add_flag("--json", a.json, "print the document GET /api/v1/fields serves");
  return {sub, [&a](const gf::app::GlobalOptions&, Command&) { return gf::app::run_fields(a.json); }};
}

Verb declare_watch(CLI::App& app, WatchArgs& w) {
  auto* sub = app.add_subcommand("watch", "live view, refreshed in place");
  sub->add_option("-n,--interval", w.interval_s, "seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--count", w.count, "stop after this many refreshes (default: until Ctrl-C)");
  return {sub,
          [&w](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_watch(g, w.interval_s, w.count); }};
}

Verb declare_monitor(CLI::App& app, gf::app::MonitorCommand& m) {
  auto* sub = app.add_subcommand("monitor", "run a command, sample the GPUs while it runs, print what they did");
  sub->footer("Usage: gpufleet monitor [OPTIONS] -- CMD [ARGS...]");
  sub->add_option("-n,--interval", m.interval_s, "seconds between samples (0.05 to 60)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  sub->add_flag("--json", m.json, "print the statistics as JSON on stdout (CMD's output shares stdout)");
  sub->add_option("-o,--output", m.output, "write the JSON statistics to this file");
  sub->add_flag("--no-series", m.no_series, "leave the time series out of the JSON");
  sub->add_option("--gpus", m.gpus, "report only these GPU indices")->delimiter(',');
  sub->add_option("command", m.argv, "the command to run (put it after --)");
  return {sub,
          [&m](const gf::app::GlobalOptions& g, Command& command) {
            m.argv.insert(m.argv.end(), command.begin(), command.end());
            return gf::app::run_monitor(g, m);
          },
          true};
}

// The lease request's options, the same on alloc, run and task run.
void add_alloc_options(CLI::App* sub, gf::app::AllocCommand& a) {
  sub->add_option("-g,--gpus", a.need.gpus, "number of GPUs")->capture_default_str()->check(CLI::Range(1u, 4096u));
  sub->add_option("-m,--min-memory-mb", a.need.min_free_memory_mib, "free memory each GPU must have (MiB)")
      ->capture_default_str();
  sub->add_option("--max-utilization", a.need.max_utilization_pct, "busiest a GPU may be (%, inclusive)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 100u));
  sub->add_flag("--allow-busy", a.need.allow_busy, "also take GPUs running processes gpufleet did not start");
  sub->add_flag("--uuids", a.uuids, "CUDA_VISIBLE_DEVICES as GPU UUIDs instead of indices");
  sub->add_option("--mig", a.need.mig_profile,
                  "lease one free MIG instance of this profile (e.g. 1g.10gb) instead of whole GPUs; "
                  "CUDA_VISIBLE_DEVICES is then its MIG UUID")
      ->check(CLI::Validator(
          [](std::string& p) {
            return gf::allocator::valid_mig_profile(p) ? std::string()
                                                       : std::string("a MIG profile is written like 1g.10gb");
          },
          "PROFILE"));
  sub->add_option("--name", a.name, "a name for the lease or job");
  sub->add_option("--db", a.db,
                  "the node store (default: $GPUFLEET_DB, /var/lib/gpufleet/gpufleet.db as root, "
                  "else ~/.local/state/gpufleet/gpufleet.db)");
}

Verb declare_alloc(CLI::App& app, gf::app::AllocCommand& a) {
  auto* sub = app.add_subcommand("alloc", "lease GPUs for the calling shell: eval \"$(gpufleet alloc --gpus 2)\"");
  add_alloc_options(sub, a);
  sub->add_flag("--json", a.json, "print the lease as JSON");
  return {sub, [&a](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_alloc(g, a); }};
}

Verb declare_release(CLI::App& app, ReleaseArgs& r) {
  auto* sub = app.add_subcommand("release", "end a lease");
  sub->add_option("lease", r.lease_id, "lease id (see gpufleet leases)")->required();
  sub->add_option("--db", r.db, "the node store");
  return {sub, [&r](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_release(g, r.lease_id, r.db); }};
}

Verb declare_leases(CLI::App& app, LeasesArgs& l) {
  auto* sub = app.add_subcommand("leases", "active GPU leases and the jobs waiting for GPUs");
  sub->add_flag("--json", l.json, "print JSON");
  sub->add_flag("--all", l.all, "ended leases too");
  sub->add_option("--db", l.db, "the node store");
  return {sub, [&l](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_leases(g, l.json, l.all, l.db); }};
}

Verb declare_usage(CLI::App& app, gf::app::UsageCommand& u) {
  auto* sub =
      app.add_subcommand("usage", "GPU accounting per user or job: GPU-hours held and busy, energy, peak memory");
  sub->add_option("--since", u.since, "leases held since this long ago (90s, 15m, 2h, 7d; default 7d)");
  sub->add_option("--by", u.by, "user or job (default user)");
  sub->add_flag("--json", u.json, "print the document GET /api/v1/usage serves");
  sub->add_option("--agent", u.agent, "ask this agent (http://host:port) instead of reading the node store");
  sub->add_option("--db", u.db, "the node store");
  return {sub, [&u](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_usage(g, u); }};
}

Verb declare_run(CLI::App& app, gf::app::RunCommand& r) {
  auto* sub = app.add_subcommand("run", "wait for GPUs, run a command on them, sample, release, record");
  add_alloc_options(sub, r.alloc);
  sub->add_option("-w,--wait", r.wait_s, "seconds to wait for GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 31536000.0));
  sub->add_option("-p,--priority", r.priority, "higher goes first; first come first served within a priority");
  sub->add_option("-n,--interval", r.interval_s, "seconds between GPU samples (0.05 to 60)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  sub->add_option("--docker", r.docker_image,
                  "run CMD in this image through the Docker engine (GPUs via DeviceRequests)");
  sub->add_option("--volume", r.docker_volumes,
                  "with --docker: bind-mount HOST:CONTAINER[:ro] (absolute paths), as docker run -v; repeatable");
  sub->add_option("--publish", r.docker_publish,
                  "with --docker: publish [IP:]HOST_PORT:CONTAINER_PORT, as docker run -p; repeatable");
  sub->add_flag("--json", r.alloc.json, "print the job record as JSON when it ends");
  sub->add_option("command", r.argv, "the command (put it after --)");
  sub->footer(
      "Usage: gpufleet run --gpus N [OPTIONS] -- CMD [ARGS...]\nExit status: CMD's; 75 when the GPUs did not come "
      "within --wait.");
  return {sub,
          [&r](const gf::app::GlobalOptions& g, Command& command) {
            r.argv.insert(r.argv.end(), command.begin(), command.end());
            return gf::app::run_job(g, r);
          },
          true};
}

Verb declare_estimate(CLI::App& app, EstimateArgs& e) {
  auto* sub = app.add_subcommand("estimate", "how many GPUs and how much memory a task needs, with the arithmetic");
  sub->add_option("task", e.task_path, "task file (JSON: model.id_or_path, parameters, engine)")->required();
  sub->add_option("--engine", e.engine, "apply this engine's arithmetic")->check(CLI::IsMember({"vllm", "sglang"}));
  sub->add_option("--method", e.method,
                  "weights: from the model's size (gpufleet's; default); seed: the seed's table (70B/65B → "
                  "20000, 13B/7B → 12000, otherwise 8000 MiB per GPU), for tasks tuned to the seed's numbers")
      ->check(CLI::IsMember({"weights", "seed"}));
  sub->add_flag("--json", e.json, "print JSON");
  return {sub, [&e](const gf::app::GlobalOptions& g, Command&) {
            return gf::app::run_estimate(g, e.task_path, e.engine, e.method, e.json);
          }};
}

Verb declare_task(CLI::App& app, gf::app::TaskCommand& t) {
  auto* task = app.add_subcommand("task", "parameter-grid tasks");
  task->require_subcommand(1);
  auto* task_run = task->add_subcommand("run", "run every job of a task's parameter grid through the queue");
  task_run->add_option("task", t.path, "task file (JSON)")->required();
  task_run->add_option("--engine", t.engine, "apply this engine's arithmetic")
      ->check(CLI::IsMember({"vllm", "sglang"}));
  task_run->add_option("--method", t.method, "the estimate's memory method: weights (default) or seed")
      ->check(CLI::IsMember({"weights", "seed"}));
  add_alloc_options(task_run, t.run.alloc);
  task_run->add_option("-w,--wait", t.run.wait_s, "seconds each job waits for GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 31536000.0));
  task_run->add_option("-n,--interval", t.run.interval_s, "seconds between GPU samples")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  task_run->add_option("--docker", t.run.docker_image, "run in this image through the Docker engine");
  task_run->add_option("command", t.run.argv, "the command (after --); {tp-size}-style placeholders are replaced");
  task_run->footer(
      "Usage: gpufleet task run TASK.json [OPTIONS] -- CMD [ARGS...]\n--gpus and --min-memory-mb default to each "
      "job's estimate.");
  return {task,
          [&t, task_run](const gf::app::GlobalOptions& g, Command& command) {
            t.run.argv.insert(t.run.argv.end(), command.begin(), command.end());
            t.min_memory_given = task_run->count("--min-memory-mb") > 0;
            if (task_run->count("--gpus") > 0) {
              gf::app::print_error(
                  "task run: the GPU count comes from each job's estimate (tp × pp × …); --gpus is not taken");
              return gf::app::kExitUsage;
            }
            return gf::app::run_task(g, t);
          },
          true};
}

Verb declare_jobs(CLI::App& app, JobsArgs& j) {
  auto* sub = app.add_subcommand("jobs", "recorded job runs, newest first");
  sub->add_flag("--json", j.json, "print JSON");
  sub->add_option("--db", j.db, "the node store");
  return {sub, [&j](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_jobs(g, j.json, j.db); }};
}

Verb declare_serve(CLI::App& app, gf::app::ServeCommand& s) {
  auto* sub = app.add_subcommand(
      "serve", "the node agent: REST API, WebSocket live updates, /metrics, history, alerts, dashboard");
  sub->add_option("--listen", s.listen,
                  "HOST:PORT to listen on (default 127.0.0.1:9401; 0.0.0.0:9401 for every interface)");
  sub->add_option("--interval", s.interval_s, "seconds between collections (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  sub->add_option("--node-name", s.node_name, "the name that labels everything served (default: the hostname)");
  sub->add_option("--config", s.config, "JSON config file (alerts, history retention, limits, …; see README)")
      ->check(CLI::ExistingFile);
  sub->add_option("--static", s.static_dir,
                  "the dashboard's directory (default: PREFIX/share/gpufleet/web for PREFIX/bin/gpufleet, "
                  "else the source tree's web/dist)");
  sub->add_option("--db", s.db,
                  "the store: leases, jobs, history, alerts (default: GPUFLEET_DB or the state directory)");
  sub->add_option("--token-file", s.token_file,
                  "bearer token for state-changing requests (created on first start; GPUFLEET_TOKEN wins)");
  sub->add_flag("--auth-read", s.auth_read, "require the token for reads too");
  sub->add_option("--read-token-file", s.read_token_file,
                  "with --auth-read: a second token, for reads only (created on first start)");
  sub->add_flag("--no-history", s.no_history, "keep no history");
  sub->add_option("--max-ws-clients", s.max_ws_clients, "WebSocket connections at most (default 1024)")
      ->check(CLI::Range(1u, 100000u));
  sub->add_option("--allow-origin", s.allow_origins,
                  "a WebSocket Origin allowed besides the agent's own address (repeatable)");
  sub->add_option("--allow-host", s.allow_hosts,
                  "a host name clients may reach the agent by, besides IP addresses, localhost and this "
                  "machine's name; other Host headers get 421 (repeatable)");
  sub->add_option("--socket", s.socket,
                  "the agent socket for every user's CLI (default: /run/gpufleet/agent.sock as root; none: no "
                  "socket)");
  sub->add_option("--max-jobs-per-user", s.max_jobs_per_user,
                  "job records one user keeps (default 10000; the oldest finished ones make room; 0: no cap; "
                  "root and the admin group: none)");
  sub->add_option("--job-retention", s.job_retention,
                  "how long a finished job's record is kept after it was last written (default 90d; 0: for ever)");
  sub->add_option("--port-file", s.port_file, "write the port listened on to this file once listening");
  sub->add_option("--cluster-config", s.cluster_config,
                  "fleet sources (JSON, as cluster --config): adds /api/v1/cluster/nodes, gpus, select; the "
                  "source options below do the same and win over the file")
      ->check(CLI::ExistingFile);
  add_fleet_source_options(sub, s.fleet, "Fleet view");
  sub->add_option("--fallback", s.fleet.fallback,
                  "fleet view: the default fallback of /api/v1/cluster/select (none or least-loaded)")
      ->check(CLI::IsMember({"none", "least-loaded"}))
      ->group("Fleet view");
  return {sub, [&s](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_serve(g, s); }};
}

constexpr const char* kClusterFooter =
    R"(Sources (any combination): Kubernetes (--kubeconfig FILE, --context NAME, --in-cluster: GPU capacity,
allocatable, requested, Ready, cordoned), Prometheus (--prometheus URL: dcgm-exporter metrics) and gpufleet
agents (--agents FILE, --agent URL). --config FILE holds the same settings as JSON; the command line wins.
When no source is named at all, the kubeconfig kubectl would use ($KUBECONFIG, ~/.kube/config, or the
service account in a pod) is used if there is one; otherwise the command says which options to give.
`place` without --apply and with --no-gpu-selection needs no source.)";
constexpr const char* kFallbackHelp =
    "when no node has enough idle GPUs: none (no pin, default) or "
    "least-loaded (the least-loaded node with enough free GPUs)";

// One `cluster` verb with the options they all share.
CLI::App* add_cluster_verb(CLI::App* cluster, gf::app::ClusterCommand& c, const char* name, const char* help) {
  auto* sub = cluster->add_subcommand(name, help);
  sub->add_option("--config", c.config, "JSON file with the same settings (see README, Fleet)")
      ->check(CLI::ExistingFile);
  add_fleet_source_options(sub, c);
  sub->add_flag("--json", c.json, "print JSON");
  sub->callback([&c, name] { c.verb = name; });
  return sub;
}

void declare_cluster_select(CLI::App* cluster, gf::app::ClusterCommand& c) {
  auto* cluster_select =
      add_cluster_verb(cluster, c, "select",
                       "the node a job of N GPUs should go to, with the reasoning (exit 75: none qualifies; 1: "
                       "Kubernetes did not answer)");
  cluster_select->add_option("-g,--gpus", c.gpus, "GPUs the job needs")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  cluster_select->add_option("--fallback", c.fallback, kFallbackHelp)->check(CLI::IsMember({"none", "least-loaded"}));
  cluster_select
      ->add_option("--gpu-resource", c.gpu_resource,
                   "only nodes whose GPUs are this Kubernetes resource: nvidia.com/gpu, amd.com/gpu or any (default)")
      ->check(CLI::IsMember({"nvidia.com/gpu", "amd.com/gpu", "any"}));
}

void declare_cluster_place(CLI::App* cluster, gf::app::ClusterCommand& c) {
  auto* cluster_place =
      add_cluster_verb(cluster, c, "place",
                       "pin a Kubernetes manifest (InferenceService, Deployment, StatefulSet, Job, Pod) to the "
                       "node selection chooses; print it or --apply it");
  cluster_place
      ->add_option("-f,--filename", c.manifest, "the manifest: YAML (several documents allowed) or JSON; - reads stdin")
      ->required();
  cluster_place
      ->add_option("-g,--gpus", c.place_gpus,
                   "GPUs per pod (default: the manifest's GPU resources, else tp × pp × "
                   "max(dp, cp, dcp) of its parallel sizes, else 1)")
      ->check(CLI::Range(1u, 4096u));
  cluster_place->add_flag("--apply", c.apply,
                          "create or update each document through the API server (server-side apply)");
  cluster_place->add_flag("--no-gpu-selection", c.no_gpu_selection,
                          "ask no fleet source and pin nothing: the Kubernetes scheduler decides");
  cluster_place->add_option("--fallback", c.fallback, kFallbackHelp)->check(CLI::IsMember({"none", "least-loaded"}));
  cluster_place->add_option("-o,--output", c.output, "write the manifest to this file instead of stdout");
  cluster_place->add_option("-n,--namespace", c.namespace_name,
                            "namespace of documents that name none (default: the "
                            "kubeconfig context's); a document naming another one is an error");
  cluster_place->footer(
      "Usage: gpufleet cluster place -f MANIFEST [--gpus N] [--apply] [--no-gpu-selection] [source options]\n"
      "The manifest goes to stdout (or -o FILE); the reasoning goes to stderr. When selection fails the\n"
      "manifest goes through unpinned, the reason is printed and the exit status is 0.");
}

Verb declare_cluster(CLI::App& app, gf::app::ClusterCommand& c) {
  auto* cluster = app.add_subcommand("cluster",
                                     "the fleet through Kubernetes, Prometheus and gpufleet agents: nodes, GPUs, "
                                     "node selection, manifests pinned to a node");
  cluster->require_subcommand(1);
  cluster->footer(kClusterFooter);
  add_cluster_verb(
      cluster, c, "nodes",
      "per node: total, allocatable, requested, free and idle GPUs, utilization, health, and where each came from");
  add_cluster_verb(cluster, c, "gpus", "every GPU with metrics, and the nodes without");
  declare_cluster_select(cluster, c);
  declare_cluster_place(cluster, c);
  return {cluster, [&c](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_cluster(g, c); }};
}

Verb declare_show(CLI::App& app, ShowArgs& s) {
  auto* sub = app.add_subcommand("show", "one recorded job run: GPUs, why they were chosen, what they did");
  sub->add_option("job", s.job_id, "job id (see gpufleet jobs)")->required();
  sub->add_flag("--json", s.json, "print JSON");
  sub->add_option("--db", s.db, "the node store");
  return {sub,
          [&s](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_show(g, s.job_id, s.json, s.db); }};
}

Verb declare_health(CLI::App& app, gf::app::HealthClearCommand& h) {
  auto* health = app.add_subcommand("health", "GPU health through the node's agent: clear the XIDs recorded on a GPU");
  health->require_subcommand(1);
  auto* clear = health->add_subcommand(
      "clear",
      "clear the XIDs recorded on GPU (after a reset), as dcgmi health --clear: the GPU is healthy again unless it is "
      "lost or a row remap failed (state, read anew). Needs the agent's write token ($GPUFLEET_TOKEN or the token "
      "file)");
  clear->add_option("gpu", h.gpu, "the GPU's index or UUID")->required();
  clear->add_option("--agent", h.agent, "the agent's base URL (default http://127.0.0.1:9401)");
  clear->add_option("--token-file", h.token_file,
                    "file holding the agent's write token (default: agent.token beside the node store)");
  clear->add_option("--note", h.note, "why, in the agent's log (at most 200 bytes)");
  clear->add_flag("--json", h.json, "print the agent's answer (JSON)");
  return {health, [&h](const gf::app::GlobalOptions& g, Command&) { return gf::app::run_health_clear(g, h); }};
}

// Everything after the first "--" is the command of monitor, run or task run, untouched by option parsing
// (CMD may have options of its own, such as python -u). Returns the arguments before it, reversed as
// CLI11 takes them.
std::vector<std::string> split_command(int argc, char** argv, Command& command) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto dd = std::find(args.begin(), args.end(), "--"); dd != args.end()) {
    command.assign(dd + 1, args.end());
    args.erase(dd, args.end());
  }
  std::reverse(args.begin(), args.end());
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gf::app;
  CLI::App app{"gpufleet: what your GPUs are doing, who is using them, and what they did while a job ran"};
  app.name("gpufleet");  // parse() gets the arguments without argv[0]
  app.footer("Backends: auto-detection tries " + gf::backends::auto_detection_order() + kFooter);
  app.set_version_flag("--version", std::string("gpufleet ") + GF_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options are accepted after the verb too

  GlobalOptions g;
  declare_global_options(app, g);
  // Each verb's options; declared in the order the help lists them.
  JsonArgs status_args, ps_args, backends_args, fields_args;
  WatchArgs watch_args;
  MonitorCommand monitor_cmd;
  AllocCommand alloc_cmd;
  ReleaseArgs release_args;
  LeasesArgs leases_args;
  UsageCommand usage_cmd;
  RunCommand run_cmd;
  EstimateArgs estimate_args;
  TaskCommand task_cmd;
  JobsArgs jobs_args;
  ServeCommand serve_cmd;
  ClusterCommand cluster_cmd;
  ShowArgs show_args;
  HealthClearCommand health_cmd;
  const Verb verbs[] = {
      declare_status(app, status_args),  declare_ps(app, ps_args),           declare_backends(app, backends_args),
      declare_fields(app, fields_args),  declare_watch(app, watch_args),     declare_monitor(app, monitor_cmd),
      declare_alloc(app, alloc_cmd),     declare_release(app, release_args), declare_leases(app, leases_args),
      declare_usage(app, usage_cmd),     declare_run(app, run_cmd),          declare_estimate(app, estimate_args),
      declare_task(app, task_cmd),       declare_jobs(app, jobs_args),       declare_serve(app, serve_cmd),
      declare_cluster(app, cluster_cmd), declare_show(app, show_args),       declare_health(app, health_cmd),
  };

  Command command;
  std::vector<std::string> args = split_command(argc, argv, command);
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gpufleet: %s\nRun 'gpufleet --help' for usage.\n", e.what());
    return kExitUsage;
  }

  try {
    for (const Verb& v : verbs) {
      if (!*v.sub) continue;
      if (!command.empty() && !v.takes_command) {
        print_error("unexpected arguments after '--' (only monitor and run take a command)");
        return kExitUsage;
      }
      return v.run(g, command);
    }
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitError;
  }
  return kExitUsage;
}
