#include "node/agent.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/history.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::eventually;

core::AlertRule usage_rule(double threshold) {
  core::AlertRule r;
  r.kind = core::AlertKind::HighGpuUsage;
  r.threshold = threshold;
  r.duration = 0ms;
  r.severity = "warning";
  return r;
}

// Alert events as the listener saw them.
struct Events {
  std::mutex mu;
  std::vector<core::AlertEvent> got;
  void add(const std::vector<core::AlertEvent>& ev) {
    std::lock_guard lock(mu);
    got.insert(got.end(), ev.begin(), ev.end());
  }
  std::size_t count(core::AlertEvent::Type t) {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& e : got) n += e.type == t;
    return n;
  }
  std::vector<core::AlertEvent> all() {
    std::lock_guard lock(mu);
    return got;
  }
};

TEST(Agent, PublishesTheFirstReadingAtStartWithTheNodeName) {
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = std::chrono::hours(1);
  ao.node_name = "node-7";
  rig.make_agent(ao);
  EXPECT_FALSE(rig.agent->latest());  // nothing before start()
  rig.agent->start();
  const auto p = rig.agent->latest();
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->snapshot && p->document());
  EXPECT_EQ(p->sequence, 1u);
  const auto doc = json::parse(*p->document());
  EXPECT_EQ(doc.at("node"), "node-7");
  EXPECT_EQ(doc.at("backend"), "scripted");
  ASSERT_EQ(doc.at("gpus").size(), 2u);
  EXPECT_EQ(doc.at("gpus").at(0).at("utilization"), 10);
  EXPECT_EQ(doc.at("gpus").at(1).at("utilization"), 80);
  EXPECT_EQ(*rig.agent->render(*p->snapshot), *p->document());
  EXPECT_FALSE(rig.agent->has_history());
  EXPECT_TRUE(rig.agent->history_path().empty());
  rig.agent->start();  // a second start does nothing
  EXPECT_EQ(rig.agent->latest()->sequence, 1u);
}

TEST(Agent, RenderingsAreMadeOncePerReadingAndShared) {
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = std::chrono::hours(1);
  ao.node_name = "node-7";
  rig.make_agent(ao);
  rig.agent->start();
  const auto p = rig.agent->latest();
  ASSERT_TRUE(p && p->renderings);
  EXPECT_EQ(rig.agent->renderings_of(p->snapshot), p->renderings);  // the published reading's
  EXPECT_EQ(p->document().get(), p->renderings->document().text().get());
  // The live messages carry the document itself, not a copy.
  EXPECT_EQ(p->renderings->status_message()->event(), "gpu_status");
  EXPECT_FALSE(p->renderings->status_message()->droppable());
  EXPECT_EQ(p->renderings->update_message()->event(), "gpu_status_update");
  EXPECT_TRUE(p->renderings->update_message()->droppable());
  EXPECT_EQ(&p->renderings->update_message()->data(), p->document().get());
  EXPECT_EQ(p->renderings->update_message().get(), p->renderings->update_message().get());
  std::string metrics;
  wire::write_prometheus_gpus(metrics, *p->snapshot, "node-7");
  EXPECT_EQ(*p->renderings->prometheus_gpus(), metrics);
  auto processes = wire::processes_json(*p->snapshot);
  processes["node"] = "node-7";
  EXPECT_EQ(*p->renderings->processes().text(), wire::dump_json(processes));
  // A snapshot that is not the published one (a WebSocket group's faster tick) gets renderings of its
  // own, shared by whoever asks for that snapshot next.
  const auto other = std::make_shared<const core::Snapshot>(*p->snapshot);
  const auto r1 = rig.agent->renderings_of(other);
  EXPECT_NE(r1, p->renderings);
  EXPECT_EQ(rig.agent->renderings_of(other), r1);
  EXPECT_EQ(*r1->document().text(), *p->document());
}

TEST(Agent, FreshQueriesTheDriverAndPublishes) {
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = std::chrono::hours(1);
  ao.fresh_reuse = 0ms;  // each call below must reach the driver
  rig.make_agent(ao);
  rig.agent->start();
  const int before = rig.st->queries.load();
  rig.set_gpus({test::make_gpu(0, 1), test::make_gpu(1, 2), test::make_gpu(2, 3)});
  auto f = rig.agent->fresh();
  ASSERT_TRUE(f);
  EXPECT_GT(rig.st->queries.load(), before);
  EXPECT_EQ((*f)->snapshot->gpus.size(), 3u);
  EXPECT_EQ(rig.agent->latest(), *f);
  EXPECT_GE((*f)->sequence, 2u);
  rig.st->fail = true;
  auto bad = rig.agent->fresh();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("scripted failure"), std::string::npos);
  EXPECT_EQ(rig.agent->latest(), *f);  // the last good reading stays published
}

// Issue 12, ?fresh=1 floods: 50 concurrent fresh callers against a slow driver (held at a gate until
// all of them have started) share one query. On main each caller queried the driver in turn: 50.
TEST(Agent, ConcurrentFreshCallersShareOneDriverQuery) {
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = std::chrono::hours(1);
  rig.make_agent(ao);  // not started: no collection queries the backend meanwhile
  rig.st->close_gate();
  constexpr int kCallers = 50;
  std::atomic<int> started{0}, ok{0};
  std::vector<std::shared_ptr<const Published>> got(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i)
    callers.emplace_back([&, i] {
      ++started;
      auto r = rig.agent->fresh();
      if (r) {
        got[static_cast<std::size_t>(i)] = *r;
        ++ok;
      }
    });
  const bool all_in = eventually([&] { return started.load() == kCallers && rig.st->held.load() == 1; });
  rig.st->open_gate();
  for (auto& t : callers) t.join();
  ASSERT_TRUE(all_in) << "the callers did not all start";
  EXPECT_EQ(ok.load(), kCallers);
  // One query; a second only if a caller was descheduled past the reuse window before it asked.
  EXPECT_LE(rig.st->queries.load(), 2);
  EXPECT_GE(rig.st->queries.load(), 1);
  ASSERT_TRUE(got[0]);
  EXPECT_EQ(got[0]->snapshot->gpus.size(), 2u);
  EXPECT_EQ(rig.agent->latest()->sequence, static_cast<std::uint64_t>(rig.st->queries.load()));
}

// A failing driver is not asked again by every caller of a flood either, and the next call after
// the reuse window asks again.
TEST(Agent, FreshReusesARecentResultThenQueriesAgain) {
  test::FakeClock clock;
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = std::chrono::hours(1);
  rig.agent = std::make_unique<Agent>(*rig.monitor, *rig.hub, nullptr, nullptr, ao, clock);
  rig.st->fail = true;
  EXPECT_FALSE(rig.agent->fresh());
  EXPECT_FALSE(rig.agent->fresh());
  EXPECT_EQ(rig.st->queries.load(), 1);
  rig.st->fail = false;
  clock.advance(ao.fresh_reuse);
  auto r = rig.agent->fresh();
  ASSERT_TRUE(r);
  EXPECT_EQ(rig.st->queries.load(), 2);
  auto again = rig.agent->fresh();
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *r);
  EXPECT_EQ(rig.st->queries.load(), 2);
}

TEST(Agent, WithoutHistoryAlertsComeFromMemoryAndHistoryIsRefused) {
  test::AgentRig rig;
  AgentOptions ao;
  ao.interval = 50ms;
  ao.alert_rules = {usage_rule(50)};
  rig.make_agent(ao);
  rig.agent->start();
  ASSERT_TRUE(eventually([&] { return rig.agent->firing().size() == 1; }));  // GPU 1 is at 80 %
  auto recent = rig.agent->recent_alerts(core::AlertQuery::newest(10));
  ASSERT_TRUE(recent);
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ((*recent)[0].gpu_index, 1u);
  EXPECT_FALSE((*recent)[0].resolved_at);
  const auto now = std::chrono::system_clock::now();
  EXPECT_FALSE(rig.agent->history(0, core::Field::Utilization, now - 1h, now, 0s));
}

struct AgentHistoryTest : ::testing::Test {
  test::TempDir dir;
  test::AgentRig rig;
  Events events;
  std::string db() const { return (dir.path() / "history.db").string(); }
  void start(std::vector<core::AlertRule> rules) {
    AgentOptions ao;
    ao.interval = 50ms;
    ao.node_name = "n";
    ao.alert_rules = std::move(rules);
    ao.history_flush = 50ms;
    rig.make_agent(ao, db());
    ASSERT_TRUE(rig.agent);
    ASSERT_TRUE(rig.agent->has_history());
    rig.agent->on_alerts([this](const std::vector<core::AlertEvent>& ev) { events.add(ev); });
    rig.agent->start();
  }
  std::uint64_t collections() const { return rig.agent->counters().collections; }
};

TEST_F(AgentHistoryTest, AlertFiresResolvesAndIsStoredOnce) {
  rig.set_gpus({test::make_gpu(0, 10), test::make_gpu(1, 20)});
  start({usage_rule(50)});
  ASSERT_TRUE(eventually([&] { return collections() >= 2; }));
  EXPECT_TRUE(rig.agent->firing().empty());
  EXPECT_EQ(events.count(core::AlertEvent::Type::Fired), 0u);

  rig.set_gpus({test::make_gpu(0, 10), test::make_gpu(1, 90)});
  ASSERT_TRUE(eventually([&] { return events.count(core::AlertEvent::Type::Fired) == 1; }));
  const auto fired = events.all().at(0);
  EXPECT_EQ(fired.type, core::AlertEvent::Type::Fired);
  EXPECT_EQ(fired.alert.kind, core::AlertKind::HighGpuUsage);
  EXPECT_EQ(fired.alert.gpu_index, 1u);
  EXPECT_DOUBLE_EQ(fired.alert.value, 90);
  EXPECT_DOUBLE_EQ(fired.alert.threshold, 50);
  auto firing = rig.agent->firing();
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].id, fired.alert.id);

  // Failed collections neither resolve nor re-fire it.
  rig.st->fail = true;
  const auto errors = rig.agent->counters().collection_errors;
  ASSERT_TRUE(eventually([&] { return rig.agent->counters().collection_errors >= errors + 2; }));
  EXPECT_EQ(rig.agent->counters().last_error, "scripted failure");
  EXPECT_EQ(rig.agent->firing().size(), 1u);
  rig.st->fail = false;
  ASSERT_TRUE(eventually([&] { return rig.agent->counters().last_error.empty(); }));
  // /api/health's collection facts: the failure is kept, with its time, after the recovery.
  const auto recovered = rig.agent->counters();
  EXPECT_EQ(recovered.last_failure, "scripted failure");
  EXPECT_TRUE(recovered.last_failure_wall.has_value());
  EXPECT_TRUE(recovered.last_success_wall.has_value());

  rig.set_gpus({test::make_gpu(0, 10), test::make_gpu(1, 30)});
  ASSERT_TRUE(eventually([&] { return events.count(core::AlertEvent::Type::Resolved) == 1; }));
  EXPECT_TRUE(rig.agent->firing().empty());
  EXPECT_EQ(events.count(core::AlertEvent::Type::Fired), 1u);
  const auto resolved = events.all().back();
  EXPECT_EQ(resolved.alert.id, fired.alert.id);
  ASSERT_TRUE(resolved.alert.resolved_at);

  // Once the batch thread has written the episode, store and memory agree on one episode.
  ASSERT_TRUE(eventually([&] {
    auto r = rig.agent->recent_alerts(core::AlertQuery::newest(10));
    return r && r->size() == 1 && (*r)[0].resolved_at;
  }));
  ASSERT_TRUE(eventually([&] { return rig.agent->counters().history_batches >= 2; }));
  auto recent = rig.agent->recent_alerts(core::AlertQuery::newest(10));
  ASSERT_TRUE(recent);
  EXPECT_EQ(recent->size(), 1u) << "an episode in both the store and memory is listed once";

  rig.agent->stop();
  recent = rig.agent->recent_alerts(core::AlertQuery::newest(10));
  ASSERT_TRUE(recent);
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ((*recent)[0].id, fired.alert.id);
  ASSERT_TRUE((*recent)[0].resolved_at);

  // The store itself holds the resolved episode.
  auto reader = store::HistoryStore::open(db());
  ASSERT_TRUE(reader);
  auto stored = (*reader)->recent_alerts(core::AlertQuery::newest(10));
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].id, fired.alert.id);
  EXPECT_TRUE((*stored)[0].resolved_at);
}

// On a manual hub: the test makes each tick, so "no tick after stop()" is shown by ticking, not waiting.
struct AgentHistoryStepped : AgentHistoryTest {
  test::FakeClock clock;
  test::AgentRig manual{clock, sampler::SampleHub::Drive::Manual};
  // Moves the clock one collection interval and ticks the hub, `n` times.
  void tick(int n) {
    for (int i = 0; i < n; ++i) {
      clock.advance(50ms);
      manual.step();
    }
  }
};

TEST_F(AgentHistoryStepped, StopFlushesHistoryReadableThroughTheAgent) {
  auto& rig = manual;
  rig.set_gpus({test::make_gpu(0, 10), test::make_gpu(1, 70)});
  const auto since = std::chrono::system_clock::now() - 1min;
  AgentOptions ao;
  ao.interval = 50ms;
  ao.node_name = "n";
  ao.alert_rules = {};
  ao.history_flush = 50ms;
  rig.make_agent(ao, db());
  ASSERT_TRUE(rig.agent && rig.agent->has_history());
  rig.agent->start();
  const auto collections = [&] { return rig.agent->counters().collections; };
  tick(3);
  ASSERT_EQ(collections(), 3u);
  rig.agent->stop();
  const auto n = collections();
  tick(3);
  EXPECT_EQ(collections(), n);                   // no tick after stop()
  EXPECT_EQ(rig.hub->next_due(), std::nullopt);  // the agent's subscription is gone
  const auto c = rig.agent->counters();
  EXPECT_GE(c.history_batches, 1u);
  EXPECT_EQ(c.history_errors, 0u);
  EXPECT_TRUE(c.history_error.empty());
  EXPECT_TRUE(c.last_success);
  EXPECT_EQ(c.collection_errors, 0u);

  auto pts = rig.agent->history(1, core::Field::Utilization, since, std::chrono::system_clock::now() + 1min, 0s);
  ASSERT_TRUE(pts) << pts.error().message;
  std::size_t samples = 0;
  for (const auto& p : *pts) {
    samples += p.samples;
    ASSERT_TRUE(p.avg);
    EXPECT_DOUBLE_EQ(*p.avg, 70);
  }
  // Every collection the loop made was written (stop() wrote the last batch).
  EXPECT_EQ(samples, n);
  EXPECT_EQ(rig.agent->history_path(), db());
}

}  // namespace
}  // namespace gf::node
