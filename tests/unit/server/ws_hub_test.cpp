#include "server/ws_hub.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "rig.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::eventually;

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

class FakeClient final : public WsClient {
 public:
  void send(Text text, bool droppable) override {
    std::lock_guard lock(mu_);
    got_.emplace_back(std::move(text), droppable);
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

struct WsHubTest : ::testing::Test {
  testing::AgentRig rig;
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
  static json parsed(const Text& t) { return json::parse(*t); }
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
  const auto e = WsHub::envelope("period", R"({"period_ms":100})");
  EXPECT_EQ(*e, R"({"event":"period","data":{"period_ms":100}})");
  EXPECT_TRUE(json::accept(*e));
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
    const auto r = json::parse(**reply, nullptr, false);
    ASSERT_FALSE(r.is_discarded()) << **reply;
    EXPECT_EQ(r.at("event"), "error") << text;
    EXPECT_TRUE(r.at("data").at("message").is_string()) << text;
  }
  auto unknown = ws->on_message(j->id, R"({"event":"dance"})");
  EXPECT_NE((*unknown)->find("dance"), std::string::npos);
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
  const auto started = std::chrono::steady_clock::now();
  // Several 100 ms ticks; the limit is far above 300 ms so a loaded machine does not fail it.
  ASSERT_TRUE(
      eventually([&] { return fast->count("gpu_status_update") >= 3 && fast2->count("gpu_status_update") >= 3; }, 4s));
  const auto waited = std::chrono::steady_clock::now() - started;
  // Within less than 5 s a 5 s grid has at most one point, whereas a client sent every tick would
  // have as many updates as the fast ones.
  if (waited < 5s) {
    EXPECT_LE(slow->count("gpu_status_update"), 1u);
  }
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
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [t, d] : c->messages())
          if (parsed(t).at("data").at("gpus").size() == 3) return true;
        return false;
      },
      4s));
}

TEST_F(WsHubTest, SetPeriodMovesAClientBetweenGroups) {
  make_hub();
  auto c = std::make_shared<FakeClient>();
  auto j = ws->add(c, 3600000ms);
  ASSERT_TRUE(j);
  std::this_thread::sleep_for(250ms);
  EXPECT_LE(c->count("gpu_status_update"), 1u);  // at most an hourly grid point, whatever the timing
  const auto before = c->count("gpu_status_update");
  auto reply = ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":100}})");
  ASSERT_TRUE(reply);
  EXPECT_EQ(parsed(*reply).at("data").at("period_ms"), 100);
  ASSERT_TRUE(eventually([&] { return c->count("gpu_status_update") >= before + 3; }, 4s));
  // And back: the 100 ms group is gone with its only member, so the updates stop.
  ws->on_message(j->id, R"({"event":"set_period","data":{"period_ms":3600000}})");
  std::this_thread::sleep_for(150ms);  // a tick in flight when we moved may still land
  const auto settled = c->count("gpu_status_update");
  std::this_thread::sleep_for(400ms);
  EXPECT_LE(c->count("gpu_status_update"), settled + 1);  // at most an hourly grid point
}

TEST_F(WsHubTest, RemoveStopsDelivery) {
  make_hub();
  auto stays = std::make_shared<FakeClient>();
  auto leaves = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(stays, 100ms));
  auto j = ws->add(leaves, 100ms);
  ASSERT_TRUE(j);
  ASSERT_TRUE(eventually([&] { return leaves->count("gpu_status_update") >= 1; }, 4s));
  ws->remove(j->id);
  const auto at_removal = leaves->total();  // remove() waits out a tick in flight only when the group
                                            // ends; here the group lives on, so allow one straggler
  const auto stays_before = stays->count("gpu_status_update");
  ASSERT_TRUE(eventually([&] { return stays->count("gpu_status_update") >= stays_before + 3; }, 4s));
  EXPECT_LE(leaves->total(), at_removal + 1);
  EXPECT_EQ(ws->clients(), 1u);
}

TEST_F(WsHubTest, ExpiredClientIsSkipped) {
  make_hub();
  auto gone = std::make_shared<FakeClient>();
  auto stays = std::make_shared<FakeClient>();
  ASSERT_TRUE(ws->add(gone, 100ms));
  ASSERT_TRUE(ws->add(stays, 100ms));
  gone.reset();  // the connection closed before the transport called remove()
  ASSERT_TRUE(eventually([&] { return stays->count("gpu_status_update") >= 2; }, 4s));
  ws->broadcast(msg(R"({"event":"x","data":null})"), false);
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
  const auto alert = WsHub::envelope("high_gpu_usage_alert", R"({"gpu_index":1})");
  ws->broadcast(alert, false);
  for (const auto& cl : {a, b, c}) {
    ASSERT_EQ(cl->count("high_gpu_usage_alert"), 1u);
    for (const auto& [t, d] : cl->messages()) {
      if (t == alert) {
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
  ASSERT_TRUE(eventually([&] { return c->count("gpu_status_update") >= 1; }, 4s));
  ws->close_all();
  EXPECT_EQ(ws->clients(), 0u);
  const auto n = c->total();  // close_all waits for a tick in flight: nothing after it returns
  std::this_thread::sleep_for(350ms);
  EXPECT_EQ(c->total(), n);
  ws->broadcast(msg("{}"), false);
  EXPECT_EQ(c->total(), n);
}

}  // namespace
}  // namespace gf::server
