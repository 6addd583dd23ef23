#include "server/ws_hub.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "rig.hpp"
#include "support/fake_clock.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

Text msg(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

// ---- OutboundQueue -----------------------------------------------------------------------------

TEST(OutboundQueue, FifoWithinCapacity) {
  OutboundQueue q(3);
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.push(msg("a"), true));
  EXPECT_TRUE(q.push(msg("b"), false));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(**q.pop(), "a");
  EXPECT_EQ(**q.pop(), "b");
  EXPECT_FALSE(q.pop());
  EXPECT_EQ(q.dropped(), 0u);
}

TEST(OutboundQueue, DropsTheOldestDroppableFirst) {
  OutboundQueue q(3);
  ASSERT_TRUE(q.push(msg("alert1"), false));
  ASSERT_TRUE(q.push(msg("update1"), true));
  ASSERT_TRUE(q.push(msg("update2"), true));
  ASSERT_TRUE(q.push(msg("update3"), true));  // full: update1 goes, the alert stays
  EXPECT_EQ(q.dropped(), 1u);
  ASSERT_TRUE(q.push(msg("alert2"), false));  // full: update2 goes
  EXPECT_EQ(q.dropped(), 2u);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(**q.pop(), "alert1");
  EXPECT_EQ(**q.pop(), "update3");
  EXPECT_EQ(**q.pop(), "alert2");
  EXPECT_TRUE(q.empty());
}

TEST(OutboundQueue, RefusesWhenFullOfNonDroppables) {
  OutboundQueue q(2);
  ASSERT_TRUE(q.push(msg("a"), false));
  ASSERT_TRUE(q.push(msg("b"), false));
  EXPECT_FALSE(q.push(msg("c"), false));
  EXPECT_FALSE(q.push(msg("d"), true));  // an update cannot push out a reply either
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.dropped(), 0u);
  EXPECT_EQ(**q.pop(), "a");
  EXPECT_TRUE(q.push(msg("c"), false));
}

TEST(OutboundQueue, BoundedInBytesDroppingUpdatesFirst) {
  OutboundQueue q(100, 10);
  ASSERT_TRUE(q.push(msg("aaaa"), true));
  ASSERT_TRUE(q.push(msg("bbbb"), false, true));
  EXPECT_EQ(q.bytes(), 8u);
  EXPECT_EQ(q.charged_bytes(), 4u);
  ASSERT_TRUE(q.push(msg("cccc"), true));  // the oldest update goes to make room
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_EQ(q.bytes(), 8u);
  EXPECT_FALSE(q.push(msg("dddddddd"), false));  // a reply that cannot fit even after the update goes
  EXPECT_EQ(**q.front(), "bbbb");
  EXPECT_EQ(**q.pop(), "bbbb");
  EXPECT_EQ(q.charged_bytes(), 0u);
  EXPECT_TRUE(q.push(msg("012345678901"), true));  // an update larger than the budget alone is dropped
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.dropped(), 3u);
  q.push(msg("xy"), false, true);
  q.clear();
  EXPECT_EQ(q.bytes(), 0u);
  EXPECT_EQ(q.charged_bytes(), 0u);
  EXPECT_EQ(q.front(), nullptr);
}

TEST(OutboundQueue, ZeroCapacityMeansOne) {
  OutboundQueue q(0);
  EXPECT_TRUE(q.push(msg("a"), true));
  EXPECT_TRUE(q.push(msg("b"), true));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_EQ(**q.pop(), "b");
}

// ---- WsHub -------------------------------------------------------------------------------------

// What a /ws connection would send: each message's frame, and whether it may be dropped.
class FakeClient final : public WsClient {
 public:
  void send(const Message& m) override {
    std::lock_guard lock(mu_);
    got_.emplace_back(ws_frame(m), m.droppable());
  }
  std::size_t count(std::string_view event) const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& [t, d] : got_)
      if (json::parse(*t).at("event") == event) ++n;
    return n;
  }
  std::size_t total() const {
    std::lock_guard lock(mu_);
    return got_.size();
  }
  std::vector<std::pair<Text, bool>> messages() const {
    std::lock_guard lock(mu_);
    return got_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<Text, bool>> got_;
};

// On a manual hub and a fake clock: the test makes every tick (tick_for), so what arrives, and what
// does not, is decided by the ticks, never by waiting.
struct WsHubTest : ::testing::Test {
  test::FakeClock clock;
  testing::AgentRig rig{clock, sampler::SampleHub::Drive::Manual};
  std::unique_ptr<WsHub> ws;
  void SetUp() override {
    node::AgentOptions ao;
    ao.interval = std::chrono::hours(1);  // the agent's own loop stays out of the way
    ao.node_name = "node-a";
    rig.make_agent(ao);
    rig.agent->start();
    ASSERT_TRUE(rig.agent->latest());
  }
  void TearDown() override {
    if (ws) ws->close_all();
    ws.reset();
  }
  void make_hub(WsOptions o = {}) { ws = std::make_unique<WsHub>(*rig.agent, *rig.hub, o); }
  // Moves the clock by `d` in 100 ms steps (the shortest period), ticking the hub after each.
  void tick_for(std::chrono::milliseconds d) {
    for (auto t = 0ms; t < d; t += 100ms) {
      clock.advance(100ms);
      rig.step();
    }
  }
  static json parsed(const Text& t) { return json::parse(*t); }
  static json parsed(const MessagePtr& m) { return json::parse(*ws_frame(*m)); }
};

TEST_F(WsHubTest, AddGreetsWithGpuStatus) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, std::nullopt);
  ASSERT_TRUE(j);
  EXPECT_GE(j->id, 1u);
  const auto g = parsed(j->greeting);
  EXPECT_EQ(g.at("event"), "gpu_status");
  EXPECT_EQ(g.at("data").at("node"), "node-a");
  EXPECT_EQ(g.at("data").at("gpus").size(), 2u);
  EXPECT_EQ(ws->clients(), 1u);
  auto j2 = ws->add(c, std::nullopt);
  ASSERT_TRUE(j2);
  EXPECT_NE(j2->id, j->id);
}

TEST_F(WsHubTest, CapRefusesTheNextClient) {
  WsOptions o;
  o.max_clients = 2;
  make_hub(o);
  auto c = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(c, 5000ms));
  auto second = ws->add(c, 5000ms);
  ASSERT_TRUE(second);
  EXPECT_FALSE(ws->add(c, 5000ms));
  EXPECT_EQ(ws->clients(), 2u);
  EXPECT_EQ(ws->max_clients(), 2u);
  ws->remove(second->id);
  EXPECT_TRUE(ws->add(c, 5000ms));  // room again
  ws->remove(12345);                // an unknown id is ignored
  EXPECT_EQ(ws->clients(), 2u);
}

TEST_F(WsHubTest, ClampPeriod) {
  make_hub();
  EXPECT_EQ(ws->clamp_period(0ms), 100ms);
  EXPECT_EQ(ws->clamp_period(-5ms), 100ms);
  EXPECT_EQ(ws->clamp_period(99ms), 100ms);
  EXPECT_EQ(ws->clamp_period(100ms), 100ms);
  EXPECT_EQ(ws->clamp_period(149ms), 100ms);
  EXPECT_EQ(ws->clamp_period(150ms), 200ms);
  EXPECT_EQ(ws->clamp_period(1234ms), 1200ms);
  EXPECT_EQ(ws->clamp_period(1250ms), 1300ms);
  EXPECT_EQ(ws->clamp_period(5000ms), 5000ms);
  EXPECT_EQ(ws->clamp_period(std::chrono::hours(5)), std::chrono::hours(1));
  WsOptions o;
  o.min_period = 250ms;
  WsHub other(*rig.agent, *rig.hub, o);
  EXPECT_EQ(other.clamp_period(260ms), 300ms);
  EXPECT_EQ(other.clamp_period(100ms), 300ms);  // the minimum, rounded half up
}

TEST_F(WsHubTest, Envelope) {
  const Message m("period", msg(R"({"period_ms":100})"));
  const auto& e = ws_frame(m);
  EXPECT_EQ(*e, R"({"event":"period","data":{"period_ms":100}})");
  EXPECT_TRUE(json::accept(*e));
  EXPECT_EQ(ws_frame(m).get(), e.get());  // framed once
}

TEST_F(WsHubTest, RequestGpuUpdateAnswersTheLatestDocument) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, 5000ms);
  ASSERT_TRUE(j);
  auto reply = ws->on_message(j->id, R"({"event":"request_gpu_update"})");
  ASSERT_TRUE(reply);
  const auto r = parsed(*reply);
  EXPECT_EQ(r.at("event"), "gpu_status_update");
  EXPECT_EQ(r.at("data").at("node"), "node-a");
  EXPECT_EQ(r.at("data").at("gpus").at(1).at("utilization"), 80);
}

TEST_F(WsHubTest, BadMessagesAnswerAnError) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, 5000ms);
  ASSERT_TRUE(j);
  for (const char* text :
       {"not json", "[]", "42", R"({"data":{}})", R"({"event":7})", R"({"event":"dance"})", R"({"event":"set_period"})",
        R"({"event":"set_period","data":{"period_ms":"fast"}})", R"({"event":"set_period","data":{"period_ms":0}})",
        R"({"event":"set_period","data":{"period_ms":-100}})", R"({"event":"set_period","data":5})", ""}) {
    auto reply = ws->on_message(j->id, text);
    ASSERT_TRUE(reply) << text;
    const auto r = json::parse(*ws_frame(**reply), nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << *ws_frame(**reply);
    EXPECT_EQ(r.at("event"), "error") << text;
    EXPECT_TRUE(r.at("data").at("message").is_string()) << text;
  }
  auto unknown = ws->on_message(j->id, R"({"event":"dance"})");
  EXPECT_NE(ws_frame(**unknown)->find("dance"), std::string::npos);
}

TEST_F(WsHubTest, SetPeriodAnswersTheClampedPeriod) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, 5000ms);
  ASSERT_TRUE(j);
  auto reply = ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":1234.5}})");
  ASSERT_TRUE(reply);
  const auto r = parsed(*reply);
  EXPECT_EQ(r.at("event"), "period");
  EXPECT_EQ(r.at("data").at("period_ms"), 1200);
  auto low = ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":1}})");
  EXPECT_EQ(parsed(*low).at("data").at("period_ms"), 100);
  // A client the hub no longer knows gets no answer.
  ws->remove(j->id);
  EXPECT_FALSE(ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":500}})"));
}

TEST_F(WsHubTest, FastClientsGetUpdatesSlowOnesDoNot) {
  make_hub();
  auto fast = std::make_shared<FakeClient>();
  auto fast2 = std::make_shared<FakeClient>();
  auto slow = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(fast, 100ms));
  ASSERT_TRUE(ws->add(fast2, 100ms));
  ASSERT_TRUE(ws->add(slow, 5000ms));
  tick_for(1000ms);  // ten 100 ms ticks
  EXPECT_GE(fast->count("gpu_status_update"), 3u);
  EXPECT_GE(fast2->count("gpu_status_update"), 3u);
  // Within less than 5 s a 5 s grid has at most one point, whereas a client sent every tick would
  // have as many updates as the fast ones.
  EXPECT_LE(slow->count("gpu_status_update"), 1u);
  for (const auto& [t, droppable] : fast->messages()) {
    EXPECT_TRUE(droppable);  // periodic updates may be dropped by a slow connection
    const auto j = parsed(t);
    EXPECT_EQ(j.at("data").at("node"), "node-a");
    EXPECT_EQ(j.at("data").at("gpus").size(), 2u);
  }
}

TEST_F(WsHubTest, UpdatesFollowTheReadings) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(c, 100ms));
  rig.set_gpus({test::make_gpu(0, 33), test::make_gpu(1, 44), test::make_gpu(2, 55)});
  tick_for(300ms);
  bool three = false;
  for (const auto& [t, d] : c->messages()) three = three || parsed(t).at("data").at("gpus").size() == 3;
  EXPECT_TRUE(three);
}

TEST_F(WsHubTest, SetPeriodMovesAClientBetweenGroups) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, 3600000ms);
  ASSERT_TRUE(j);
  tick_for(300ms);
  EXPECT_LE(c->count("gpu_status_update"), 1u);  // at most an hourly grid point
  const auto before = c->count("gpu_status_update");
  auto reply = ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":100}})");
  ASSERT_TRUE(reply);
  EXPECT_EQ(parsed(*reply).at("data").at("period_ms"), 100);
  tick_for(300ms);
  EXPECT_GE(c->count("gpu_status_update"), before + 3);
  // And back: the 100 ms group is gone with its only member, so the updates stop.
  ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":3600000}})");
  const auto settled = c->count("gpu_status_update");
  tick_for(500ms);
  EXPECT_LE(c->count("gpu_status_update"), settled + 1);  // at most an hourly grid point
}

TEST_F(WsHubTest, RemoveStopsDelivery) {
  make_hub();
  auto stays = std::make_shared<FakeClient>();
  auto leaves = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(stays, 100ms));
  auto j = ws->add(leaves, 100ms);
  ASSERT_TRUE(j);
  tick_for(100ms);
  ASSERT_GE(leaves->count("gpu_status_update"), 1u);
  ws->remove(j->id);
  const auto at_removal = leaves->total();
  const auto stays_before = stays->count("gpu_status_update");
  tick_for(300ms);
  EXPECT_GE(stays->count("gpu_status_update"), stays_before + 3);
  EXPECT_EQ(leaves->total(), at_removal);  // the group lives on, without it
  EXPECT_EQ(ws->clients(), 1u);
}

TEST_F(WsHubTest, ExpiredClientIsSkipped) {
  make_hub();
  auto gone = std::make_shared<FakeClient>();
  auto stays = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(gone, 100ms));
  ASSERT_TRUE(ws->add(stays, 100ms));
  gone.reset();  // the connection closed before the transport called remove()
  tick_for(200ms);
  EXPECT_GE(stays->count("gpu_status_update"), 2u);
  ws->broadcast(Message("x", msg("null")));
  EXPECT_EQ(stays->count("x"), 1u);
}

TEST_F(WsHubTest, BroadcastReachesEveryoneWhateverThePeriod) {
  make_hub();
  auto a = std::make_shared<FakeClient>();
  auto b = std::make_shared<FakeClient>();
  auto c = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(a, 3600000ms));
  ASSERT_TRUE(ws->add(b, 5000ms));
  ASSERT_TRUE(ws->add(c, std::nullopt));
  const Message alert("high_gpu_usage_alert", msg(R"({"gpu_index":1})"));
  ws->broadcast(alert);
  for (const auto& cl : {a, b, c}) {
    ASSERT_EQ(cl->count("high_gpu_usage_alert"), 1u);
    for (const auto& [t, d] : cl->messages()) {
      if (t == ws_frame(alert)) {
        EXPECT_FALSE(d);  // alerts may not be dropped; the same text is shared
      }
    }
  }
}

TEST_F(WsHubTest, CloseAllForgetsEveryoneAndStopsUpdates) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(c, 100ms));
  ASSERT_TRUE(ws->add(c, 200ms));
  tick_for(200ms);
  ASSERT_GE(c->count("gpu_status_update"), 1u);
  ws->close_all();
  EXPECT_EQ(ws->clients(), 0u);
  const auto n = c->total();  // close_all unsubscribes the groups: no tick reaches a client after it
  tick_for(400ms);
  EXPECT_EQ(c->total(), n);
  ws->broadcast(Message("x", msg("{}")));
  EXPECT_EQ(c->total(), n);
}

}  // namespace
}  // namespace gf::server
