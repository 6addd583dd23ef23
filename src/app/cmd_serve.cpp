// gpufleet serve: the node agent. Wires the monitor, the collection loop (node::Agent), the stores, the
// WebSocket hub, the REST routes and the HTTP server together, and runs until SIGINT/SIGTERM.
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/cmd_cluster.hpp"
#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/job_service.hpp"
#include "app/kube_source.hpp"
#include "app/serve_config.hpp"
#include "app/serve_usage.hpp"
#include "cluster/fleet_refresher.hpp"
#include "node/agent.hpp"
#include "node/arbiter.hpp"
#include "platform/fs.hpp"
#include "sampler/hub.hpp"
#include "server/agent_socket.hpp"
#include "server/api.hpp"
#include "server/api_cluster.hpp"
#include "server/http_server.hpp"
#include "server/security.hpp"
#include "server/socketio.hpp"
#include "server/ws_hub.hpp"
#include "store/checkpointer.hpp"
#include "store/history.hpp"
#include "store/node_store.hpp"
#include "wire/alert_json.hpp"

namespace gf::app {
namespace {

namespace fs = std::filesystem;

// 1 000 WebSocket clients need more descriptors than the usual soft limit of 1 024.
void raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// The dashboard next to the binary: <prefix>/share/gpufleet/web when installed, else the source
// tree's web/dist (build/gpufleet → web/dist).
std::string default_static_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& cand :
       {exe.parent_path().parent_path() / "share/gpufleet/web", exe.parent_path().parent_path() / "web/dist"})
    if (fs::exists(cand / "index.html", ec)) return cand.string();
  return {};
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

// The readers' token (--read-token-file, with --auth-read): reads over HTTP, /ws and Socket.IO, never a
// change. Empty when none is configured.
Result<std::string> load_read_token(const ServeConfig& c) {
  if (c.read_token_file.empty()) return std::string();  // (serve_config: only with auth_read)
  bool created = false;
  auto token = server::load_or_create_token_file(c.read_token_file, &created);
  if (!token) return make_error(token.error().kind, token.error().message + " (--read-token-file)");
  if (created)
    std::fprintf(stderr, "gpufleet: created the read-only token in %s:\n  %s\n", c.read_token_file.c_str(),
                 token->c_str());
  return token;
}

}  // namespace

int run_serve(const GlobalOptions& g, const ServeCommand& cmd) {
  auto cfg = load_serve_config(cmd);
  if (!cfg) {
    print_error(cfg.error().message);
    return kExitUsage;
  }
  ServeConfig& c = *cfg;
  // The fleet view: --cluster-config and/or the cluster verbs' source options (which win over the file).
  ClusterCommand fleet_cmd = cmd.fleet;
  fleet_cmd.config = cmd.cluster_config;
  auto fleet_sources = serve_fleet_sources(fleet_cmd, KubeEnvironment::from_process());
  if (!fleet_sources) {
    print_error(fleet_sources.error().message);
    return kExitUsage;
  }
  if (c.node_name.empty()) c.node_name = hostname();
  if (c.static_dir.empty()) c.static_dir = default_static_dir();
  if (c.db.empty()) c.db = store::default_db_path();
  if (c.token_file.empty()) c.token_file = (fs::path(c.db).parent_path() / "agent.token").string();

  Context ctx = open_context(g, /*listen_for_events=*/true);
  if (report_unusable_backend(ctx)) return kExitNoBackend;
  raise_fd_limit();

  // WAL checkpoints on a thread of their own (store/checkpointer.hpp), so that no lease, release or
  // history batch waits for the disk; started before the stores open their connections. When it
  // cannot start, the store's own open says why and the connections checkpoint as SQLite does.
  std::unique_ptr<store::WalCheckpointer> checkpointer;
  if (auto ck = store::WalCheckpointer::start(c.db)) checkpointer = std::move(*ck);

  // The stores: leases/jobs and history share one SQLite file (WAL); history has a writer connection
  // (the batch thread) and a reader (requests).
  server::ApiContext api;
  std::unique_ptr<node::NodeJobs> jobs;
  std::unique_ptr<store::HistoryStore> history, history_reader;
  if (auto st = store::NodeStore::open(c.db)) {
    jobs = std::make_unique<node::NodeJobs>(std::move(*st), *ctx.monitor);
  } else {
    api.store_error = st.error().message;
    print_error("the store is not usable (" + st.error().message + "): leases and jobs are not served");
  }
  if (jobs && c.history) {
    auto w = store::HistoryStore::open(c.db, c.history_options);
    if (!w) {
      print_error("history is not kept: " + w.error().message);
    } else if (auto r = store::HistoryStore::open(c.db, c.history_options); !r) {
      print_error("history is not kept: " + r.error().message);
    } else {
      history = std::move(*w);
      history_reader = std::move(*r);
    }
  }

  bool created = false;
  auto token = server::load_or_create_token(c.token_file, &created);
  if (!token) {
    print_error(token.error().message + " (set GPUFLEET_TOKEN or --token-file)");
    return exit_code(token.error());
  }
  if (created)
    std::fprintf(stderr, "gpufleet: created the API token for state-changing requests in %s:\n  %s\n",
                 c.token_file.c_str(), token->c_str());
  auto read_token = load_read_token(c);
  if (!read_token) {
    print_error(read_token.error().message);
    return exit_code(read_token.error());
  }

  sampler::SampleHub hub(*ctx.monitor);
  node::AgentOptions ao;
  ao.interval = c.interval;
  ao.node_name = c.node_name;
  ao.alert_rules = c.alert_rules;
  node::Agent agent(*ctx.monitor, hub, std::move(history), std::move(history_reader), ao);
  server::WsHub ws(agent, hub, c.ws);
  agent.on_alerts([&ws](const std::vector<core::AlertEvent>& events) { ws.broadcast_alerts(events); });

  // The node's arbiter: the one writer of leases, the queue and job records while the agent runs. It
  // decides only on the loop's published reading, never on a driver query of its own: with a slow
  // nvidia-smi, requests wait for the loop's next reading instead of every request waiting on the driver.
  std::unique_ptr<node::Arbiter> arbiter;
  if (jobs) {
    if (auto st = store::NodeStore::open(c.db); !st) {
      print_error("the arbiter cannot open the store (" + st.error().message + "): no agent socket");
    } else {
      node::ReadingSource rs;
      rs.latest = [&agent]() -> std::pair<core::SnapshotPtr, std::chrono::steady_clock::time_point> {
        auto p = agent.latest();
        if (!p) return {nullptr, {}};
        return {p->snapshot, p->taken};
      };
      if (auto t = ctx.monitor->topology(); t) rs.topology = std::move(*t);
      node::ArbiterOptions ao2;
      ao2.max_user_priority = c.max_user_priority;
      ao2.max_gpus_per_user = c.max_gpus_per_user;
      // Leases themselves come from the store under the arbiter's lock; the reading only says how
      // loaded the GPUs are from outside gpufleet, for which a few seconds is recent enough. A loop
      // that has published nothing for that long has a driver that is slow or not answering.
      ao2.reading_max_age = std::max(2 * c.interval, std::chrono::milliseconds(5000));
      ao2.recheck = std::max(c.interval, std::chrono::milliseconds(250));  // the queue meets each new reading
      ao2.max_jobs_per_user = c.max_jobs_per_user;
      ao2.job_retention = c.job_retention;
      arbiter = std::make_unique<node::Arbiter>(std::move(*st), std::move(rs), ao2);
      if (auto r = arbiter->recover(); !r)
        print_error("cannot recover the leases of the previous run: " + r.error().message);
      else if (*r > 0)
        std::fprintf(stderr, "gpufleet: ended %zu lease(s) of the previous run\n", *r);
      if (auto p = arbiter->prune_jobs(); !p)
        print_error("cannot prune old job records: " + p.error().message);
      else if (*p > 0)
        std::fprintf(stderr, "gpufleet: pruned %zu finished job record(s) past the retention\n", *p);
    }
  }

  // Per-lease accounting and idle-lease reclaim, fed by the same collections as the agent.
  std::unique_ptr<node::UsageLedger> usage =
      jobs ? make_usage_ledger(c, *jobs, arbiter.get(),
                               [&ws](std::string_view event, const std::string& lease, const std::string& message) {
                                 ws.broadcast(event, {{"lease", lease}, {"message", message}});
                               })
           : nullptr;
  sampler::SampleHub::Subscription usage_sub;

  // Jobs submitted over HTTP (POST /api/v1/jobs), when the config allows them; before the routes, after
  // the arbiter, so it goes first at shutdown (its jobs' containers are stopped, their leases released).
  std::unique_ptr<JobService> submitted;
  if (c.jobs_submit) {
    if (!arbiter) {
      print_error("job submission needs the node store: POST /api/v1/jobs is off");
    } else {
      JobService::Options jo;
      jo.max_in_flight = c.jobs_max_in_flight;
      jo.sample_interval = c.interval;
      jo.backend = ctx.monitor->backend_name();
      jo.host = c.node_name;
      submitted = std::make_unique<JobService>(
          *arbiter, hub, [&ws](std::string_view event, const nlohmann::json& data) { ws.broadcast(event, data); },
          std::move(jo));
    }
  }

  api.agent = &agent;
  api.arbiter = arbiter.get();
  api.submitter = submitted.get();
  api.monitor = ctx.monitor.get();
  api.ws = &ws;
  api.jobs = jobs.get();
  api.usage = usage.get();
  api.version = GF_VERSION;
  api.node_name = c.node_name;
  api.started = api.clock->now();
  api.interval = c.interval;
  server::Router router;
  server::add_monitoring_routes(router, api);
  server::add_job_routes(router, api);
  server::add_usage_routes(router, api);
  server::add_meta_routes(router, api);
  // The fleet view: refreshed on its own thread; requests rank the cached facts.
  std::unique_ptr<cluster::FleetRefresher> fleet;
  server::ClusterView cluster_view;
  if (const auto& fsrc = *fleet_sources) {
    fleet = std::make_unique<cluster::FleetRefresher>(*fsrc);
    cluster_view.latest = [f = fleet.get()] { return f->latest(); };
    cluster_view.idle = fsrc->idle;
    cluster_view.fallback = fsrc->fallback;
    cluster_view.max_age = fsrc->max_age;
    cluster_view.sources = fsrc->describe();
    fleet->start();
  }
  server::add_cluster_routes(router, fleet ? &cluster_view : nullptr, *api.clock);

  c.server.token = *token;
  c.server.read_token = *read_token;
  c.server.static_dir = c.static_dir;
  c.server.server_header = std::string("gpufleet/") + GF_VERSION;
  // Socket.IO at /socket.io/: its connected clients are WsHub clients (same cap, periods, alerts).
  server::SioOptions sio_opts;
  sio_opts.max_payload = std::min<std::size_t>(1000000, c.server.body_limit);
  sio_opts.queue = 2 * c.server.ws_queue;  // each update goes under two names
  sio_opts.token_ok = [tokens = server::ReadTokens{*token, *read_token}](std::string_view t) {
    return tokens.token_reads(t);
  };
  server::SocketIo sio(ws, agent, sio_opts);
  server::HttpServer http(router, &ws, c.server, &sio);
  auto port = http.listen();
  if (!port) {
    print_error(port.error().message);
    return exit_code(port.error());
  }
  agent.start();
  if (usage) usage_sub = usage->attach(hub, c.interval);
  std::unique_ptr<server::AgentSocket> agent_socket;
  // $GPUFLEET_SOCKET names the socket for both sides: where the CLI looks and, without --socket, where
  // serve listens ("none" on both: no agent socket, as the tests set it).
  std::string socket_path = c.socket;
  if (auto env = platform::env("GPUFLEET_SOCKET"); socket_path.empty() && env) socket_path = *env;
  if (arbiter && socket_path != "none") {
    server::AgentSocketOptions so;
    so.path = socket_path.empty() ? server::default_agent_socket_path() : socket_path;
    so.version = GF_VERSION;
    so.admin_group = c.admin_group;
    so.auth_read = c.server.auth_read;
    auto sock = server::AgentSocket::start(*arbiter, &router, so);
    if (!sock) {
      print_error(sock.error().message + " (--socket PATH, or --socket none)");
      agent.stop();
      return exit_code(sock.error());
    }
    agent_socket = std::move(*sock);
  }
  if (!cmd.port_file.empty()) {
    // Written whole and renamed into place (a reader never sees half a number), never through a
    // name that someone else could have planted as a link.
    if (auto w = platform::write_file_atomic(cmd.port_file, std::to_string(*port) + "\n", 0644); !w)
      print_error("cannot write the port file: " + w.error().message);
  }
  const auto latest = agent.latest();
  const std::string host = c.server.host.find(':') != std::string::npos ? "[" + c.server.host + "]" : c.server.host;
  std::fprintf(stderr,
               "gpufleet: agent for node %s listening on http://%s:%u (backend %s, %zu GPU(s)%s, every %.3g s)\n",
               c.node_name.c_str(), host.c_str(), static_cast<unsigned>(*port), ctx.monitor->backend_name().c_str(),
               latest ? latest->snapshot->gpus.size() : 0, latest && latest->snapshot->simulated ? ", SIMULATED" : "",
               std::chrono::duration<double>(c.interval).count());
  std::fprintf(stderr, "gpufleet: dashboard %s; API http://%s:%u/api/openapi.json; metrics /metrics; store %s\n",
               c.static_dir.empty() ? "not found (make web, or --static DIR)"
                                    : ("http://" + host + ":" + std::to_string(*port) + "/").c_str(),
               host.c_str(), static_cast<unsigned>(*port), jobs ? c.db.c_str() : "none");
  std::fprintf(stderr, "gpufleet: agent socket %s\n",
               agent_socket ? agent_socket->path().c_str() : (arbiter ? "none (--socket none)" : "none (no store)"));
  std::fflush(stderr);

  http.run(true);     // until SIGINT/SIGTERM: then in-flight requests finish and clients are told
  submitted.reset();  // submitted jobs still in flight: their containers are stopped, their leases released
  if (agent_socket) agent_socket->stop();
  agent.stop();  // the last batch is written
  usage_sub.reset();
  if (usage) usage->flush();  // running leases' rows as they stand
  std::fprintf(stderr, "gpufleet: agent stopped\n");
  return kExitOk;
}

}  // namespace gf::app
