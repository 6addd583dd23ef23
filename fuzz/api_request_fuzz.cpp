// libFuzzer target for the agent's request handling: everything a client controls — method, target
// (path and query, percent-decoded as the transport does), token, body — through the router, the
// access check and every REST handler, against the simulated backend and a real store in a temporary
// directory; and the same bytes as a WebSocket message. Crashes, sanitizer reports, a status outside
// the expected set, or a JSON response that does not parse are findings.
//
// Input layout: byte 0: bits 0-2 the method, bit 3 send the right token, bit 4 ask for a fresh
// reading; then the target up to the first NUL; then the body.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "node/agent.hpp"
#include "platform/clock.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "server/api.hpp"
#include "server/router.hpp"
#include "server/ws_hub.hpp"
#include "store/node_store.hpp"

namespace {

namespace gs = gf::server;

// A failed expectation names itself and the request before it stops the run (the CI log then says
// what went wrong, not only "deadly signal").
// The request and answer being checked, for the report (formatted only when a check fails).
const gs::Request* g_req = nullptr;
const gs::Response* g_resp = nullptr;
void check_at(bool ok, const char* what, int line) {
  if (ok) return;
  std::string request = "(none)";
  if (g_req && g_resp)
    request = std::string(gs::to_string(g_req->method)) + " " + g_req->target + " → " + std::to_string(g_resp->status) +
              " " + (g_resp->body ? g_resp->body->substr(0, 300) : std::string("(no body)"));
  std::fprintf(stderr, "api_request_fuzz.cpp:%d: check failed: %s\n  request: %s\n", line, what, request.c_str());
  std::fflush(stderr);
  __builtin_trap();
}
#define check(e) check_at((e), #e, __LINE__)

class NullClient final : public gs::WsClient {
 public:
  void send(const gs::Message&) override {}
};

struct World {
  std::unique_ptr<gf::sampler::Monitor> monitor;
  std::unique_ptr<gf::sampler::SampleHub> hub;
  std::unique_ptr<gf::node::Agent> agent;
  std::unique_ptr<gs::WsHub> ws;
  std::unique_ptr<gf::node::Arbiter> arbiter;
  std::unique_ptr<gf::node::NodeRecords> records;
  gs::ApiContext ctx;
  gs::Router router;
  std::shared_ptr<NullClient> client = std::make_shared<NullClient>();
  std::uint64_t client_id = 0;

  World() {
    const auto dir = std::filesystem::temp_directory_path() / ("gf-fuzz-api-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto opened = gf::backends::open_backend("sim", gf::backends::BackendOptions{});
    monitor = std::make_unique<gf::sampler::Monitor>(std::move(opened.backend), gf::platform::system_clock());
    hub = std::make_unique<gf::sampler::SampleHub>(*monitor);
    gf::node::AgentOptions ao;
    ao.node_name = "fuzz";
    ao.interval = std::chrono::hours(1);  // the fuzzer drives; the loop stays out of the way
    agent = std::make_unique<gf::node::Agent>(*monitor, *hub, nullptr, nullptr, ao);
    agent->start();
    ws = std::make_unique<gs::WsHub>(*agent, *hub, gs::WsOptions{});
    // As serve wires them: the arbiter writes through one connection, the records view reads another. The
    // arbiter's reading is the agent's, always recent (the fuzzer drives; the loop stays out of the way).
    auto writer = gf::store::NodeStore::open((dir / "gf.db").string());
    auto reader = gf::store::NodeStore::open((dir / "gf.db").string());
    if (writer && reader) {
      gf::node::ReadingSource rs;
      rs.latest = [a = agent.get()]() -> std::pair<gf::core::SnapshotPtr, std::chrono::steady_clock::time_point> {
        auto p = a->latest();
        return {p ? p->snapshot : nullptr, std::chrono::steady_clock::now()};
      };
      arbiter = std::make_unique<gf::node::Arbiter>(std::move(*writer), std::move(rs));
      records = std::make_unique<gf::node::NodeRecords>(std::move(*reader));
    }
    ctx.agent = agent.get();
    ctx.monitor = monitor.get();
    ctx.ws = ws.get();
    ctx.arbiter = arbiter.get();
    ctx.records = records.get();
    ctx.version = "fuzz";
    ctx.node_name = "fuzz";
    // The routes judge staleness by this interval: it must be the agent's, or a fuzz run longer than two
    // default intervals turns every seed route into its "reading is stale" 500.
    ctx.interval = ao.interval;
    ctx.started = std::chrono::steady_clock::now();
    gs::add_monitoring_routes(router, ctx);
    gs::add_job_routes(router, ctx);
    gs::add_meta_routes(router, ctx);
    if (auto j = ws->add(client, std::chrono::milliseconds(3600000))) client_id = j->id;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World w;
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto nul = rest.find('\0');
  const std::string_view target = rest.substr(0, nul);
  const std::string body(nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1));

  constexpr gs::Method kMethods[] = {gs::Method::Get, gs::Method::Post, gs::Method::Delete, gs::Method::Head,
                                     gs::Method::Put, gs::Method::Get,  gs::Method::Post,   gs::Method::Options};
  gs::Request req;
  req.method = kMethods[mode & 7];
  req.target = std::string(target);
  const auto q = target.find('?');
  if (!gs::url_decode(target.substr(0, q), req.path, false)) return 0;  // the transport answers 400
  if (q != std::string_view::npos && !gs::parse_query(target.substr(q + 1), req.query)) return 0;
  if (req.path.empty() || req.path.front() != '/') return 0;
  if (mode & 16) req.query["fresh"] = "1";
  req.authorization = (mode & 8) ? "Bearer fuzz-token" : "";
  req.content_type = "application/json";
  req.body = body;

  const auto d = gs::decide(w.router, req, "fuzz-token", false);
  const gs::Response r = d.answer ? *d.answer : gs::invoke(*d.route, req);
  g_req = &req;
  g_resp = &r;
  check(r.status == 200 || r.status == 201 || r.status == 400 || r.status == 401 || r.status == 404 ||
        r.status == 405 || r.status == 409 || r.status == 415 || r.status == 503);
  check(r.body != nullptr);
  if (r.content_type == "application/json") {
    const auto j = nlohmann::json::parse(*r.body, nullptr, false);
    check(!j.is_discarded());
    // /api/health answers 503 with its own document (status, problems) when the collection is stale, as
    // it is here once the loop's first reading is older than the staleness limit; every other refusal
    // is an error document.
    const bool health_doc = req.path == "/api/health" && r.status == 503;
    if (health_doc) check(j.is_object() && j.contains("status"));
    if (r.status >= 400 && !health_doc) check(j.is_object() && j.contains("error") && j.contains("message"));
  }
  // Leases taken by the fuzzer are released again, so later inputs still find free GPUs.
  if (r.status == 201 && w.arbiter) {
    const auto j = nlohmann::json::parse(*r.body, nullptr, false);
    check(j.is_object() && j.contains("id") && j["id"].is_string());
    if (j.is_object() && j.contains("id") && j["id"].is_string())
      (void)w.arbiter->release(j["id"].get<std::string>(), true, "fuzz");
  }

  // The same bytes as a WebSocket message: every reply, framed for /ws, is a JSON envelope.
  if (w.client_id) {
    if (auto reply = w.ws->on_message(w.client_id, body.empty() ? target : std::string_view(body))) {
      const auto j = nlohmann::json::parse(*gs::ws_frame(**reply), nullptr, false);
      check(j.is_object() && j.contains("event") && j.contains("data"));
    }
  }
  return 0;
}
