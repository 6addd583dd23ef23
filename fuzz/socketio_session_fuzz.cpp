// libFuzzer target for the Socket.IO session logic: a session driven by whatever a client can send
// (polling bodies, WebSocket messages, GETs, upgrades, WebSocket loss) interleaved with pings and
// timeouts, against the simulated backend. Crashes, sanitizer reports, a polling answer that is not a
// valid payload, more than one "3probe" per upgrade, queued bytes past the server's budget, or a session
// that is not freed (with its bytes) when closed are findings.
//
// Input: records separated by NUL; a record's first byte picks the step, the rest is its text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "node/agent.hpp"
#include "platform/clock.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "server/socketio.hpp"
#include "server/ws_hub.hpp"
#include "wire/engineio.hpp"

namespace {

namespace gs = gf::server;

void check_at(bool ok, const char* what, int line) {
  if (ok) return;
  std::fprintf(stderr, "socketio_session_fuzz.cpp:%d: check failed: %s\n", line, what);
  std::fflush(stderr);
  __builtin_trap();
}
#define check(e) check_at((e), #e, __LINE__)

struct World {
  std::unique_ptr<gf::sampler::Monitor> monitor;
  std::unique_ptr<gf::sampler::SampleHub> hub;
  std::unique_ptr<gf::node::Agent> agent;
  std::unique_ptr<gs::WsHub> ws;
  std::unique_ptr<gs::SocketIo> sio;

  World() {
    auto opened = gf::backends::open_backend("sim", gf::backends::BackendOptions{});
    monitor = std::make_unique<gf::sampler::Monitor>(std::move(opened.backend), gf::platform::system_clock());
    hub = std::make_unique<gf::sampler::SampleHub>(*monitor);
    gf::node::AgentOptions ao;
    ao.node_name = "fuzz";
    ao.interval = std::chrono::hours(1);
    agent = std::make_unique<gf::node::Agent>(*monitor, *hub, nullptr, nullptr, ao);
    agent->start();
    gs::WsOptions wo;
    wo.default_period = std::chrono::hours(1);  // the fuzzer drives; no periodic updates
    ws = std::make_unique<gs::WsHub>(*agent, *hub, wo);
    gs::SioOptions so;
    so.queue = 8;
    so.max_payload = 4096;
    so.max_queued_bytes = 16 * 1024;
    so.max_total_queued_bytes = 24 * 1024;
    so.token_ok = [](std::string_view t) { return t == "good"; };
    sio = std::make_unique<gs::SocketIo>(*ws, *agent, so);
  }
};

void check_payload(const std::string& payload) {
  auto parts = gf::wire::eio::split_payload(payload, 1 << 20, 1 << 16);
  check(parts.has_value());
  for (auto p : *parts) check(gf::wire::eio::parse_packet(p).has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World w;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  const bool authorized = size > 0 && (data[0] & 1);
  auto opened = w.sio->open({"10.0.0.1", authorized, std::nullopt,
                             size > 0 && (data[0] & 2) ? gs::SioTransport::WebSocket : gs::SioTransport::Polling},
                            now);
  check(opened.has_value());
  auto s = *opened;
  bool waiting = false;
  int probes_answered = 0;  // since the last attach_ws: at most one "3probe" per upgrade
  for (std::size_t pos = 1; pos < size;) {
    const auto nul = in.find('\0', pos);
    const auto rec = in.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos);
    pos = nul == std::string_view::npos ? size : nul + 1;
    if (rec.empty()) continue;
    const auto text = rec.substr(1);
    switch (rec[0] % 7) {
      case 0: (void)s->on_payload(text); break;
      case 1:
        if (auto reply = s->on_packet(text, gs::SioTransport::WebSocket)) {
          check(*reply == "3probe");
          check(++probes_answered == 1);
        }
        break;
      case 2: {
        const auto r = s->begin_poll([] {});
        if (r == gs::SioSession::Poll::Ready || (r == gs::SioSession::Poll::Wait && waiting)) {
          check_payload(s->take_payload());
          waiting = false;
        } else if (r == gs::SioSession::Poll::Wait) {
          waiting = true;
        }
        break;
      }
      case 3:
        if (s->attach_ws([] {})) probes_answered = 0;
        break;
      case 4: s->detach_ws(); break;
      case 5:
        now += std::chrono::seconds(static_cast<unsigned char>(text.empty() ? 1 : text[0]));
        w.sio->tick(now);
        break;
      case 6:
        while (auto p = s->take_one()) check(gf::wire::eio::parse_packet(**p).has_value());
        break;
    }
    // What sessions hold for themselves never passes the server's budget (broadcasts are shared).
    check(w.sio->charged_bytes() <= 24 * 1024);
  }
  if (waiting) check_payload(s->take_payload());
  s->close();
  check(s->closed());
  w.sio->tick(now);
  check(w.sio->sessions() == 0);
  check(w.ws->clients() == 0);
  check(w.sio->charged_bytes() == 0);  // a closed session gives its bytes back
  return 0;
}
