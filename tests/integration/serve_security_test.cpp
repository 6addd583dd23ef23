// `gpufleet serve` against clients that would hurt it or read what they should not: slowloris and
// silent clients, the read token and --auth-read, refusals from the header before the body, memory
// given back after a burst, per-address connection caps and the Host check (DNS rebinding).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "integration/serve_fixture.hpp"
#include "support/eventually.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {
namespace {

TEST_F(Serve, SlowlorisAndSilentClientsAreClosedWhileOthersAreServed) {
  const auto cfg = write_file("agent.json", R"({"limits": {"request_timeout_s": 2}})");
  ASSERT_TRUE(start("sim", {"--config", cfg}));
  const auto t0 = Clock::now();
  Sock silent(port());
  Sock slow(port());
  ASSERT_TRUE(silent.ok() && slow.ok());
  ASSERT_TRUE(slow.send_all("GET /api/hea"));
  // A byte a second; the whole request must come within 2 s, so the server closes it by ~2 s.
  const std::string rest = "lth HTTP/1.1\r\nHost: x\r\n\r\n";
  bool slow_closed = false, silent_closed = false;
  double slow_ms = 0, silent_ms = 0;
  int served_meanwhile = 0;
  for (std::size_t i = 0; i < rest.size() && ms_since(t0) < 6000 && !(slow_closed && silent_closed); ++i) {
    const auto tick = in(1000ms);
    if (!slow_closed && !slow.send_all(rest.substr(i, 1))) {
      slow_closed = true;
      slow_ms = ms_since(t0);
    }
    // Others are served meanwhile.
    if (get(port(), "/api/health").status == 200) ++served_meanwhile;
    if (!slow_closed && slow.closed_by(tick)) {
      slow_closed = true;
      slow_ms = ms_since(t0);
    }
    if (!silent_closed && silent.closed_by(Clock::now() + 1ms)) {
      silent_closed = true;
      silent_ms = ms_since(t0);
    }
    // Real time, on purpose: the agent's request timeout is its own clock; the client trickles a byte a second.
    std::this_thread::sleep_until(tick);
  }
  if (!silent_closed && silent.closed_by(t0 + 6000ms)) {
    silent_closed = true;
    silent_ms = ms_since(t0);
  }
  EXPECT_TRUE(slow_closed) << "a trickling client is still connected after 6 s";
  EXPECT_TRUE(silent_closed) << "a silent client is still connected after 6 s";
  EXPECT_LT(slow_ms, 5000);
  EXPECT_LT(silent_ms, 5000);
  EXPECT_GT(slow_ms, 1500) << "closed before its timeout";
  EXPECT_EQ(slow.buf.find("HTTP/1.1 200"), std::string::npos) << "the trickled request was answered";
  EXPECT_GE(served_meanwhile, 2);
  expect_healthy(port(), "slowloris");
  expect_clean_stop();
}

// Review of issue 24: an answer that does not fit in the socket is written on asynchronously, within
// request_timeout. A client that pipelines requests for large answers and never reads stalls that write:
// the connection is closed once request_timeout passes, and others are served meanwhile.
TEST_F(Serve, AClientThatPipelinesAndNeverReadsIsClosedAtTheRequestTimeout) {
  const auto cfg = write_file("agent.json", R"({"limits": {"request_timeout_s": 2}})");
  ASSERT_TRUE(start("sim", {"--config", cfg}));
  const auto whole = get(port(), "/api/openapi.json");
  ASSERT_EQ(whole.status, 200);
  ASSERT_GT(whole.body.size(), 30000u) << "the test needs answers larger than the client's window";
  Sock stalled(port(), 2048);
  ASSERT_TRUE(stalled.ok());
  std::string pipelined;
  for (int i = 0; i < 150; ++i) pipelined += request_text("GET", "/api/openapi.json", {}, {}, false);
  const auto t0 = Clock::now();
  ASSERT_TRUE(stalled.send_all(pipelined));
  // Real time, on purpose: the agent's request timeout is its own clock. The stalled client reads
  // nothing for twice the timeout.
  int served_meanwhile = 0;
  while (ms_since(t0) < 4000) {
    const auto tick = in(500ms);
    if (get(port(), "/api/health").status == 200) ++served_meanwhile;
    std::this_thread::sleep_until(tick);
  }
  EXPECT_GE(served_meanwhile, 4);
  // Closed: what the window held, then the end (or a reset). Left open, the rest of the 150 answers
  // (5 MB through a 2 KiB window) would still be coming, or the connection idle, when the look ends.
  EXPECT_TRUE(stalled.closed_by(in(2s))) << "still open after twice request_timeout";
  EXPECT_LT(stalled.buf.size(), 150 * whole.body.size());
  expect_healthy(port(), "a stalled reader");
  expect_clean_stop();
}

// Under --auth-read every read needs the token; a browser cannot set Authorization on a WebSocket,
// so it offers the token as a subprotocol and the agent answers with gpufleet.v1.
TEST_F(Serve, AuthReadNeedsTheTokenOverHttpAndWebSocket) {
  ASSERT_TRUE(start("sim", {"--auth-read"}));
  const std::string tok = token();
  ASSERT_EQ(tok.size(), 64u);
  auto r = get(port(), "/api/v1/monitoring/gpu-metrics");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(core::lower(r.header("www-authenticate")).find("bearer"), std::string::npos) << r.raw_head;
  r = http(port(), "GET", "/api/v1/monitoring/gpu-metrics", {}, {"Authorization: Bearer " + tok});
  EXPECT_EQ(r.status, 200) << r.body;

  WsConn none(port(), "/ws");
  EXPECT_EQ(none.handshake.status, 401) << none.handshake.raw_head;
  WsConn wrong(port(), "/ws", std::nullopt, 0,
               {"Sec-WebSocket-Protocol: gpufleet.v1, gpufleet.bearer." + std::string(64, '0')});
  EXPECT_EQ(wrong.handshake.status, 401) << wrong.handshake.raw_head;

  WsConn ok(port(), "/ws", std::nullopt, 0, {"Sec-WebSocket-Protocol: gpufleet.v1, gpufleet.bearer." + tok});
  ASSERT_TRUE(ok.open()) << ok.handshake.raw_head;
  EXPECT_EQ(ok.handshake.header("sec-websocket-protocol"), "gpufleet.v1");
  auto first = ok.next(in(10s));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->event(), "gpu_status");
  // The header form works too (non-browser clients).
  WsConn header(port(), "/ws", std::nullopt, 0, {"Authorization: Bearer " + tok});
  EXPECT_TRUE(header.open()) << header.handshake.raw_head;
  expect_clean_stop();
}

// Security review, finding 11: a read-only token for the dashboard's readers (reads over HTTP, /ws and
// Socket.IO; 401 on writes), and the dashboard's files carry a Content-Security-Policy.
TEST_F(Serve, TheReadTokenReadsEverywhereAndReleasesNothing) {
  const std::string reader_file = (dir / "reader.token").string();
  fs::create_directories(dir / "static");
  write_file("static/index.html", "<!doctype html><title>x</title>");
  ASSERT_TRUE(start("sim", {"--auth-read", "--read-token-file", reader_file, "--static", (dir / "static").string()}));
  std::ifstream f(reader_file);
  std::string reader;
  std::getline(f, reader);
  ASSERT_EQ(reader.size(), 64u);
  ASSERT_NE(reader, token());
  EXPECT_EQ(fs::status(reader_file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string as_reader = "Authorization: Bearer " + reader;
  EXPECT_EQ(http(port(), "GET", "/api/v1/monitoring/gpu-metrics", {}, {as_reader}).status, 200);
  auto w = http(port(), "POST", "/api/v1/allocations", R"({"gpus":1})", {as_reader, "Content-Type: application/json"});
  EXPECT_EQ(w.status, 401) << w.body;
  auto admin = http(port(), "POST", "/api/v1/allocations", R"({"gpus":1})",
                    {"Authorization: Bearer " + token(), "Content-Type: application/json"});
  EXPECT_EQ(admin.status, 201) << admin.body;
  WsConn ws(port(), "/ws", std::nullopt, 0, {"Sec-WebSocket-Protocol: gpufleet.v1, gpufleet.bearer." + reader});
  EXPECT_TRUE(ws.open()) << ws.handshake.raw_head;
  auto sio = http(port(), "GET", "/socket.io/?EIO=4&transport=polling&token=" + reader);
  EXPECT_EQ(sio.status, 200) << sio.body;
  auto page = get(port(), "/");  // static files need no token: the page asks for it
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.header("content-security-policy"), "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  expect_clean_stop();
}

// Under a sanitizer the agent's resident memory says nothing about what it holds: ASan keeps freed
// blocks in quarantine and both sanitizers map shadow memory. The plain build checks memory.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The agent's resident anonymous memory (heap, stacks: what connections and bodies hold), from /proc.
// Not VmRSS: once serving, the agent gives back the file-backed pages of code that start-up touched
// (server/http_server.cpp), and the code a burst runs is mapped again from the page cache, which is
// not memory the burst holds.
long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::atol(line.c_str() + 8);
  return -1;
}

// Issue 12, memory before auth: a request is refused from its header, before its body is read. On main
// the whole body (up to 1 MiB) was read into the connection's buffer before the token was checked:
// the 401 below never came (the server waited for the body until the request timeout), and 100 such
// clients sending half their body held over 50 MiB.
TEST_F(Serve, RefusalsComeFromTheHeaderBeforeAnyBodyIsRead) {
  ASSERT_TRUE(start("sim"));
  const std::string head =
      "POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 1000000\r\n\r\n";
  {
    Sock s(port());
    ASSERT_TRUE(s.ok() && s.send_all(head));  // the body never comes
    auto r = read_response(s, in(20s));
    EXPECT_EQ(r.status, 401) << "no answer before the body: " << r.raw_head;
    EXPECT_EQ(core::lower(r.header("connection")), "close") << r.raw_head;
    EXPECT_EQ(r.body_json().value("error", ""), "unauthorized") << r.body;
  }
  // The same with a body that streams in after the answer: the client still reads its 401.
  {
    Sock s(port());
    ASSERT_TRUE(s.ok() && s.send_all(head + std::string(200000, ' ')));
    auto r = read_response(s, in(20s));
    EXPECT_EQ(r.status, 401) << r.raw_head;
  }
  // Wrong path and wrong Host are refused the same way.
  {
    Sock s(port());
    ASSERT_TRUE(s.ok() &&
                s.send_all("POST /api/v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500000\r\n\r\n"));
    EXPECT_EQ(read_response(s, in(20s)).status, 404);
  }
  // Many clients sending half a body each hold (almost) nothing.
  const long before = rss_kib(agent.pid());
  ASSERT_GT(before, 0);
  std::vector<Sock> clients;
  for (int i = 0; i < 100; ++i) {
    clients.emplace_back(port());
    ASSERT_TRUE(clients.back().ok());
    ASSERT_TRUE(clients.back().send_all(head + std::string(500000, 'x')));
  }
  int answered = 0;
  for (auto& c : clients) answered += read_response(c, in(20s)).status == 401;
  const long during = rss_kib(agent.pid());
  EXPECT_EQ(answered, 100);
  if (!kSanitized) {
    EXPECT_LT(during - before, 16 * 1024) << "RSS grew from " << before << " KiB to " << during << " KiB";
  }
  clients.clear();
  // An authorised request still gets its body read.
  auto ok = http(port(), "POST", "/api/v1/estimate",
                 R"({"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [4]}})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  expect_clean_stop();
}

// Issue 12, "memory returned when they close": a burst of idle, unauthenticated connections costs
// about a page each while open and is given back once they close. It used to stay (24.5 MiB after 4 000
// had closed, against 10 MiB before): Asio's reactor keeps each socket's state in a free list, and
// states made one per accepted connection pinned one page of the burst each; the agent now makes them
// before the first connection (bench/RESULTS.md). A bound on what stays, not a timing.
TEST_F(Serve, MemoryOfABurstOfIdleConnectionsIsGivenBack) {
  // The plain build (make test) and bench/idle_connections.sh measure it.
  if (kSanitized) GTEST_SKIP() << "resident memory is not meaningful under a sanitizer";
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  constexpr int kConnections = 1500;
  if (rl.rlim_cur < kConnections + 100) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, kConnections + 200);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur < kConnections + 100) GTEST_SKIP() << "this process may open only " << rl.rlim_cur << " files";
  ASSERT_TRUE(start("sim"));
  ASSERT_EQ(http(port(), "GET", "/api/health").status, 200);
  // The baseline once the agent has settled: its first seconds still allocate (the first collections,
  // the history's first batch), which a baseline taken at once would count against the burst.
  long before = rss_kib(agent.pid());
  test::eventually(
      [&] {
        const long was = before;
        std::this_thread::sleep_for(500ms);
        before = rss_kib(agent.pid());
        return before == was;
      },
      10s, 0ms);
  ASSERT_GT(before, 0);
  {
    std::vector<Sock> idle;
    idle.reserve(kConnections);
    for (int i = 0; i < kConnections; ++i) {
      const std::string source = "127.0.0." + std::to_string(1 + i % 8);  // 188 per address: under the cap
      idle.emplace_back(port(), 0, source.c_str());
      ASSERT_TRUE(idle.back().ok()) << "connection " << i;
      if (i % 2 == 1) {
        ASSERT_TRUE(idle.back().send_all("GET /api/hea"));  // half send part of a request line
      }
    }
    // Every connection accepted (the agent answers a new client after them, in order).
    ASSERT_EQ(http(port(), "GET", "/api/health").status, 200);
    const long during = rss_kib(agent.pid());
    ASSERT_GT(during - before, 2 * 1024) << "the burst should cost memory while open: " << before << " -> " << during
                                         << " KiB";
    const long grown = during - before;
    idle.clear();
    // The agent prunes its session list and trims the heap every 2 s after many connections closed.
    // At least half comes back: the agent's threads share two malloc arenas (M_ARENA_MAX, app/cmd_serve),
    // so what the collection and history threads allocate while the burst is open can pin some of its
    // pages (on a loaded CI machine 36 % stayed; alone, far less).
    long after = rss_kib(agent.pid());
    test::eventually(
        [&] {
          after = rss_kib(agent.pid());
          return after - before < grown / 2;
        },
        20s, 100ms);
    EXPECT_LT(after - before, grown / 2) << "RSS " << before << " KiB before, " << during << " KiB with "
                                         << kConnections << " idle connections, still " << after
                                         << " KiB after they closed";
  }
  expect_clean_stop();
}

// Issue 12, connection caps: one client address cannot take every place. On main 4 096 idle
// connections from one address filled max_connections and everyone else was closed at once.
TEST_F(Serve, OneAddressCannotLockOthersOut) {
  const auto cfg = write_file("agent.json", R"({"limits": {"max_connections": 16, "max_connections_per_address": 8}})");
  ASSERT_TRUE(start("sim", {"--config", cfg}));
  auto get_from = [&](const char* source) {
    Sock s(port(), 0, source);
    EXPECT_TRUE(s.ok()) << "cannot connect from " << source;
    if (!s.ok() || !s.send_all(request_text("GET", "/api/health"))) return 0;
    return read_response(s, in(20s)).status;
  };
  std::vector<Sock> hog;
  for (int i = 0; i < 8; ++i) {
    hog.emplace_back(port(), 0, "127.0.0.1");
    ASSERT_TRUE(hog.back().ok());
  }
  // Beyond its cap, the same address is closed at once, unanswered.
  Sock extra(port(), 0, "127.0.0.1");
  ASSERT_TRUE(extra.ok());
  ASSERT_TRUE(extra.send_all(request_text("GET", "/api/health")));
  auto refused = read_response(extra, in(20s));
  EXPECT_EQ(refused.status, 0) << "the address's 9th connection was served: " << refused.raw_head;
  // Another address (loopback too) is served.
  EXPECT_EQ(get_from("127.0.0.2"), 200);
  // Fill the global cap with idle connections from a second address: a newcomer is still served, in
  // the place of the connection idle longest (the hog's first).
  std::vector<Sock> more;
  for (int i = 0; i < 8; ++i) {
    more.emplace_back(port(), 0, "127.0.0.3");
    ASSERT_TRUE(more.back().ok());
  }
  // (A few tries: the place of the 127.0.0.2 client above may still be being given back.)
  int served = 0;
  for (int i = 0; i < 3 && served != 200; ++i) served = get_from("127.0.0.4");
  ASSERT_EQ(served, 200) << "with the cap filled by idle connections, a new client is not served";
  EXPECT_TRUE(hog.front().closed_by(in(20s))) << "the connection idle longest was not the one closed";
  expect_healthy(port(), "a full connection table");
  expect_clean_stop();
}

// Issue 12, DNS rebinding: a page whose name now points at this machine sends its own name as Host.
// On main any Host was served.
TEST_F(Serve, HostHeaderMustNameThisAgent) {
  ASSERT_TRUE(start("sim", {"--allow-host", "gpu-3.lab.example"}));
  auto with_host = [&](const std::string& host_line, const std::string& target = "/api/v1/processes") {
    Sock s(port());
    EXPECT_TRUE(s.ok() && s.send_all("GET " + target + " HTTP/1.1\r\n" + host_line + "Connection: close\r\n\r\n"));
    return read_response(s, in(20s));
  };
  auto evil = with_host("Host: evil.example\r\n");
  EXPECT_EQ(evil.status, 421) << evil.raw_head;
  EXPECT_EQ(evil.body_json().value("error", ""), "misdirected_request") << evil.body;
  EXPECT_EQ(with_host("Host: evil.example:" + std::to_string(port()) + "\r\n").status, 421);
  EXPECT_EQ(with_host("Host: localhost:" + std::to_string(port()) + "\r\n").status, 200);
  EXPECT_EQ(with_host("Host: 127.0.0.1\r\n").status, 200);
  EXPECT_EQ(with_host("Host: [::1]:" + std::to_string(port()) + "\r\n").status, 200);
  EXPECT_EQ(with_host("Host: GPU-3.lab.example:80\r\n").status, 200);
  EXPECT_EQ(with_host("").status, 400);                             // HTTP/1.1 without Host
  EXPECT_EQ(with_host("Host: \r\n").status, 421);                   // an empty one names no host
  EXPECT_EQ(with_host("Host: evil.example\r\n", "/").status, 421);  // the dashboard too
  // WebSocket upgrades too.
  Sock s(port());
  ASSERT_TRUE(s.ok() && s.send_all("GET /ws HTTP/1.1\r\nHost: evil.example\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                   "Sec-WebSocket-Version: 13\r\n\r\n"));
  EXPECT_EQ(read_response(s, in(20s)).status, 421);
  expect_clean_stop();
}

}  // namespace
}  // namespace gf::serve_test
