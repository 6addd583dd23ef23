// gpufleet: one binary, one verb per job. Command-line parsing lives here alone (CLI11 is heavy to
// compile); the verbs are in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

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
GPUFLEET_PROC_ROOT, GPUFLEET_SIM_SCENARIO, GPUFLEET_DB (the node store), GPUFLEET_SOCKET, DOCKER_HOST, NO_COLOR.

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

  bool json = false;
  auto* status = app.add_subcommand("status", "one line per GPU: load, memory, power, processes");
  status->add_flag("--json", json, "print the document GET /api/v1/monitoring/gpu-metrics serves");

  auto* ps = app.add_subcommand("ps", "processes on the GPUs, biggest memory first: who is using what");
  ps->add_flag("--json", json, "print JSON");

  auto* backends = app.add_subcommand("backends", "which GPU backends are usable here, and which one is chosen");
  backends->add_flag("--json", json, "print JSON");

  auto* fields =
      app.add_subcommand("fields", "the GPU metrics gpufleet reports: key, unit, Prometheus name, history name");
  fields->add_flag("--json", json, "print the document GET /api/v1/fields serves");

  double watch_interval = 1.0;
  unsigned watch_count = 0;
  auto* watch = app.add_subcommand("watch", "live view, refreshed in place");
  watch->add_option("-n,--interval", watch_interval, "seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  watch->add_option("--count", watch_count, "stop after this many refreshes (default: until Ctrl-C)");

  MonitorCommand mon;
  auto* monitor = app.add_subcommand("monitor", "run a command, sample the GPUs while it runs, print what they did");
  monitor->footer("Usage: gpufleet monitor [OPTIONS] -- CMD [ARGS...]");
  monitor->add_option("-n,--interval", mon.interval_s, "seconds between samples (0.05 to 60)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  monitor->add_flag("--json", mon.json, "print the statistics as JSON on stdout (CMD's output shares stdout)");
  monitor->add_option("-o,--output", mon.output, "write the JSON statistics to this file");
  monitor->add_flag("--no-series", mon.no_series, "leave the time series out of the JSON");
  monitor->add_option("--gpus", mon.gpus, "report only these GPU indices")->delimiter(',');
  monitor->add_option("command", mon.argv, "the command to run (put it after --)");

  // Everything after the first "--" is monitor's command, untouched by option parsing (CMD may have
  // options of its own, such as python -u).
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> command;
  if (auto dd = std::find(args.begin(), args.end(), "--"); dd != args.end()) {
    command.assign(dd + 1, args.end());
    args.erase(dd, args.end());
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector

  auto alloc_options = [](CLI::App* sub, AllocCommand& a) {
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
  };
  AllocCommand alloc_cmd;
  auto* alloc = app.add_subcommand("alloc", "lease GPUs for the calling shell: eval \"$(gpufleet alloc --gpus 2)\"");
  alloc_options(alloc, alloc_cmd);
  alloc->add_flag("--json", alloc_cmd.json, "print the lease as JSON");

  std::string lease_id, db;
  auto* release = app.add_subcommand("release", "end a lease");
  release->add_option("lease", lease_id, "lease id (see gpufleet leases)")->required();
  release->add_option("--db", db, "the node store");

  bool all = false;
  auto* leases = app.add_subcommand("leases", "active GPU leases and the jobs waiting for GPUs");
  leases->add_flag("--json", json, "print JSON");
  leases->add_flag("--all", all, "ended leases too");
  leases->add_option("--db", db, "the node store");

  UsageCommand usage_cmd;
  auto* usage =
      app.add_subcommand("usage", "GPU accounting per user or job: GPU-hours held and busy, energy, peak memory");
  usage->add_option("--since", usage_cmd.since, "leases held since this long ago (90s, 15m, 2h, 7d; default 7d)");
  usage->add_option("--by", usage_cmd.by, "user or job (default user)");
  usage->add_flag("--json", usage_cmd.json, "print the document GET /api/v1/usage serves");
  usage->add_option("--agent", usage_cmd.agent, "ask this agent (http://host:port) instead of reading the node store");
  usage->add_option("--db", usage_cmd.db, "the node store");

  RunCommand run_cmd;
  auto* run = app.add_subcommand("run", "wait for GPUs, run a command on them, sample, release, record");
  alloc_options(run, run_cmd.alloc);
  run->add_option("-w,--wait", run_cmd.wait_s, "seconds to wait for GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 31536000.0));
  run->add_option("-p,--priority", run_cmd.priority, "higher goes first; first come first served within a priority");
  run->add_option("-n,--interval", run_cmd.interval_s, "seconds between GPU samples (0.05 to 60)")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  run->add_option("--docker", run_cmd.docker_image,
                  "run CMD in this image through the Docker engine (GPUs via DeviceRequests)");
  run->add_option("--volume", run_cmd.docker_volumes,
                  "with --docker: bind-mount HOST:CONTAINER[:ro] (absolute paths), as docker run -v; repeatable");
  run->add_option("--publish", run_cmd.docker_publish,
                  "with --docker: publish [IP:]HOST_PORT:CONTAINER_PORT, as docker run -p; repeatable");
  run->add_flag("--json", run_cmd.alloc.json, "print the job record as JSON when it ends");
  run->add_option("command", run_cmd.argv, "the command (put it after --)");
  run->footer(
      "Usage: gpufleet run --gpus N [OPTIONS] -- CMD [ARGS...]\nExit status: CMD's; 75 when the GPUs did not come "
      "within --wait.");

  std::string task_path, engine, estimate_method = "weights";
  auto* estimate =
      app.add_subcommand("estimate", "how many GPUs and how much memory a task needs, with the arithmetic");
  estimate->add_option("task", task_path, "task file (JSON: model.id_or_path, parameters, engine)")->required();
  estimate->add_option("--engine", engine, "apply this engine's arithmetic")->check(CLI::IsMember({"vllm", "sglang"}));
  estimate
      ->add_option("--method", estimate_method,
                   "weights: from the model's size (gpufleet's; default); seed: the seed's table (70B/65B → "
                   "20000, 13B/7B → 12000, otherwise 8000 MiB per GPU), for tasks tuned to the seed's numbers")
      ->check(CLI::IsMember({"weights", "seed"}));
  estimate->add_flag("--json", json, "print JSON");

  TaskCommand task_cmd;
  auto* task = app.add_subcommand("task", "parameter-grid tasks");
  task->require_subcommand(1);
  auto* task_run = task->add_subcommand("run", "run every job of a task's parameter grid through the queue");
  task_run->add_option("task", task_cmd.path, "task file (JSON)")->required();
  task_run->add_option("--engine", task_cmd.engine, "apply this engine's arithmetic")
      ->check(CLI::IsMember({"vllm", "sglang"}));
  task_run->add_option("--method", task_cmd.method, "the estimate's memory method: weights (default) or seed")
      ->check(CLI::IsMember({"weights", "seed"}));
  alloc_options(task_run, task_cmd.run.alloc);
  task_run->add_option("-w,--wait", task_cmd.run.wait_s, "seconds each job waits for GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 31536000.0));
  task_run->add_option("-n,--interval", task_cmd.run.interval_s, "seconds between GPU samples")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  task_run->add_option("--docker", task_cmd.run.docker_image, "run in this image through the Docker engine");
  task_run->add_option("command", task_cmd.run.argv,
                       "the command (after --); {tp-size}-style placeholders are replaced");
  task_run->footer(
      "Usage: gpufleet task run TASK.json [OPTIONS] -- CMD [ARGS...]\n--gpus and --min-memory-mb default to each "
      "job's estimate.");

  auto* jobs = app.add_subcommand("jobs", "recorded job runs, newest first");
  jobs->add_flag("--json", json, "print JSON");
  jobs->add_option("--db", db, "the node store");

  std::string job_id;
  ServeCommand serve_cmd;
  auto* serve = app.add_subcommand(
      "serve", "the node agent: REST API, WebSocket live updates, /metrics, history, alerts, dashboard");
  serve->add_option("--listen", serve_cmd.listen,
                    "HOST:PORT to listen on (default 127.0.0.1:9401; 0.0.0.0:9401 for every interface)");
  serve->add_option("--interval", serve_cmd.interval_s, "seconds between collections (default 1)")
      ->check(CLI::Range(0.05, 3600.0));
  serve->add_option("--node-name", serve_cmd.node_name,
                    "the name that labels everything served (default: the hostname)");
  serve->add_option("--config", serve_cmd.config, "JSON config file (alerts, history retention, limits, …; see README)")
      ->check(CLI::ExistingFile);
  serve->add_option("--static", serve_cmd.static_dir,
                    "the dashboard's directory (default: PREFIX/share/gpufleet/web for PREFIX/bin/gpufleet, "
                    "else the source tree's web/dist)");
  serve->add_option("--db", serve_cmd.db,
                    "the store: leases, jobs, history, alerts (default: GPUFLEET_DB or the state directory)");
  serve->add_option("--token-file", serve_cmd.token_file,
                    "bearer token for state-changing requests (created on first start; GPUFLEET_TOKEN wins)");
  serve->add_flag("--auth-read", serve_cmd.auth_read, "require the token for reads too");
  serve->add_option("--read-token-file", serve_cmd.read_token_file,
                    "with --auth-read: a second token, for reads only (created on first start)");
  serve->add_flag("--no-history", serve_cmd.no_history, "keep no history");
  serve->add_option("--max-ws-clients", serve_cmd.max_ws_clients, "WebSocket connections at most (default 1024)")
      ->check(CLI::Range(1u, 100000u));
  serve->add_option("--allow-origin", serve_cmd.allow_origins,
                    "a WebSocket Origin allowed besides the agent's own address (repeatable)");
  serve->add_option("--allow-host", serve_cmd.allow_hosts,
                    "a host name clients may reach the agent by, besides IP addresses, localhost and this "
                    "machine's name; other Host headers get 421 (repeatable)");
  serve->add_option("--socket", serve_cmd.socket,
                    "the agent socket for every user's CLI (default: /run/gpufleet/agent.sock as root; none: no "
                    "socket)");
  serve->add_option("--max-jobs-per-user", serve_cmd.max_jobs_per_user,
                    "job records one user keeps (default 10000; the oldest finished ones make room; 0: no cap; "
                    "root and the admin group: none)");
  serve->add_option("--job-retention", serve_cmd.job_retention,
                    "how long a finished job's record is kept after it was last written (default 90d; 0: for ever)");
  serve->add_option("--port-file", serve_cmd.port_file, "write the port listened on to this file once listening");
  serve
      ->add_option("--cluster-config", serve_cmd.cluster_config,
                   "fleet sources (JSON, as cluster --config): adds /api/v1/cluster/nodes, gpus, select; the "
                   "source options below do the same and win over the file")
      ->check(CLI::ExistingFile);
  add_fleet_source_options(serve, serve_cmd.fleet, "Fleet view");
  serve
      ->add_option("--fallback", serve_cmd.fleet.fallback,
                   "fleet view: the default fallback of /api/v1/cluster/select (none or least-loaded)")
      ->check(CLI::IsMember({"none", "least-loaded"}))
      ->group("Fleet view");

  constexpr const char* kClusterFooter =
      R"(Sources (any combination): Kubernetes (--kubeconfig FILE, --context NAME, --in-cluster: GPU capacity,
allocatable, requested, Ready, cordoned), Prometheus (--prometheus URL: dcgm-exporter metrics) and gpufleet
agents (--agents FILE, --agent URL). --config FILE holds the same settings as JSON; the command line wins.
When no source is named at all, the kubeconfig kubectl would use ($KUBECONFIG, ~/.kube/config, or the
service account in a pod) is used if there is one; otherwise the command says which options to give.
`place` without --apply and with --no-gpu-selection needs no source.)";
  ClusterCommand cluster_cmd;
  auto* cluster = app.add_subcommand("cluster",
                                     "the fleet through Kubernetes, Prometheus and gpufleet agents: nodes, GPUs, "
                                     "node selection, manifests pinned to a node");
  cluster->require_subcommand(1);
  cluster->footer(kClusterFooter);
  auto cluster_verb = [&](const char* name, const char* help) {
    auto* sub = cluster->add_subcommand(name, help);
    sub->add_option("--config", cluster_cmd.config, "JSON file with the same settings (see README, Fleet)")
        ->check(CLI::ExistingFile);
    add_fleet_source_options(sub, cluster_cmd);
    sub->add_flag("--json", cluster_cmd.json, "print JSON");
    sub->callback([&cluster_cmd, name] { cluster_cmd.verb = name; });
    return sub;
  };
  constexpr const char* kFallbackHelp =
      "when no node has enough idle GPUs: none (no pin, default) or "
      "least-loaded (the least-loaded node with enough free GPUs)";
  cluster_verb(
      "nodes",
      "per node: total, allocatable, requested, free and idle GPUs, utilization, health, and where each came from");
  cluster_verb("gpus", "every GPU with metrics, and the nodes without");
  auto* cluster_select =
      cluster_verb("select",
                   "the node a job of N GPUs should go to, with the reasoning (exit 75: none qualifies; 1: "
                   "Kubernetes did not answer)");
  cluster_select->add_option("-g,--gpus", cluster_cmd.gpus, "GPUs the job needs")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  cluster_select->add_option("--fallback", cluster_cmd.fallback, kFallbackHelp)
      ->check(CLI::IsMember({"none", "least-loaded"}));
  cluster_select
      ->add_option("--gpu-resource", cluster_cmd.gpu_resource,
                   "only nodes whose GPUs are this Kubernetes resource: nvidia.com/gpu, amd.com/gpu or any (default)")
      ->check(CLI::IsMember({"nvidia.com/gpu", "amd.com/gpu", "any"}));
  auto* cluster_place =
      cluster_verb("place",
                   "pin a Kubernetes manifest (InferenceService, Deployment, StatefulSet, Job, Pod) to the "
                   "node selection chooses; print it or --apply it");
  cluster_place
      ->add_option("-f,--filename", cluster_cmd.manifest,
                   "the manifest: YAML (several documents allowed) or JSON; - reads stdin")
      ->required();
  cluster_place
      ->add_option("-g,--gpus", cluster_cmd.place_gpus,
                   "GPUs per pod (default: the manifest's GPU resources, else tp × pp × "
                   "max(dp, cp, dcp) of its parallel sizes, else 1)")
      ->check(CLI::Range(1u, 4096u));
  cluster_place->add_flag("--apply", cluster_cmd.apply,
                          "create or update each document through the API server (server-side apply)");
  cluster_place->add_flag("--no-gpu-selection", cluster_cmd.no_gpu_selection,
                          "ask no fleet source and pin nothing: the Kubernetes scheduler decides");
  cluster_place->add_option("--fallback", cluster_cmd.fallback, kFallbackHelp)
      ->check(CLI::IsMember({"none", "least-loaded"}));
  cluster_place->add_option("-o,--output", cluster_cmd.output, "write the manifest to this file instead of stdout");
  cluster_place->add_option("-n,--namespace", cluster_cmd.namespace_name,
                            "namespace of documents that name none (default: the "
                            "kubeconfig context's); a document naming another one is an error");
  cluster_place->footer(
      "Usage: gpufleet cluster place -f MANIFEST [--gpus N] [--apply] [--no-gpu-selection] [source options]\n"
      "The manifest goes to stdout (or -o FILE); the reasoning goes to stderr. When selection fails the\n"
      "manifest goes through unpinned, the reason is printed and the exit status is 0.");

  auto* show = app.add_subcommand("show", "one recorded job run: GPUs, why they were chosen, what they did");
  show->add_option("job", job_id, "job id (see gpufleet jobs)")->required();
  show->add_flag("--json", json, "print JSON");
  show->add_option("--db", db, "the node store");

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
    if (!command.empty() && !*monitor && !*run && !*task_run) {
      print_error("unexpected arguments after '--' (only monitor and run take a command)");
      return kExitUsage;
    }
    if (*status) return run_status(g, json);
    if (*ps) return run_ps(g, json);
    if (*backends) return run_backends(g, json);
    if (*fields) return run_fields(json);
    if (*watch) return run_watch(g, watch_interval, watch_count);
    if (*alloc) return run_alloc(g, alloc_cmd);
    if (*release) return run_release(g, lease_id, db);
    if (*leases) return run_leases(g, json, all, db);
    if (*jobs) return run_jobs(g, json, db);
    if (*usage) return run_usage(g, usage_cmd);
    if (*estimate) return run_estimate(g, task_path, engine, estimate_method, json);
    if (*task_run) {
      task_cmd.run.argv.insert(task_cmd.run.argv.end(), command.begin(), command.end());
      task_cmd.min_memory_given = task_run->count("--min-memory-mb") > 0;
      if (task_run->count("--gpus") > 0) {
        print_error("task run: the GPU count comes from each job's estimate (tp × pp × …); --gpus is not taken");
        return kExitUsage;
      }
      return run_task(g, task_cmd);
    }
    if (*serve) return run_serve(g, serve_cmd);
    if (*cluster) return run_cluster(g, cluster_cmd);
    if (*show) return run_show(g, job_id, json, db);
    if (*run) {
      run_cmd.argv.insert(run_cmd.argv.end(), command.begin(), command.end());
      return run_job(g, run_cmd);
    }
    if (*monitor) {
      mon.argv.insert(mon.argv.end(), command.begin(), command.end());
      return run_monitor(g, mon);
    }
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitError;
  }
  return kExitUsage;
}
