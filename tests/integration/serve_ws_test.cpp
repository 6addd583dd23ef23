// `gpufleet serve` over a real WebSocket: the update period, one frame per message, the origin check and
// the client cap (also against a burst of handshakes), alerts that fire and resolve, and a client that
// never reads.
#include <gtest/gtest.h>
#include <algorithm>
#include <numeric>

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

// Updates of one client: the spacing between consecutive gpu_status_update messages, in ms.
std::vector<double> update_gaps(WsConn& ws, std::chrono::milliseconds over, int* count) {
  std::vector<double> gaps;
  std::optional<Clock::time_point> last;
  *count = 0;
  const auto deadline = in(over);
  while (auto m = ws.next(deadline)) {
    if (m->event() != "gpu_status_update") continue;
    ++*count;
    if (last) gaps.push_back(std::chrono::duration<double, std::milli>(m->at - *last).count());
    last = m->at;
  }
  return gaps;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Real time, on purpose: the periods under test are the agent process's own (updates every 200 ms), as a
// dashboard sees them; the hub's own logic is tested in tests/unit/server/ws_hub_test.cpp.
TEST_F(Serve, WebSocketUpdatesFollowThePeriodAndAnswerMessages) {
  ASSERT_TRUE(start("sim", {"--interval", "1"}));
  WsConn ws(port(), "/ws?period_ms=200");
  ASSERT_TRUE(ws.open()) << ws.handshake.status << " " << ws.handshake.raw_head;
  auto first = ws.next(in(10s));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->event(), "gpu_status") << first->text.substr(0, 200);
  EXPECT_EQ(first->j()["data"]["gpus"].size(), 2u);

  int count = 0;
  auto gaps = update_gaps(ws, 2000ms, &count);
  EXPECT_GE(count, 5) << "gpu_status_update messages in 2 s at 200 ms";
  EXPECT_LE(count, 15);
  const double med = median(gaps);
  EXPECT_GE(med, 100) << "median spacing";
  EXPECT_LE(med, 400) << "median spacing";

  // set_period: a reply naming the new period, then a slower rate.
  ASSERT_TRUE(ws.send_text(R"({"event":"set_period","data":{"period_ms":1000}})"));
  auto reply = ws.next_event("period", in(10s));
  ASSERT_TRUE(reply) << "no reply to set_period";
  EXPECT_EQ(reply->j()["data"]["period_ms"], 1000) << reply->text;
  // Skip what was already under way, then count.
  (void)ws.next_event("gpu_status_update", in(3s));
  auto slow_gaps = update_gaps(ws, 2500ms, &count);
  EXPECT_LE(count, 4) << "updates in 2.5 s at 1000 ms";
  EXPECT_GE(count, 1);
  if (!slow_gaps.empty()) {
    EXPECT_GE(median(slow_gaps), 700);
  }

  // request_gpu_update right after a periodic update: the answer comes long before the next tick.
  ASSERT_TRUE(ws.next_event("gpu_status_update", in(5s)));
  const auto asked = Clock::now();
  ASSERT_TRUE(ws.send_text(R"({"event":"request_gpu_update"})"));
  auto now_update = ws.next(in(5s));
  ASSERT_TRUE(now_update);
  EXPECT_EQ(now_update->event(), "gpu_status_update");
  EXPECT_LT(ms_since(asked), 600) << "request_gpu_update took as long as a periodic tick";

  // Nonsense gets an error event, and the connection stays.
  ASSERT_TRUE(ws.send_text("this is not json"));
  auto err = ws.next_event("error", in(5s));
  EXPECT_TRUE(err);
  ASSERT_TRUE(ws.send_text(R"({"event":"set_period","data":{"period_ms":"fast"}})"));
  EXPECT_TRUE(ws.next_event("error", in(5s)));
  ASSERT_TRUE(ws.send_close(1000));
  (void)ws.next(in(5s));
  EXPECT_TRUE(ws.closed());
  expect_clean_stop();
}

// A message goes in one frame, whatever its size: Beast's default cut it into 4 KiB frames, one write each,
// which made 10 000 clients five times as costly (issue 24, bench/RESULTS.md).
TEST_F(Serve, AnUpdateLargerThanBeastsWriteBufferIsOneFrame) {
  ASSERT_TRUE(start("sim", {"--sim-gpus", "8", "--interval", "1"}));
  WsConn ws(port(), "/ws?period_ms=1000");
  ASSERT_TRUE(ws.open()) << ws.handshake.status << " " << ws.handshake.raw_head;
  auto first = ws.next(in(10s));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->event(), "gpu_status");
  auto update = ws.next_event("gpu_status_update", in(10s));
  ASSERT_TRUE(update);
  for (const auto* m : {&*first, &*update}) {
    ASSERT_GT(m->text.size(), 8192u) << "8 GPUs' reading is larger than two 4 KiB frames";
    EXPECT_EQ(m->frames, 1) << m->event() << " of " << m->text.size() << " bytes";
  }
  expect_clean_stop();
}

TEST_F(Serve, WebSocketOriginIsCheckedAndClientsAreCapped) {
  ASSERT_TRUE(start("sim", {"--max-ws-clients", "2", "--allow-origin", "https://grafana.example"}));
  const std::string self = "http://127.0.0.1:" + std::to_string(port());

  WsConn evil(port(), "/ws", std::string("http://evil.example"));
  EXPECT_EQ(evil.handshake.status, 403) << evil.handshake.raw_head;
  WsConn evil_port(port(), "/ws", std::string("http://127.0.0.1:1"));
  EXPECT_EQ(evil_port.handshake.status, 403) << evil_port.handshake.raw_head;
  WsConn null_origin(port(), "/ws", std::string("null"));
  EXPECT_EQ(null_origin.handshake.status, 403) << null_origin.handshake.raw_head;
  expect_healthy(port(), "refused handshakes");

  WsConn a(port(), "/ws", self);
  ASSERT_TRUE(a.open()) << a.handshake.raw_head;
  auto ga = a.next(in(10s));
  ASSERT_TRUE(ga);
  EXPECT_EQ(ga->event(), "gpu_status");
  WsConn b(port(), "/ws", std::string("https://grafana.example"));
  ASSERT_TRUE(b.open()) << b.handshake.raw_head;
  ASSERT_TRUE(b.next(in(10s)));  // its greeting: it is registered now

  WsConn c(port(), "/ws", self);
  EXPECT_EQ(c.handshake.status, 503) << c.handshake.raw_head;
  auto health = get_json(port(), "/api/health");
  EXPECT_EQ(health["websocket_clients"], 2);

  // When one leaves, a place is free again.
  ASSERT_TRUE(a.send_close(1000));
  (void)a.next(in(5s));
  std::string last;
  const bool joined = test::eventually(
      [&] {
        WsConn d(port(), "/ws", self);
        last = d.handshake.raw_head;
        return d.open();
      },
      10s, 50ms);
  EXPECT_TRUE(joined) << "no place after a client left; last answer: " << last;
  expect_clean_stop();
}

// Upgrades that arrive together are counted against the cap before their handshakes finish: exactly
// the cap's number get 101, the others 503 (none is accepted and then closed with 1013).
TEST_F(Serve, ABurstOfHandshakesNeverPassesTheCap) {
  ASSERT_TRUE(start("sim", {"--max-ws-clients", "3"}));
  const std::string upgrade =
      "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  std::vector<Sock> socks;
  for (int i = 0; i < 60; ++i) socks.emplace_back(port());
  for (auto& s : socks) ASSERT_TRUE(s.ok() && s.send_all(upgrade));
  int accepted = 0, refused = 0, other = 0;
  for (auto& s : socks) {
    const auto r = read_response(s, in(20s));
    if (r.status == 101)
      ++accepted;
    else if (r.status == 503)
      ++refused;
    else
      ++other;
  }
  EXPECT_EQ(accepted, 3);
  EXPECT_EQ(refused, 57);
  EXPECT_EQ(other, 0);
  auto health = get_json(port(), "/api/health");
  EXPECT_EQ(health["websocket_clients"], 3);
  socks.clear();
  expect_clean_stop();
}

// Real time, on purpose: the alert follows the simulated GPU's scenario as the agent process plays it
// (idle 8 s, busy 2 s), seen over a real WebSocket.
TEST_F(Serve, HighUsageAlertFiresAndResolvesOverWebSocket) {
  // One GPU: idle for 8 s after start (an agent under ASan on a loaded machine took 4.5 s to its first
  // update), busy (95 %) for 2 s, idle again; the rule fires at once above 50 %.
  const auto scenario = write_file("sim.json", R"({
    "gpus": [{"name": "Sim Alert", "period_s": 0,
              "load": [{"t": 0, "utilization": 5, "memory_used_mib": 1000}, {"t": 8, "utilization": 5, "memory_used_mib": 1000},
                       {"t": 8.01, "utilization": 95, "memory_used_mib": 1000}, {"t": 10, "utilization": 95, "memory_used_mib": 1000},
                       {"t": 10.01, "utilization": 5, "memory_used_mib": 1000}, {"t": 11, "utilization": 5, "memory_used_mib": 1000}]}]
  })");
  const auto cfg = write_file("agent.json", R"({"alerts": {"high_gpu_usage": {"threshold": 50, "duration_s": 0}}})");
  ASSERT_TRUE(start("sim", {"--interval", "0.2", "--config", cfg}, {"GPUFLEET_SIM_SCENARIO=" + scenario}));
  WsConn ws(port(), "/ws?period_ms=1000");
  ASSERT_TRUE(ws.open()) << ws.handshake.raw_head;
  ASSERT_TRUE(ws.next(in(10s)));
  ASSERT_LT(ms_since(agent.started()), 7500) << "the agent started too slowly for the scenario's idle first 8 s";
  auto rules = get_json(port(), "/api/v1/alerts");
  EXPECT_TRUE(rules["firing"].empty()) << rules.dump();

  auto firing = ws.next_event("high_gpu_usage_alert", in(15s));
  ASSERT_TRUE(firing) << "no high_gpu_usage_alert";
  auto fj = firing->j();
  EXPECT_EQ(fj["data"]["state"], "firing") << firing->text;
  EXPECT_EQ(fj["data"]["gpu_index"], 0);
  EXPECT_GT(fj["data"]["value"].get<double>(), 50);
  const auto alert_id = fj["data"]["id"];
  EXPECT_EQ(get_json(port(), "/api/v1/alerts")["firing"].size(), 1u);

  auto resolved = ws.next_event("high_gpu_usage_alert", in(15s));
  ASSERT_TRUE(resolved) << "the alert never resolved";
  auto rj = resolved->j();
  EXPECT_EQ(rj["data"]["state"], "resolved") << resolved->text;
  EXPECT_EQ(rj["data"]["id"], alert_id);
  EXPECT_TRUE(rj["data"]["resolved_at"].is_string());

  // The episode is stored (history is written in batches: poll).
  bool stored = false;
  json last;
  test::eventually(
      [&] {
        last = get_json(port(), "/api/v1/alerts");
        if (::testing::Test::HasFailure()) return true;
        for (const auto& a : last["recent"])
          if (a["rule"] == "high_gpu_usage" && a["resolved_at"].is_string() && a["state"] == "resolved") stored = true;
        return stored;
      },
      15s, 100ms);
  EXPECT_TRUE(stored) << last.dump();
  EXPECT_TRUE(last["firing"].empty()) << last.dump();
  expect_clean_stop();
}

// Real time, on purpose: the shipped binary's own stall timeout (1 s here) is what drops the client; no
// fake clock reaches into another process.
TEST_F(Serve, ASlowWebSocketClientDelaysNoOne) {
  // 64 simulated GPUs: each update is tens of kilobytes, so a client that never reads fills its
  // buffers within a second. With a 1 s stall timeout the agent drops it.
  unsetenv("GPUFLEET_SIM_SCENARIO");
  const auto cfg = write_file("agent.json", R"({"websocket": {"stall_timeout_s": 1}})");
  ASSERT_TRUE(start("sim", {"--sim-gpus", "64", "--interval", "0.5", "--config", cfg}));
  WsConn stuck(port(), "/ws?period_ms=100", std::nullopt, 4096);
  ASSERT_TRUE(stuck.open()) << stuck.handshake.raw_head;
  WsConn normal(port(), "/ws?period_ms=200");
  ASSERT_TRUE(normal.open()) << normal.handshake.raw_head;
  auto greeting = normal.next(in(10s));
  ASSERT_TRUE(greeting);
  EXPECT_GT(greeting->text.size(), 16000u) << "updates too small to fill a buffer";

  int count = 0;
  auto gaps = update_gaps(normal, 3000ms, &count);
  EXPECT_GE(count, 8) << "updates in 3 s at 200 ms beside a stuck client";
  EXPECT_LE(median(gaps), 400);
  EXPECT_LT(gaps.empty() ? 1e9 : *std::max_element(gaps.begin(), gaps.end()), 1500) << "an update came very late";
  expect_healthy(port(), "a stuck WebSocket client");

  // The stuck client is dropped after its stall timeout; the normal one stays.
  // Reading the normal client meanwhile paces the polls (an update every 200 ms) and keeps it current.
  const bool dropped = test::eventually(
      [&] {
        (void)normal.next(in(100ms));
        return get_json(port(), "/api/health")["websocket_clients"] == 1;
      },
      15s, 0ms);
  EXPECT_TRUE(dropped) << "the stuck client was never dropped";
  EXPECT_TRUE(normal.next_event("gpu_status_update", in(5s))) << "the normal client lost its updates";
  expect_clean_stop();
}

}  // namespace
}  // namespace gf::serve_test
