// gpufleet serve: the node agent. Wires the monitor, the collection loop (node::Agent), the stores, the
// node's arbiter, the WebSocket hub, the REST routes and the HTTP server together, and runs until
// SIGINT/SIGTERM. run_serve is its named steps: open_stores, make_agent, make_arbiter, make_routes and
// serve_until_signal, each adding to one ServeRig, whose member order is the shutdown order.
#include <fmt/format.h>
#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

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
#include "node/node_records.hpp"
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

// The pages of the program's and its libraries' read-only segments (code, constants, symbol tables)
// that start-up touched — option parsing, the store's schema, the libraries' relocation — stay mapped,
// and counted in the RSS, for the life of the agent: ~5 MiB of its ~14 at start, of which a steady
// agent touches about one in six again. Once serving, they are let go: the kernel keeps them in its
// page cache, and a page used again is mapped again (a minor fault). Only segments that are never
// written (no PF_W; relocated data lies in the writable ones, RELRO included) are let go, so nothing
// of the process's own state can be lost.
int drop_segment_pages(dl_phdr_info* info, std::size_t, void*) {
  const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (info->dlpi_name != nullptr && std::string_view(info->dlpi_name).find("vdso") != std::string_view::npos)
    return 0;  // the kernel's own page
  for (int k = 0; k < info->dlpi_phnum; ++k) {
    const auto& ph = info->dlpi_phdr[k];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0 || ph.p_memsz == 0) continue;
    const std::uintptr_t begin = (info->dlpi_addr + ph.p_vaddr + page - 1) & ~(page - 1);  // whole pages only
    const std::uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_filesz) & ~(page - 1);
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
  return 0;
}

// Start-up is over (stores open, routes made, the socket listening): what it alone used goes back —
// its read-only pages (drop_segment_pages) and the heap's free memory.
void release_startup_memory() {
  ::dl_iterate_phdr(drop_segment_pages, nullptr);
  ::malloc_trim(0);
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

// Everything the agent runs. Each member uses only those above it, and C++ destroys them bottom-up:
// that IS the shutdown order, after the HTTP server's run has returned (in-flight requests finished,
// WebSocket clients told). Read from the bottom: submitted jobs end (their containers stopped, their
// leases released through the arbiter); the agent socket stops (no client request after it); the
// collection loop stops (its last history batch written) while the HTTP server, Socket.IO and the hub's
// clients still exist; then those go, with the routes and the fleet refresher; the accounting (its
// subscription, then the ledger's last rows); the arbiter, the WebSocket hub, the loop itself, the
// records view and the checkpointer. A new member goes where its place in that order is.
struct ServeRig {
  ServeConfig c;
  Context ctx;
  std::unique_ptr<store::WalCheckpointer> checkpointer;
  std::unique_ptr<node::NodeRecords> records;  // null, with arbiter, when the node store cannot be opened
  std::string store_error;
  std::unique_ptr<sampler::SampleHub> hub;
  std::unique_ptr<node::Agent> agent;
  std::unique_ptr<server::WsHub> ws;
  std::unique_ptr<node::Arbiter> arbiter;
  // The ledger's running leases' rows are written as they stand when it goes (after its subscription).
  struct FlushedLedger {
    std::unique_ptr<node::UsageLedger> ledger;
    FlushedLedger() = default;
    FlushedLedger(FlushedLedger&&) = default;
    FlushedLedger& operator=(FlushedLedger&&) = default;
    ~FlushedLedger() {
      if (ledger) ledger->flush();
    }
  } usage;
  sampler::SampleHub::Subscription usage_sub;
  server::ApiContext api;
  server::Router router;
  std::unique_ptr<cluster::FleetRefresher> fleet;
  server::ClusterView cluster_view;
  std::unique_ptr<server::SocketIo> sio;
  std::unique_ptr<server::HttpServer> http;
  // Stops the collection loop before the servers its hub feeds go (the Agent itself goes later).
  struct LoopStop {
    node::Agent* agent = nullptr;
    LoopStop() = default;
    LoopStop(const LoopStop&) = delete;
    LoopStop& operator=(const LoopStop&) = delete;
    ~LoopStop() {
      if (agent) agent->stop();
    }
  } loop_stop;
  std::unique_ptr<server::AgentSocket> agent_socket;
  std::unique_ptr<JobService> submitted;  // built before the routes (they name it), ended first
};

// The stores: the node store's one writer (for the arbiter) and its read-only records view; history's
// writer connection (the batch thread) and reader (requests). All share one SQLite file (WAL). WAL
// checkpoints run on a thread of their own (store/checkpointer.hpp), so that no lease, release or history
// batch waits for the disk; started before the stores open their connections. When it cannot start, the
// store's own open says why and the connections checkpoint as SQLite does.
struct OpenedStores {
  std::unique_ptr<core::JobStore> writer;  // for make_arbiter
  std::unique_ptr<store::HistoryStore> history, history_reader;
};
OpenedStores open_stores(ServeRig& rig) {
  const ServeConfig& c = rig.c;
  if (auto ck = store::WalCheckpointer::start(c.db)) rig.checkpointer = std::move(*ck);
  OpenedStores out;
  auto not_usable = [&](const Error& e) {
    rig.store_error = e.message;
    print_error("the store is not usable (" + e.message + "): leases and jobs are not served");
    return std::move(out);
  };
  auto writer = store::NodeStore::open(c.db);
  if (!writer) return not_usable(writer.error());
  auto reader = store::NodeStore::open(c.db);
  if (!reader) return not_usable(reader.error());
  out.writer = std::move(*writer);
  rig.records = std::make_unique<node::NodeRecords>(std::move(*reader));
  if (!c.history) return out;
  auto w = store::HistoryStore::open(c.db, c.history_options);
  if (!w) {
    print_error("history is not kept: " + w.error().message);
  } else if (auto r = store::HistoryStore::open(c.db, c.history_options); !r) {
    print_error("history is not kept: " + r.error().message);
  } else {
    out.history = std::move(*w);
    out.history_reader = std::move(*r);
  }
  return out;
}

// The API token for state-changing requests and the readers' token (empty when none).
struct Tokens {
  std::string write, read;
};
Result<Tokens> load_tokens(const ServeConfig& c) {
  bool created = false;
  auto token = server::load_or_create_token(c.token_file, &created);
  if (!token) return make_error(token.error().kind, token.error().message + " (set GPUFLEET_TOKEN or --token-file)");
  if (created)
    std::fprintf(stderr, "gpufleet: created the API token for state-changing requests in %s:\n  %s\n",
                 c.token_file.c_str(), token->c_str());
  auto read_token = load_read_token(c);
  if (!read_token) return read_token.error();
  return Tokens{std::move(*token), std::move(*read_token)};
}

// The collection loop and the WebSocket hub that fans out what it publishes.
void make_agent(ServeRig& rig, OpenedStores& stores) {
  const ServeConfig& c = rig.c;
  rig.hub = std::make_unique<sampler::SampleHub>(*rig.ctx.monitor);
  node::AgentOptions ao;
  ao.interval = c.interval;
  ao.node_name = c.node_name;
  ao.alert_rules = c.alert_rules;
  rig.agent = std::make_unique<node::Agent>(*rig.ctx.monitor, *rig.hub, std::move(stores.history),
                                            std::move(stores.history_reader), ao);
  rig.loop_stop.agent = rig.agent.get();
  rig.ws = std::make_unique<server::WsHub>(*rig.agent, *rig.hub, c.ws);
  server::WsHub& ws = *rig.ws;
  rig.agent->on_alerts([&ws](const std::vector<core::AlertEvent>& events) { ws.broadcast_alerts(events); });
}

// The node's arbiter: the one writer of leases, the queue and job records while the agent runs. It
// decides only on the loop's published reading, never on a driver query of its own: with a slow
// nvidia-smi, requests wait for the loop's next reading instead of every request waiting on the driver.
// Then what hangs on it: per-lease accounting and idle-lease reclaim, and jobs submitted over HTTP.
void make_arbiter(ServeRig& rig, std::unique_ptr<core::JobStore> writer) {
  const ServeConfig& c = rig.c;
  node::Agent& agent = *rig.agent;
  node::ReadingSource rs;
  rs.latest = [&agent]() -> std::pair<core::SnapshotPtr, std::chrono::steady_clock::time_point> {
    auto p = agent.latest();
    if (!p) return {nullptr, {}};
    return {p->snapshot, p->taken};
  };
  if (auto t = rig.ctx.monitor->topology(); t) rs.topology = std::move(*t);
  node::ArbiterOptions ao;
  ao.max_user_priority = c.max_user_priority;
  ao.max_gpus_per_user = c.max_gpus_per_user;
  // Leases themselves come from the store under the arbiter's lock; the reading only says how loaded
  // the GPUs are from outside gpufleet, for which a few seconds is recent enough. A loop that has
  // published nothing for that long has a driver that is slow or not answering.
  ao.reading_max_age = std::max(2 * c.interval, std::chrono::milliseconds(5000));
  ao.recheck = std::max(c.interval, std::chrono::milliseconds(250));  // the queue meets each new reading
  ao.max_jobs_per_user = c.max_jobs_per_user;
  ao.job_retention = c.job_retention;
  rig.arbiter = std::make_unique<node::Arbiter>(std::move(writer), std::move(rs), ao);
  if (auto r = rig.arbiter->recover(); !r)
    print_error("cannot recover the leases of the previous run: " + r.error().message);
  else if (*r > 0)
    std::fprintf(stderr, "gpufleet: ended %zu lease(s) of the previous run\n", *r);
  if (auto p = rig.arbiter->prune_jobs(); !p)
    print_error("cannot prune old job records: " + p.error().message);
  else if (*p > 0)
    std::fprintf(stderr, "gpufleet: pruned %zu finished job record(s) past the retention\n", *p);

  server::WsHub& ws = *rig.ws;
  rig.usage.ledger =
      make_usage_ledger(c, *rig.records, *rig.arbiter,
                        [&ws](std::string_view event, const std::string& lease, const std::string& message) {
                          ws.broadcast(event, {{"lease", lease}, {"message", message}});
                        });
  if (!c.jobs_submit) return;
  JobService::Options jo;
  jo.max_in_flight = c.jobs_max_in_flight;
  jo.sample_interval = c.interval;
  jo.backend = rig.ctx.monitor->backend_name();
  jo.host = c.node_name;
  rig.submitted = std::make_unique<JobService>(
      *rig.arbiter, *rig.hub, [&ws](std::string_view event, const nlohmann::json& data) { ws.broadcast(event, data); },
      std::move(jo));
}

// The REST routes and the fleet view (refreshed on its own thread; requests rank the cached facts).
void make_routes(ServeRig& rig, const std::optional<cluster::FleetSources>& fleet_sources) {
  const ServeConfig& c = rig.c;
  server::ApiContext& api = rig.api;
  api.agent = rig.agent.get();
  api.arbiter = rig.arbiter.get();
  api.records = rig.records.get();
  api.store_error = rig.store_error;
  api.submitter = rig.submitted.get();
  api.monitor = rig.ctx.monitor.get();
  api.ws = rig.ws.get();
  api.usage = rig.usage.ledger.get();
  api.version = GF_VERSION;
  api.node_name = c.node_name;
  api.started = api.clock->now();
  api.interval = c.interval;
  server::add_monitoring_routes(rig.router, api);
  server::add_job_routes(rig.router, api);
  server::add_usage_routes(rig.router, api);
  server::add_meta_routes(rig.router, api);
  if (const auto& fsrc = fleet_sources) {
    rig.fleet = std::make_unique<cluster::FleetRefresher>(*fsrc);
    rig.cluster_view.latest = [f = rig.fleet.get()] { return f->latest(); };
    rig.cluster_view.idle = fsrc->idle;
    rig.cluster_view.fallback = fsrc->fallback;
    rig.cluster_view.max_age = fsrc->max_age;
    rig.cluster_view.sources = fsrc->describe();
    rig.fleet->start();
  }
  server::add_cluster_routes(rig.router, rig.fleet ? &rig.cluster_view : nullptr, *api.clock);
}

void print_banner(const ServeRig& rig, unsigned short port) {
  const ServeConfig& c = rig.c;
  const auto latest = rig.agent->latest();
  const std::string host = c.server.host.find(':') != std::string::npos ? "[" + c.server.host + "]" : c.server.host;
  std::fprintf(stderr,
               "gpufleet: agent for node %s listening on http://%s:%u (backend %s, %zu GPU(s)%s, every %.3g s)\n",
               c.node_name.c_str(), host.c_str(), static_cast<unsigned>(port), rig.ctx.monitor->backend_name().c_str(),
               latest ? latest->snapshot->gpus.size() : 0, latest && latest->snapshot->simulated ? ", SIMULATED" : "",
               std::chrono::duration<double>(c.interval).count());
  std::fprintf(stderr, "gpufleet: dashboard %s; API http://%s:%u/api/openapi.json; metrics /metrics; store %s\n",
               c.static_dir.empty() ? "not found (make web, or --static DIR)"
                                    : ("http://" + host + ":" + std::to_string(port) + "/").c_str(),
               host.c_str(), static_cast<unsigned>(port), rig.records ? c.db.c_str() : "none");
  std::fprintf(
      stderr, "gpufleet: agent socket %s\n",
      rig.agent_socket ? rig.agent_socket->path().c_str() : (rig.arbiter ? "none (--socket none)" : "none (no store)"));
  std::fflush(stderr);
}

// Listens (HTTP, WebSocket, Socket.IO, the agent socket), starts the loop and serves until SIGINT or
// SIGTERM: then in-flight requests finish and clients are told. The exit code.
int serve_until_signal(ServeRig& rig, const Tokens& tokens, const std::string& port_file) {
  ServeConfig& c = rig.c;
  c.server.token = tokens.write;
  c.server.read_token = tokens.read;
  c.server.static_dir = c.static_dir;
  c.server.server_header = std::string("gpufleet/") + GF_VERSION;
  // Socket.IO at /socket.io/: its connected clients are WsHub clients (same cap, periods, alerts).
  server::SioOptions sio_opts;
  sio_opts.max_payload = std::min<std::size_t>(1000000, c.server.body_limit);
  sio_opts.queue = 2 * c.server.ws_queue;  // each update goes under two names
  sio_opts.max_sessions_per_address = c.ws.sio_sessions_per_address;
  sio_opts.token_ok = [read_tokens = server::ReadTokens{tokens.write, tokens.read}](std::string_view t) {
    return read_tokens.token_reads(t);
  };
  rig.sio = std::make_unique<server::SocketIo>(*rig.ws, *rig.agent, sio_opts);
  rig.http = std::make_unique<server::HttpServer>(rig.router, rig.ws.get(), c.server, rig.sio.get());
  auto port = rig.http->listen();
  if (!port) {
    print_error(port.error().message);
    return exit_code(port.error());
  }
  rig.agent->start();
  if (rig.usage.ledger) rig.usage_sub = rig.usage.ledger->attach(*rig.hub, c.interval);
  // $GPUFLEET_SOCKET names the socket for both sides: where the CLI looks and, without --socket, where
  // serve listens ("none" on both: no agent socket, as the tests set it).
  std::string socket_path = c.socket;
  if (auto env = platform::env("GPUFLEET_SOCKET"); socket_path.empty() && env) socket_path = *env;
  if (rig.arbiter && socket_path != "none") {
    server::AgentSocketOptions so;
    so.path = socket_path.empty() ? server::default_agent_socket_path() : socket_path;
    so.version = GF_VERSION;
    so.admin_group = c.admin_group;
    so.auth_read = c.server.auth_read;
    auto sock = server::AgentSocket::start(*rig.arbiter, &rig.router, so);
    if (!sock) {
      print_error(sock.error().message + " (--socket PATH, or --socket none)");
      return exit_code(sock.error());
    }
    rig.agent_socket = std::move(*sock);
  }
  if (!port_file.empty()) {
    // Written whole and renamed into place (a reader never sees half a number), never through a
    // name that someone else could have planted as a link.
    if (auto w = platform::write_file_atomic(port_file, std::to_string(*port) + "\n", 0644); !w)
      print_error("cannot write the port file: " + w.error().message);
  }
  print_banner(rig, *port);
  release_startup_memory();
  rig.http->run(true);  // until SIGINT/SIGTERM; the rig's destruction does the rest
  return kExitOk;
}

}  // namespace

int run_serve(const GlobalOptions& g, const ServeCommand& cmd) {
  // Two malloc arenas, not one per core and thread kind: the agent's threads mostly wait, and each
  // arena keeps pages of its own (~0.15 MiB of RSS; bench/RESULTS.md, issue 24 goal 1). Before any
  // thread starts.
  ::mallopt(M_ARENA_MAX, 2);
  auto cfg = load_serve_config(cmd);
  if (!cfg) {
    print_error(cfg.error().message);
    return kExitUsage;
  }
  // The fleet view: --cluster-config and/or the cluster verbs' source options (which win over the file).
  ClusterCommand fleet_cmd = cmd.fleet;
  fleet_cmd.config = cmd.cluster_config;
  auto fleet_sources = serve_fleet_sources(fleet_cmd, KubeEnvironment::from_process());
  if (!fleet_sources) {
    print_error(fleet_sources.error().message);
    return kExitUsage;
  }
  ServeConfig& c = *cfg;
  if (c.node_name.empty()) c.node_name = hostname();
  if (c.static_dir.empty()) c.static_dir = default_static_dir();
  if (c.db.empty()) c.db = store::default_db_path();
  if (c.token_file.empty()) c.token_file = (fs::path(c.db).parent_path() / "agent.token").string();

  int code = kExitOk;
  {
    ServeRig rig;
    rig.c = std::move(c);
    rig.ctx = open_context(g, /*listen_for_events=*/true);
    if (report_unusable_backend(rig.ctx)) return kExitNoBackend;
    raise_fd_limit();
    OpenedStores stores = open_stores(rig);
    auto tokens = load_tokens(rig.c);
    if (!tokens) {
      print_error(tokens.error().message);
      return exit_code(tokens.error());
    }
    make_agent(rig, stores);
    if (stores.writer) make_arbiter(rig, std::move(stores.writer));
    if (rig.c.jobs_submit && !rig.arbiter) print_error("job submission needs the node store: POST /api/v1/jobs is off");
    make_routes(rig, *fleet_sources);
    code = serve_until_signal(rig, *tokens, cmd.port_file);
    if (code != kExitOk) return code;
  }
  std::fprintf(stderr, "gpufleet: agent stopped\n");
  return kExitOk;
}

}  // namespace gf::app
