#include "server/socketio.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>

#include "rig.hpp"
#include "server/security.hpp"
#include "support/fake_clock.hpp"
#include "wire/engineio.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

Text text_of(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

class NullClient final : public WsClient {
 public:
  void send(const Message&) override { ++got; }
  std::atomic<int> got{0};
};

// The packets of a polling answer.
std::vector<std::string> split(const std::string& payload) {
  auto parts = wire::eio::split_payload(payload, 10'000'000, 100'000);
  std::vector<std::string> out;
  if (parts)
    for (auto p : *parts) out.emplace_back(p);
  return out;
}

// The Socket.IO event name of an Engine.IO message packet ("" when it is not one).
std::string event_of(const std::string& packet) {
  if (packet.rfind("42", 0) != 0) return {};
  auto p = wire::sio::parse_packet(std::string_view(packet).substr(1));
  return p ? p->event() : std::string();
}

// The collection ticks are the test's: a manual hub on a fake clock, ticked by tick().
struct SocketIoTest : ::testing::Test {
  test::FakeClock clock;
  testing::AgentRig rig{clock, sampler::SampleHub::Drive::Manual};
  std::unique_ptr<WsHub> ws;
  std::unique_ptr<SocketIo> sio;
  Clock::time_point t0 = Clock::now();
  // Wake counters live as long as the fixture: a session's WebSocket waker is also called when
  // TearDown closes it.
  std::atomic<int> woken{0};
  std::atomic<int> polled{0};
  std::atomic<int> ws_woken{0};

  void SetUp() override {
    node::AgentOptions ao;
    ao.interval = std::chrono::hours(1);  // the agent's own loop stays out of the way
    ao.node_name = "node-a";
    rig.make_agent(ao);
    rig.agent->start();
    ASSERT_TRUE(rig.agent->latest());
  }
  void TearDown() override {
    if (sio) sio->close_all();
    sio.reset();
    if (ws) ws->close_all();
    ws.reset();
  }
  void make(SioOptions o = {}, WsOptions w = {}) {
    sio.reset();
    ws.reset();
    w.default_period = std::chrono::hours(1);  // no periodic update interferes unless a test asks
    ws = std::make_unique<WsHub>(*rig.agent, *rig.hub, w);
    if (!o.token_ok) o.token_ok = [](std::string_view t) { return t == "good"; };
    sio = std::make_unique<SocketIo>(*ws, *rig.agent, std::move(o));
  }
  // One collection tick, `d` after the last.
  void tick(std::chrono::milliseconds d = 100ms) {
    clock.advance(d);
    rig.step();
  }
  std::shared_ptr<SioSession> open(bool authorized = true, std::string address = "10.0.0.1",
                                   SioTransport t = SioTransport::Polling) {
    auto s = sio->open({std::move(address), authorized, std::nullopt, t}, t0);
    return s ? *s : nullptr;
  }
  // POSTs "40" and takes what the connect queued.
  std::vector<std::string> connect(const std::shared_ptr<SioSession>& s, const std::string& body = "40") {
    EXPECT_TRUE(s->on_payload(body));
    EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Ready);
    return split(s->take_payload());
  }
};

TEST_F(SocketIoTest, OpenPacketAndSessionLookup) {
  make();
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->sid().size(), 32u);
  const auto open_packet = s->open_packet();
  ASSERT_EQ(open_packet.front(), '0');
  const auto j = json::parse(open_packet.substr(1));
  EXPECT_EQ(j.at("sid"), s->sid());
  EXPECT_EQ(j.at("upgrades"), json::array({"websocket"}));
  EXPECT_EQ(j.at("pingInterval"), 25000);
  EXPECT_EQ(j.at("pingTimeout"), 20000);
  EXPECT_EQ(sio->find(s->sid()), s);
  EXPECT_EQ(sio->find("nope"), nullptr);
  auto w = open(true, "10.0.0.1", SioTransport::WebSocket);
  ASSERT_TRUE(w);
  EXPECT_NE(w->sid(), s->sid());
  EXPECT_EQ(json::parse(w->open_packet().substr(1)).at("upgrades"), json::array());  // already on WebSocket
  EXPECT_EQ(sio->sessions(), 2u);
}

TEST_F(SocketIoTest, ConnectJoinsTheHubAndGreetsUnderBothNames) {
  make();
  auto s = open();
  ASSERT_EQ(s->begin_poll([&] { ++woken; }), SioSession::Poll::Wait);
  ASSERT_TRUE(s->on_payload("40"));
  EXPECT_EQ(woken.load(), 1);  // the pending GET is answered
  const auto packets = split(s->take_payload());
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_TRUE(packets[0].rfind("40{\"sid\":\"", 0) == 0) << packets[0];
  EXPECT_EQ(event_of(packets[1]), "gpu_status");
  EXPECT_EQ(event_of(packets[2]), "system:initial_status");
  const auto data = wire::sio::parse_packet(std::string_view(packets[1]).substr(1))->data.at(1);
  EXPECT_EQ(data.at("node"), "node-a");
  EXPECT_EQ(data.at("gpus").size(), 2u);
  EXPECT_TRUE(s->connected());
  EXPECT_EQ(ws->clients(), 1u);
  // DISCONNECT leaves the hub; the Engine.IO session stays.
  ASSERT_TRUE(s->on_payload("41"));
  EXPECT_EQ(ws->clients(), 0u);
  EXPECT_FALSE(s->closed());
}

TEST_F(SocketIoTest, OnlyTheDefaultNamespace) {
  make();
  auto s = open();
  const auto packets = connect(s, "40/admin,");
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_EQ(packets[0], R"(44/admin,{"message":"Invalid namespace"})");
  EXPECT_EQ(ws->clients(), 0u);
}

TEST_F(SocketIoTest, TokenAtConnectWhenTheHandshakeHadNone) {
  make();
  auto s = open(false);
  auto packets = connect(s);
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_TRUE(packets[0].rfind("44{\"message\":\"unauthorized", 0) == 0) << packets[0];
  EXPECT_EQ(ws->clients(), 0u);
  packets = connect(s, R"(40{"token":"bad"})");
  ASSERT_EQ(packets.size(), 1u);
  EXPECT_TRUE(packets[0].rfind("44", 0) == 0);
  packets = connect(s, R"(40{"token":7})");
  EXPECT_TRUE(packets.at(0).rfind("44", 0) == 0);
  packets = connect(s, R"(40{"token":"good"})");
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_TRUE(packets[0].rfind("40{", 0) == 0);
  EXPECT_EQ(ws->clients(), 1u);
}

TEST_F(SocketIoTest, RequestsAreAnsweredWithAcks) {
  make();
  auto s = open();
  connect(s);
  ASSERT_TRUE(
      s->on_payload("42[\"request_gpu_update\"]\x1e"
                    "4217[\"request_monitoring_stats\"]\x1e"
                    "429[\"dance\"]\x1e"
                    "42[\"dance\"]"));
  ASSERT_EQ(s->begin_poll([] {}), SioSession::Poll::Ready);
  const auto packets = split(s->take_payload());
  ASSERT_EQ(packets.size(), 4u);
  EXPECT_EQ(event_of(packets[0]), "gpu_status_update");
  EXPECT_EQ(event_of(packets[1]), "system:metrics_update");
  ASSERT_TRUE(packets[2].rfind("4317[", 0) == 0) << packets[2];
  const auto ack = wire::sio::parse_packet(std::string_view(packets[2]).substr(1));
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->data.at(0).at("gpus").at(1).at("utilization"), 80);
  ASSERT_TRUE(packets[3].rfind("439[", 0) == 0) << packets[3];  // an unknown event with an ack: an error
  EXPECT_TRUE(packets[3].find("unknown event") != std::string::npos);
}

TEST_F(SocketIoTest, EventsBeforeConnectAreIgnored) {
  make();
  auto s = open();
  ASSERT_TRUE(s->on_payload(R"(42["request_gpu_update"])"));
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Wait);
  EXPECT_FALSE(s->closed());
}

TEST_F(SocketIoTest, HubBroadcastsReachSessionsAndWsClientsAlike) {
  make();
  auto a = open();
  auto b = open(true, "10.0.0.2");
  connect(a);
  connect(b);
  auto plain = std::make_shared<NullClient>();
  ASSERT_TRUE(ws->add(plain, std::nullopt));
  EXPECT_EQ(ws->clients(), 3u);
  ws->broadcast(Message("high_gpu_usage_alert", text_of(R"({"state":"firing","gpu":1})"), false));
  EXPECT_EQ(plain->got.load(), 1);
  for (auto& s : {a, b}) {
    ASSERT_EQ(s->begin_poll([] {}), SioSession::Poll::Ready);
    const auto packets = split(s->take_payload());
    ASSERT_EQ(packets.size(), 1u);  // an alert has one name
    EXPECT_EQ(packets[0], R"(42["high_gpu_usage_alert",{"state":"firing","gpu":1}])");
  }
  // One framing per message, shared by every session.
  const Message update("gpu_status_update", text_of(R"({"gpus":[]})"), true);
  const auto& p1 = sio_frames(update);
  const auto& p2 = sio_frames(update);
  ASSERT_EQ(p1.size(), 2u);
  EXPECT_EQ(p1[0].get(), p2[0].get());
  EXPECT_EQ(*p1[0], R"(42["gpu_status_update",{"gpus":[]}])");
  EXPECT_EQ(*p1[1], R"(42["system:metrics_update",{"gpus":[]}])");
}

TEST_F(SocketIoTest, PeriodicUpdatesComeFromTheHubGroups) {
  make();
  auto s = sio->open({"10.0.0.1", true, 100ms, SioTransport::Polling}, t0);
  ASSERT_TRUE(s);
  connect(*s);
  ASSERT_EQ((*s)->begin_poll([&] { ++woken; }), SioSession::Poll::Wait);
  tick();
  ASSERT_GT(woken.load(), 0);
  const auto packets = split((*s)->take_payload());
  ASSERT_GE(packets.size(), 2u);
  EXPECT_EQ(event_of(packets[0]), "gpu_status_update");
  EXPECT_EQ(event_of(packets[1]), "system:metrics_update");
}

TEST_F(SocketIoTest, SecondConcurrentGetClosesTheSession) {
  make();
  auto s = open();
  connect(s);
  ASSERT_EQ(s->begin_poll([&] { ++woken; }), SioSession::Poll::Wait);
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Refused);
  EXPECT_EQ(woken.load(), 1);
  EXPECT_EQ(s->take_payload(), "1");
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(sio->find(s->sid()), nullptr);
  EXPECT_EQ(ws->clients(), 0u);
  EXPECT_EQ(sio->sessions(), 0u);
}

// tick_slice: each call ticks its share of a round's sessions; every session once per round.
TEST_F(SocketIoTest, TickSlicesTickEverySessionOncePerRound) {
  make();
  std::vector<std::shared_ptr<SioSession>> all;
  for (int i = 0; i < 5; ++i) {
    all.push_back(open());
    connect(all.back());
  }
  // Each session's poll waits; a ping wakes it.
  std::vector<int> woke(all.size(), 0);
  for (std::size_t i = 0; i < all.size(); ++i)
    ASSERT_EQ(all[i]->begin_poll([&woke, i] { ++woke[i]; }), SioSession::Poll::Wait);
  auto pinged = [&] { return std::count_if(woke.begin(), woke.end(), [](int w) { return w > 0; }); };
  // Three slices of 5 sessions: 2, 2, then 1; the round ends on the third call.
  EXPECT_FALSE(sio->tick_slice(t0 + 25s, 3));
  EXPECT_EQ(pinged(), 2);
  EXPECT_FALSE(sio->tick_slice(t0 + 25s, 3));
  EXPECT_EQ(pinged(), 4);
  EXPECT_TRUE(sio->tick_slice(t0 + 25s, 3));
  EXPECT_EQ(pinged(), 5);
  for (auto& s : all) EXPECT_EQ(s->take_payload(), "2");
  // Two slices: 3 then 2; a session closed mid-round does not stop the round.
  EXPECT_FALSE(sio->tick_slice(t0 + 26s, 2));
  all.back()->close();
  EXPECT_TRUE(sio->tick_slice(t0 + 26s, 2));
  EXPECT_TRUE(all.back()->closed());
  EXPECT_FALSE(all.front()->closed());
}

TEST_F(SocketIoTest, PingPongAndTimeouts) {
  make();
  auto s = open();
  connect(s);
  sio->tick(t0 + 24s);
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Wait);  // no ping before the interval
  sio->tick(t0 + 25s);
  EXPECT_EQ(s->take_payload(), "2");
  ASSERT_TRUE(s->on_payload("3"));  // pong
  sio->tick(t0 + 46s);              // the old deadline passed, but the pong came
  EXPECT_FALSE(s->closed());
  sio->tick(t0 + 50s);  // the next ping
  ASSERT_EQ(s->begin_poll([] {}), SioSession::Poll::Ready);
  EXPECT_EQ(s->take_payload(), "2");
  sio->tick(t0 + 70s);  // exactly at the deadline: still open
  EXPECT_FALSE(s->closed());
  sio->tick(t0 + 71s);  // no pong within pingTimeout
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(ws->clients(), 0u);
  EXPECT_EQ(sio->sessions(), 0u);
}

TEST_F(SocketIoTest, ASessionThatNeverConnectsIsFreed) {
  make();
  auto s = open();
  sio->tick(t0 + 25s);
  ASSERT_TRUE(s->on_payload("3"));
  sio->tick(t0 + 45s);
  EXPECT_FALSE(s->closed());
  sio->tick(t0 + 46s);
  EXPECT_TRUE(s->closed());
}

TEST_F(SocketIoTest, BadPacketsCloseTheSession) {
  make();
  for (const char* body : {"451-[\"x\",{\"_placeholder\":true,\"num\":0}]", "4[not json", "9", "bAQID", "0",
                           "42[\"a\",[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"}) {
    auto s = open();
    connect(s);
    (void)s->on_payload(body);
    EXPECT_TRUE(s->closed()) << body;
  }
  auto s = open();
  EXPECT_FALSE(s->on_payload(""));
  EXPECT_TRUE(s->closed());
  SioOptions o;
  o.max_payload = 100;
  make(o);
  s = open();
  EXPECT_FALSE(s->on_payload("4" + std::string(200, ' ')));
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(sio->sessions(), 0u);
}

TEST_F(SocketIoTest, CloseFromTheClient) {
  make();
  auto s = open();
  connect(s);
  ASSERT_TRUE(s->on_payload("1"));
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(ws->clients(), 0u);
}

TEST_F(SocketIoTest, UpgradeFromPolling) {
  make();
  auto s = open();
  connect(s);
  ASSERT_EQ(s->begin_poll([&] { ++polled; }), SioSession::Poll::Wait);
  ASSERT_TRUE(s->attach_ws([&] { ++ws_woken; }));
  EXPECT_FALSE(s->attach_ws([] {}));  // one WebSocket per session
  // Before the probe nothing but the probe counts on the WebSocket.
  EXPECT_FALSE(s->on_packet("42[\"request_gpu_update\"]", SioTransport::WebSocket));
  EXPECT_EQ(s->on_packet("2probe", SioTransport::WebSocket), std::optional<std::string>("3probe"));
  EXPECT_EQ(polled.load(), 1);  // the pending GET ends with a noop
  EXPECT_EQ(s->take_payload(), "6");
  EXPECT_FALSE(s->on_websocket());
  ws->broadcast(Message("x_alert", text_of("{}"), false));  // still polling: queued for a GET
  EXPECT_FALSE(s->on_packet("5", SioTransport::WebSocket));
  EXPECT_TRUE(s->on_websocket());
  EXPECT_GE(ws_woken.load(), 1);
  auto first = s->take_one();
  ASSERT_TRUE(first);
  EXPECT_EQ(**first, R"(42["x_alert",{}])");
  EXPECT_FALSE(s->take_one());
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Refused);  // polling is over
  EXPECT_FALSE(s->closed());
  // Events now come over the WebSocket.
  EXPECT_FALSE(s->on_packet("42[\"request_gpu_update\"]", SioTransport::WebSocket));
  auto reply = s->take_one();
  ASSERT_TRUE(reply);
  EXPECT_EQ(event_of(**reply), "gpu_status_update");
  // The WebSocket goes away after the upgrade: so does the session.
  s->detach_ws();
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(ws->clients(), 0u);
}

TEST_F(SocketIoTest, AFailedProbeLeavesPollingAlone) {
  make();
  auto s = open();
  connect(s);
  ASSERT_TRUE(s->attach_ws([] {}));
  s->detach_ws();
  EXPECT_FALSE(s->closed());
  EXPECT_FALSE(s->on_websocket());
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Wait);
  ASSERT_TRUE(s->attach_ws([] {}));  // a new try is allowed
}

TEST_F(SocketIoTest, ASessionStartedOnWebSocket) {
  make();
  auto s = open(true, "10.0.0.1", SioTransport::WebSocket);
  ASSERT_TRUE(s->attach_ws([&] { ++woken; }));
  EXPECT_FALSE(s->on_packet("40", SioTransport::WebSocket));
  EXPECT_GE(woken.load(), 1);
  auto p = s->take_one();
  ASSERT_TRUE(p);
  EXPECT_TRUE((*p)->rfind("40{", 0) == 0);
  EXPECT_EQ(event_of(**s->take_one()), "gpu_status");
  EXPECT_EQ(event_of(**s->take_one()), "system:initial_status");
  EXPECT_FALSE(s->take_one());
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Refused);
}

TEST_F(SocketIoTest, AClientThatDoesNotReadIsClosed) {
  SioOptions o;
  o.queue = 4;
  make(o);
  auto s = open();
  connect(s);
  for (int i = 0; i < 4; ++i) ws->broadcast(Message("x_alert", text_of("{}"), false));
  EXPECT_FALSE(s->closed());
  ws->broadcast(Message("x_alert", text_of("{}"), false));  // the fifth alert does not fit
  EXPECT_TRUE(s->closed());
  sio->tick(t0 + 1s);  // closed on a hub call: it leaves the hub on the next tick
  EXPECT_EQ(ws->clients(), 0u);
  // Updates are dropped instead (the oldest first), never closing.
  auto t = open();
  connect(t);
  for (int i = 0; i < 20; ++i) ws->broadcast(Message("gpu_status_update", text_of("{}"), true));
  EXPECT_FALSE(t->closed());
}

// Alerts are broadcast from inside a collection tick: a session that overflows there must not leave
// the hub synchronously (unsubscribing its group would wait for that very tick).
TEST_F(SocketIoTest, OverflowInsideACollectionTickDoesNotDeadlock) {
  SioOptions o;
  o.queue = 4;
  make(o);
  auto s = open();
  connect(s);
  ASSERT_EQ(ws->clients(), 1u);
  std::atomic<bool> done{false};
  auto sub = rig.hub->subscribe(
      100ms,
      [&](const Result<core::SnapshotPtr>&, auto) {
        if (done.exchange(true)) return;
        for (int i = 0; i < 6; ++i) ws->broadcast(Message("x_alert", text_of("{}"), false));
      },
      false);
  tick();  // returns: the session's removal from the hub did not wait for this very tick
  ASSERT_TRUE(done.load() && s->closed());
  sio->tick(t0 + 1s);  // the deferred removal
  EXPECT_EQ(ws->clients(), 0u);
  EXPECT_EQ(sio->sessions(), 0u);
}

TEST_F(SocketIoTest, CapsCountWsClientsAndAddresses) {
  SioOptions o;
  o.max_sessions_per_address = 2;
  WsOptions w;
  w.max_clients = 4;
  make(o, w);
  auto a = open();
  auto b = open();
  EXPECT_TRUE(a && b);
  EXPECT_FALSE(open());  // a third from the same address
  auto c = open(true, "10.0.0.9");
  ASSERT_TRUE(c);
  // Unconnected sessions hold places: with one /ws client the cap (4) is reached.
  auto plain = std::make_shared<NullClient>();
  ASSERT_TRUE(ws->add(plain, std::nullopt));
  auto refused = sio->open({"10.0.0.8", true, std::nullopt, SioTransport::Polling}, t0);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::Unavailable);
  a->close();  // its place and its address's count go back
  EXPECT_TRUE(open());
}

// Security review, finding 1: an upgrade answers one probe; a second one (or anything but "5" after
// the probe) ends the session instead of queueing answers the agent would hold.
TEST_F(SocketIoTest, AnUpgradeAnswersOneProbeOnly) {
  make();
  auto s = open(false);  // not even authorised: nothing to gain from the flood
  ASSERT_TRUE(s->attach_ws([] {}));
  EXPECT_EQ(s->on_packet("2probe", SioTransport::WebSocket), std::optional<std::string>("3probe"));
  EXPECT_FALSE(s->closed());
  EXPECT_FALSE(s->on_packet("2probe", SioTransport::WebSocket));
  EXPECT_TRUE(s->closed());
  EXPECT_EQ(sio->sessions(), 0u);
  // After the probe, anything but the upgrade also ends it.
  auto t = open();
  connect(t);
  ASSERT_TRUE(t->attach_ws([] {}));
  EXPECT_TRUE(t->on_packet("2probe", SioTransport::WebSocket));
  EXPECT_FALSE(t->on_packet("42[\"request_gpu_update\"]", SioTransport::WebSocket));
  EXPECT_TRUE(t->closed());
  // A new upgrade (after a failed one) gets its own probe.
  auto u = open();
  ASSERT_TRUE(u->attach_ws([] {}));
  EXPECT_TRUE(u->on_packet("2probe", SioTransport::WebSocket));
  u->detach_ws();
  ASSERT_TRUE(u->attach_ws([] {}));
  EXPECT_EQ(u->on_packet("2probe", SioTransport::WebSocket), std::optional<std::string>("3probe"));
  EXPECT_FALSE(u->on_packet("5", SioTransport::WebSocket));
  EXPECT_TRUE(u->on_websocket());
  EXPECT_EQ(sio->charged_bytes(), 0u);
}

// Finding 2: a client's ping is not echoed (Engine.IO 4 clients send none), connected or not.
TEST_F(SocketIoTest, ClientPingsAreNotEchoed) {
  make();
  auto s = open(false);
  ASSERT_TRUE(s->on_payload("2" + std::string(3000, 'x') + "\x1e" + "2more"));
  EXPECT_EQ(s->begin_poll([] {}), SioSession::Poll::Wait);
  EXPECT_EQ(s->take_payload(), "6");
  auto t = open();
  connect(t);
  ASSERT_TRUE(t->on_payload("2ping"));
  EXPECT_EQ(t->begin_poll([] {}), SioSession::Poll::Wait);
  EXPECT_EQ(sio->charged_bytes(), 0u);
}

// Finding 2: every session has a byte budget, and so have all sessions together for what each queues
// for itself alone. A reply that does not fit closes its session; updates are dropped instead.
TEST_F(SocketIoTest, QueuedBytesAreBoundedPerSessionAndInAll) {
  SioOptions o;
  o.max_queued_bytes = 64 * 1024;
  make(o);
  auto s = open();
  connect(s);
  // Each request_gpu_update queues the whole reading, twice with an ack: far past 64 KiB in 64 packets.
  const std::size_t doc = rig.agent->latest()->document()->size();
  ASSERT_GT(doc, 200u);
  int sent = 0;
  while (!s->closed() && sent < 1000) {
    (void)s->on_payload("421[\"request_gpu_update\"]");
    ++sent;
    EXPECT_LE(sio->charged_bytes(), o.max_queued_bytes);
  }
  EXPECT_TRUE(s->closed());
  EXPECT_LE(static_cast<std::size_t>(sent), o.max_queued_bytes / doc + 1);
  EXPECT_EQ(sio->charged_bytes(), 0u);  // a closed session holds nothing
  // Large droppable updates are dropped to fit, never closing.
  auto t = open();
  connect(t);
  const std::string big(20 * 1024, 'x');
  for (int i = 0; i < 20; ++i) ws->broadcast(Message("gpu_status_update", text_of("\"" + big + "\""), true));
  EXPECT_FALSE(t->closed());
  ASSERT_EQ(t->begin_poll([] {}), SioSession::Poll::Ready);
  EXPECT_LE(t->take_payload().size(), o.max_queued_bytes);

  // In all: three sessions under a total smaller than two sessions' budgets.
  o.max_queued_bytes = 1 << 20;
  o.max_total_queued_bytes = 3 * doc;
  make(o);
  std::vector<std::shared_ptr<SioSession>> all;
  for (int i = 0; i < 3; ++i) {
    all.push_back(open(true, "10.0.0." + std::to_string(i + 1)));
    connect(all.back());
  }
  for (auto& x : all) (void)x->on_payload("42[\"request_gpu_update\"]");
  EXPECT_FALSE(all[0]->closed());
  EXPECT_LE(sio->charged_bytes(), o.max_total_queued_bytes);
  // Whoever did not fit was closed, and its bytes went back.
  const auto open_count = std::count_if(all.begin(), all.end(), [](auto& x) { return !x->closed(); });
  EXPECT_LT(open_count, 3);
  ASSERT_EQ(all[0]->begin_poll([] {}), SioSession::Poll::Ready);
  EXPECT_EQ(event_of(split(all[0]->take_payload()).front()), "gpu_status_update");
}

// Finding 5: every loopback address is one client address for the session cap (any local user may
// bind any of them), and so is an IPv6 /64.
TEST_F(SocketIoTest, LoopbackAddressesAndIpv6SlashSixtyFoursShareOneCap) {
  SioOptions o;
  o.max_sessions_per_address = 3;
  make(o);
  EXPECT_TRUE(open(true, "127.0.0.1"));
  EXPECT_TRUE(open(true, "127.0.0.2"));
  EXPECT_TRUE(open(true, "::1"));
  EXPECT_FALSE(open(true, "127.0.0.30"));
  EXPECT_FALSE(open(true, "127.255.255.254"));
  EXPECT_TRUE(open(true, "10.0.0.1"));
  EXPECT_TRUE(open(true, "2001:db8:1:2::1"));
  EXPECT_TRUE(open(true, "2001:db8:1:2::2"));
  EXPECT_TRUE(open(true, "2001:db8:1:2:ffff::9"));
  EXPECT_FALSE(open(true, "2001:db8:1:2:1:2:3:4"));
  EXPECT_TRUE(open(true, "2001:db8:1:3::1"));  // another /64
}

// Finding 5: Socket.IO never takes the last quarter of the client places: /ws (the dashboard) keeps it.
TEST_F(SocketIoTest, AQuarterOfThePlacesIsKeptForWs) {
  SioOptions o;
  o.max_sessions_per_address = 100;
  WsOptions w;
  w.max_clients = 8;
  make(o, w);
  std::vector<std::shared_ptr<SioSession>> all;
  for (int i = 0; i < 8; ++i)
    if (auto s = open(true, "10.0.1." + std::to_string(i))) {
      connect(s);
      all.push_back(s);
    }
  EXPECT_EQ(all.size(), 6u);
  EXPECT_EQ(ws->clients(), 6u);
  auto plain = std::make_shared<NullClient>();
  auto other = std::make_shared<NullClient>();
  EXPECT_TRUE(ws->add(plain, std::nullopt));
  EXPECT_TRUE(ws->add(other, std::nullopt));
}

// Finding 5: a session with no pending GET and no WebSocket holds no connection; after two ping
// intervals without either, it is closed (its place goes back), connected or not.
TEST_F(SocketIoTest, ASessionWithoutATransportDiesAfterTwoPingIntervals) {
  make();
  auto idle = open();
  connect(idle);
  (void)idle->on_payload("3");  // pongs keep coming, as in the review's repro, but no GET
  auto polling = open(true, "10.0.0.2");
  connect(polling);
  auto on_ws = open(true, "10.0.0.3", SioTransport::WebSocket);
  ASSERT_TRUE(on_ws->attach_ws([] {}));
  (void)on_ws->on_packet("40", SioTransport::WebSocket);
  bool pending = false;
  std::atomic<bool> answer{false};
  for (auto t = 1s; t <= 51s; t += 1s) {
    if (!pending) {
      pending = polling->begin_poll([&] { answer = true; }) == SioSession::Poll::Wait;
      if (!pending) (void)polling->take_payload();
    } else if (answer.exchange(false)) {
      (void)polling->take_payload();
      pending = false;
    }
    (void)polling->on_payload("3");
    (void)idle->on_payload("3");
    (void)on_ws->on_packet("3", SioTransport::WebSocket);
    while (on_ws->take_one()) {
    }
    sio->tick(t0 + t);
  }
  EXPECT_TRUE(idle->closed());
  EXPECT_FALSE(polling->closed());
  EXPECT_FALSE(on_ws->closed());
}

// Security review, finding 5 and the held attacks: the buckets.
TEST(ClientBucket, LoopbackIsOneAndIpv6CountsBySlashSixtyFour) {
  EXPECT_EQ(client_bucket("127.0.0.1"), "loopback");
  EXPECT_EQ(client_bucket("127.3.2.1"), "loopback");
  EXPECT_EQ(client_bucket("::1"), "loopback");
  EXPECT_EQ(client_bucket("::ffff:127.0.0.5"), "loopback");
  EXPECT_EQ(client_bucket("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(client_bucket("128.0.0.1"), "128.0.0.1");
  EXPECT_EQ(client_bucket("2001:db8:a:b:c:d:e:f"), "2001:db8:a:b::/64");
  EXPECT_EQ(client_bucket("fe80::1"), "fe80::/64");
  EXPECT_EQ(client_bucket("?"), "?");
}

}  // namespace
}  // namespace gf::server
