// The monitoring routes (GPU metrics, summary, processes, health, history, alerts, availability) through
// the Router, on the fixture of api_rig.hpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api_rig.hpp"
#include "store/history.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using namespace api_test;

// ---- monitoring --------------------------------------------------------------------------------

TEST_F(ApiTest, GpuMetricsIsThePublishedDocument) {
  const auto r = get("/api/v1/monitoring/gpu-metrics");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, *rig.agent->latest()->document());
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_EQ(r.j.at("backend"), "scripted");
  EXPECT_FALSE(r.j.at("simulated").get<bool>());
  ASSERT_EQ(r.j.at("gpus").size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    const auto& g = r.j["gpus"][i];
    EXPECT_EQ(g.at("index"), i);
    EXPECT_EQ(g.at("id"), "gpu-" + std::to_string(i));
    for (const char* k : {"name", "uuid", "utilization", "memory", "temperature", "power_usage", "health", "processes"})
      EXPECT_TRUE(g.contains(k)) << k;
    EXPECT_EQ(g.at("memory").at("total"), 80000);
  }
}

TEST_F(ApiTest, FreshQueriesTheDriverOthersServeThePublishedReading) {
  rig.set_gpus({gpu(0, 1, 1000, 40, 1), gpu(1, 2, 1000, 40, 1), gpu(2, 3, 1000, 40, 1), gpu(3, 4, 1000, 40, 1)});
  EXPECT_EQ(get("/api/v1/monitoring/gpu-metrics").j.at("gpus").size(), 3u);
  EXPECT_EQ(get("/api/v1/monitoring/gpu-metrics?fresh=1").j.at("gpus").size(), 4u);
  EXPECT_EQ(get("/api/v1/monitoring/gpu-metrics").j.at("gpus").size(), 4u);  // fresh() publishes
  rig.st->fail = true;
  auto r = get("/api/v1/gpus/0?fresh=1");
  EXPECT_EQ(r.status, 503u) << r;
  EXPECT_EQ(r.j.at("error"), "unavailable");
  EXPECT_NE(r.message().find("scripted failure"), std::string::npos);
  // The home monitor's route answers a failed query in its own shape (seed_routes_test.cpp has them all).
  r = get("/api/gpu/summary?fresh=1");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j.at("monitoring_available"), false);
  EXPECT_EQ(get("/api/gpu/summary").status, 200u);  // the last good reading is still served (not stale yet)
}

TEST_F(ApiTest, SummaryAgreesWithTheSnapshot) {
  const auto r = get("/api/gpu/summary");
  ASSERT_EQ(r.status, 200u) << r;
  const auto& s = *rig.agent->latest()->snapshot;
  std::uint64_t total = 0, used = 0, free = 0;
  double util = 0;
  unsigned available = 0;
  for (const auto& g : s.gpus) {
    total += *g.memory_total_mib;
    used += *g.memory_used_mib;
    free += *g.memory_free_mib;
    util += *g.utilization_pct;
    available += *g.utilization_pct <= 50;
  }
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_EQ(r.j.at("gpu_count"), s.gpus.size());
  EXPECT_EQ(r.j.at("available_gpus"), available);
  EXPECT_EQ(r.j.at("available_gpus"), 2);
  EXPECT_EQ(r.j.at("busy_gpus"), 1);
  EXPECT_EQ(r.j.at("lost_gpus"), 0);
  EXPECT_EQ(r.j.at("memory").at("total"), total);
  EXPECT_EQ(r.j.at("memory").at("used"), used);
  EXPECT_EQ(r.j.at("memory").at("free"), free);
  EXPECT_EQ(r.j.at("memory").at("used"), 82000);
  EXPECT_DOUBLE_EQ(r.j.at("utilization_avg").get<double>(), std::round(util / 3 * 10) / 10);
  EXPECT_DOUBLE_EQ(r.j.at("utilization_avg").get<double>(), 31.7);
  EXPECT_DOUBLE_EQ(r.j.at("temperature_avg").get<double>(), 50);
  EXPECT_EQ(r.j.at("temperature_max"), 60);
  EXPECT_DOUBLE_EQ(r.j.at("power_total").get<double>(), 350.5);
  EXPECT_EQ(r.j.at("busiest_gpu").at("index"), 1);
  EXPECT_EQ(r.j.at("busiest_gpu").at("utilization"), 80);
  EXPECT_EQ(r.j.at("process_count"), 0);
  EXPECT_EQ(r.j.at("alerts_firing"), 0);
  EXPECT_EQ(r.j.at("simulated"), false);
}

TEST_F(ApiTest, SummaryCountsLostGpusApartAndKnowsNothingOfTheirReadings) {
  auto lost = gpu(2, 99, 50000, 99, 999);
  lost.health = core::Health::Lost;
  rig.set_gpus({gpu(0, 10, 1000, 40, 100), gpu(1, 30, 1000, 60, 200), lost});
  const auto r = get("/api/gpu/summary?fresh=1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("gpu_count"), 3);
  EXPECT_EQ(r.j.at("lost_gpus"), 1);
  EXPECT_EQ(r.j.at("available_gpus"), 2);
  EXPECT_EQ(r.j.at("memory").at("total"), 160000);
  EXPECT_EQ(r.j.at("temperature_max"), 60);
  EXPECT_DOUBLE_EQ(r.j.at("power_total").get<double>(), 300);
}

TEST_F(ApiTest, DetailedMetricsCarryProcessesAlertsAndSummary) {
  const auto r = get("/api/gpu/metrics");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_TRUE(r.j.at("processes").is_array());
  EXPECT_TRUE(r.j.at("alerts").is_array());
  EXPECT_EQ(r.j.at("summary").at("gpu_count"), 3);
  EXPECT_EQ(r.j.at("gpus").size(), 3u);
}

TEST_F(ApiTest, OneGpu) {
  auto r = get("/api/v1/gpus/1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("index"), 1);
  EXPECT_EQ(r.j.at("utilization"), 80);
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_TRUE(r.j.at("timestamp").is_string());
  EXPECT_EQ(r.j.at("simulated"), false);

  r = get("/api/v1/gpus/7");
  EXPECT_EQ(r.status, 404u) << r;
  EXPECT_EQ(r.j.at("error"), "not_found");
  EXPECT_NE(r.message().find("3 GPUs"), std::string::npos) << r;

  for (const char* bad :
       {"/api/v1/gpus/abc", "/api/v1/gpus/-1", "/api/v1/gpus/1.0", "/api/v1/gpus/1234567", "/api/v1/gpus/%20"}) {
    r = get(bad);
    EXPECT_EQ(r.status, 400u) << bad << ": " << r;
    EXPECT_EQ(r.j.at("error"), "bad_request");
  }
  EXPECT_EQ(get("/api/v1/gpus/000002").j.at("index"), 2);
}

TEST_F(ApiTest, Processes) {
  const auto r = get("/api/v1/processes");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_TRUE(r.j.at("processes").is_array());
  EXPECT_TRUE(r.j.at("unattributed").is_array());
}

TEST_F(ApiTest, HealthOkThenDegradedWithoutAStore) {
  auto r = get("/api/health");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("status"), "ok");
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_EQ(r.j.at("version"), "9.9.9-test");
  EXPECT_TRUE(r.j.at("problems").empty());
  EXPECT_EQ(r.j.at("backend").at("name"), "scripted");
  EXPECT_EQ(r.j.at("backend").at("ok"), true);
  EXPECT_EQ(r.j.at("backend").at("gpus"), 3);
  EXPECT_EQ(r.j.at("store").at("ok"), true);
  EXPECT_EQ(r.j.at("store").at("history"), true);
  EXPECT_EQ(r.j.at("store").at("path"), db());
  EXPECT_EQ(r.j.at("websocket_clients"), 0);

  ctx.arbiter = nullptr;
  ctx.records = nullptr;
  ctx.store_error = "disk on fire";
  r = get("/api/health");
  EXPECT_EQ(r.status, 503u) << r;
  EXPECT_EQ(r.j.at("status"), "degraded");
  ASSERT_EQ(r.j.at("problems").size(), 1u);
  EXPECT_NE(r.j["problems"][0].get<std::string>().find("disk on fire"), std::string::npos);
  EXPECT_EQ(r.j.at("store").at("ok"), false);
  EXPECT_EQ(r.j.at("store").at("error"), "disk on fire");
  // Lease endpoints answer 503 too.
  EXPECT_EQ(get("/api/v1/leases").status, 503u);
  EXPECT_EQ(post("/api/v1/allocations", "{}").status, 503u);
  EXPECT_EQ(get("/api/v1/jobs").j.at("error"), "store_unavailable");
}

// A backend that throws makes the collection unhealthy (503 with the exception's message) and the
// agent healthy again once it answers. The hub's tick is run by hand at a time past the next due one.
TEST_F(ApiTest, HealthReportsABackendThatThrowsUntilItRecovers) {
  using namespace std::chrono;
  rig.st->throws = true;
  ASSERT_EQ(rig.hub->step(steady_clock::now() + hours(2)), 1u);
  auto r = get("/api/health");
  EXPECT_EQ(r.status, 503u) << r;
  EXPECT_EQ(r.j.at("status"), "degraded");
  ASSERT_EQ(r.j.at("problems").size(), 1u) << r;
  const auto problem = r.j["problems"][0].get<std::string>();
  EXPECT_NE(problem.find("the last collection failed"), std::string::npos) << problem;
  EXPECT_NE(problem.find("scripted exception"), std::string::npos) << problem;
  EXPECT_EQ(rig.agent->counters().collection_errors, 1u);

  rig.st->throws = false;
  ASSERT_EQ(rig.hub->step(steady_clock::now() + hours(4)), 1u);
  r = get("/api/health");
  EXPECT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("problems").empty());
}

// ---- history -----------------------------------------------------------------------------------

TEST_F(ApiTest, HistoryParameterErrorsNameTheParameter) {
  struct Case {
    const char* query;
    const char* names;
  };
  for (const Case& c :
       {Case{"metric=bogus", "metric"}, Case{"since=yesterday", "since"}, Case{"until=later", "until"},
        Case{"since=1h&until=2h", "until must be after since"}, Case{"since=1h&until=1h", "until must be after since"},
        Case{"step=0", "step"}, Case{"step=-5", "step"}, Case{"step=1.5", "step"}, Case{"gpu=-1", "gpu"},
        Case{"gpu=x", "gpu"}, Case{"since=7d&step=1", "step"}, Case{"since=2026-13-01T00:00:00Z", "since"},
        Case{"since=2026-02-30T00:00:00Z", "since"}, Case{"since=1.2.3", "since"},
        Case{"since=99999999999999999d", "since"}, Case{"since=99999999d", "since"}, Case{"since=50000000000", "since"},
        Case{"since=9999-01-01T00:00:00Z", "since"}}) {
    const auto r = get(std::string("/api/v1/history?") + c.query);
    EXPECT_EQ(r.status, 400u) << c.query << ": " << r;
    EXPECT_EQ(r.j.value("error", ""), "bad_request") << c.query;
    EXPECT_NE(r.message().find(c.names), std::string::npos) << c.query << ": " << r.message();
  }
}

TEST_F(ApiTest, HistorySeriesFromTheStore) {
  // Rows written as the batch thread would, through a second connection to the same file.
  auto w = store::HistoryStore::open(db());
  ASSERT_TRUE(w);
  const auto now = std::chrono::system_clock::now();
  for (int i = 0; i < 3; ++i) {
    core::Snapshot s;
    s.timestamp = now - std::chrono::seconds(30 - i * 10);
    s.backend = "scripted";
    s.gpus = {gpu(0, 40 + 10 * static_cast<unsigned>(i), 1000, 40, 100), gpu(1, 80, 2000, 60, 200),
              gpu(2, 5, 79000, 50, 50.5)};
    ASSERT_TRUE((*w)->append(s));
  }
  auto r = get("/api/v1/history?gpu=0&metric=utilization&since=5m&step=3600");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("metric"), "utilization");
  EXPECT_EQ(r.j.at("unit"), "%");
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_EQ(r.j.at("step_s"), 3600);
  ASSERT_EQ(r.j.at("series").size(), 1u);
  EXPECT_EQ(r.j["series"][0].at("gpu"), 0);
  std::size_t samples = 0;
  double lo = 1e9, hi = -1;
  for (const auto& p : r.j["series"][0].at("points")) {
    samples += p.at("samples").get<std::size_t>();
    lo = std::min(lo, p.at("min").get<double>());
    hi = std::max(hi, p.at("max").get<double>());
    EXPECT_TRUE(p.at("t").is_number_integer());
  }
  EXPECT_EQ(samples, 3u);
  EXPECT_DOUBLE_EQ(lo, 40);
  EXPECT_DOUBLE_EQ(hi, 60);

  // Without gpu: one series per GPU of the latest reading. The default step keeps ~500 points at most.
  r = get("/api/v1/history?metric=memory_used");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("unit"), "MiB");
  EXPECT_EQ(r.j.at("series").size(), 3u);
  EXPECT_EQ(r.j.at("step_s"), 8);  // 3600 s / 500, rounded up

  // A range with nothing in it is an empty series, not an error.
  r = get("/api/v1/history?gpu=0&since=2020-01-01T00:00:00Z&until=2020-01-01T01:00:00.5Z");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j["series"][0]["points"].empty());
  EXPECT_EQ(r.j.at("since"), "2020-01-01T00:00:00.000000Z");
  EXPECT_EQ(r.j.at("until"), "2020-01-01T01:00:00.500000Z");
  r = get("/api/v1/history?gpu=0&since=1577836800&until=1577840400.25");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("since"), "2020-01-01T00:00:00.000000Z");
  EXPECT_EQ(r.j.at("until"), "2020-01-01T01:00:00.250000Z");
}

// "now" of the history route is the context's clock: relative times are measured from it.
TEST_F(ApiTest, HistoryRelativeTimesCountFromTheContextClock) {
  test::FakeClock clock;
  ctx.clock = &clock;
  auto r = get("/api/v1/history?gpu=0&since=15m");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("since"), wire::iso8601(clock.wall_now() - std::chrono::minutes(15)));
  EXPECT_EQ(r.j.at("until"), wire::iso8601(clock.wall_now()));
  clock.advance(std::chrono::hours(2));
  r = get("/api/v1/history?gpu=0");  // default: the last hour
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("since"), wire::iso8601(clock.wall_now() - std::chrono::hours(1)));
  EXPECT_EQ(r.j.at("until"), wire::iso8601(clock.wall_now()));
}

TEST(ParseTime, FormsAndRange) {
  using namespace std::chrono;
  const auto now = system_clock::time_point(seconds(1'800'000'000));
  EXPECT_EQ(*parse_time("90s", now), now - 90s);
  EXPECT_EQ(*parse_time("15m", now), now - 15min);
  EXPECT_EQ(*parse_time("2h", now), now - 2h);
  EXPECT_EQ(*parse_time("7d", now), now - hours(24 * 7));
  EXPECT_EQ(*parse_time("1700000000", now), system_clock::time_point(seconds(1'700'000'000)));
  EXPECT_EQ(*parse_time("1700000000.5", now), system_clock::time_point(milliseconds(1'700'000'000'500)));
  EXPECT_EQ(*parse_time("2023-11-14T22:13:20Z", now), system_clock::time_point(seconds(1'700'000'000)));
  EXPECT_EQ(*parse_time("2023-11-14T22:13:20+00:00", now), system_clock::time_point(seconds(1'700'000'000)));
  EXPECT_EQ(*parse_time("2023-11-14T22:13:20", now), system_clock::time_point(seconds(1'700'000'000)));
  EXPECT_EQ(*parse_time("2023-11-14T22:13:20.25Z", now), system_clock::time_point(milliseconds(1'700'000'000'250)));
  for (const char* bad :
       {"", "s", "5x", "-5m", "1e9", ".5", "1..2", "2023-11-14", "2023-11-14T22:13:20+02:00", "2023-00-14T22:13:20Z",
        "2023-11-14T24:00:00Z", "2023-11-14T22:60:00Z",
        // Each field has its fixed digits: no signs, blanks or short fields.
        "2023-1-14T22:13:20Z", "+023-11-14T22:13:20Z", "2023-11-14T 2:13:20Z", "2023-11-14T22:13:20.Z",
        // Beyond what a nanosecond system_clock holds (year 2262): refused, not overflowed.
        "99999999d", "999999999d", "9999999999", "99999999999", "9999-12-31T00:00:00Z"})
    EXPECT_FALSE(parse_time(bad, now)) << bad;
}

TEST(QueryInt, Bounds) {
  Request req;
  EXPECT_FALSE(*query_int(req, "n", 1, 10));  // absent: no value, no error
  req.query["n"] = "10";
  EXPECT_EQ(**query_int(req, "n", 1, 10), 10);
  for (const char* bad : {"11", "0", "", "-1", "+1", "1.0", " 1", "0x5", "1234567890123456789"}) {
    req.query["n"] = bad;
    auto r = query_int(req, "n", 1, 10);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("query parameter n"), std::string::npos);
  }
}

// ---- alerts ------------------------------------------------------------------------------------

TEST_F(ApiTest, AlertsListFiringRecentAndRules) {
  auto r = get("/api/v1/alerts");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("node"), "node-x");
  EXPECT_TRUE(r.j.at("firing").empty());
  EXPECT_TRUE(r.j.at("recent").empty());
  ASSERT_EQ(r.j.at("rules").size(), core::kAlertKinds.size());
  EXPECT_EQ(r.j["rules"][0].at("rule"), "high_gpu_usage");
  EXPECT_EQ(r.j["rules"][0].at("event"), "high_gpu_usage_alert");
  EXPECT_DOUBLE_EQ(r.j["rules"][0].at("duration_s").get<double>(), 30);
  for (const char* bad : {"limit=0", "limit=10001", "limit=x"})
    EXPECT_EQ(get(std::string("/api/v1/alerts?") + bad).status, 400u) << bad;
  EXPECT_EQ(get("/api/v1/alerts?limit=5").status, 200u);
}

// ?gpu, ?since and ?until narrow both lists in the store's query: the per-GPU page asks for its GPU and
// range only, and finds an old episode however many newer ones the other GPUs have.
TEST_F(ApiTest, AlertsFilterByGpuAndTimeRange) {
  using std::chrono::seconds;
  using TP = std::chrono::system_clock::time_point;
  constexpr std::int64_t t0 = 1'700'000'000;  // 2023-11-14T22:13:20Z
  auto episode = [](unsigned gpu, std::int64_t start_s, std::optional<std::int64_t> end_s) {
    core::AlertEvent e;
    e.alert.id = fmt::format("high_temperature_alert:GPU-{}", gpu);
    e.alert.kind = core::AlertKind::HighTemperature;
    e.alert.gpu_index = gpu;
    e.alert.gpu_uuid = fmt::format("GPU-{}", gpu);
    e.alert.severity = "critical";
    e.alert.message = fmt::format("episode of GPU {} at {}", gpu, start_s);
    e.alert.started_at = TP(seconds(start_s));
    if (end_s) e.alert.resolved_at = TP(seconds(*end_s));
    return e;
  };
  {
    auto h = store::HistoryStore::open(db());
    ASSERT_TRUE(h) << h.error().message;
    std::vector<core::AlertEvent> fired, resolved;
    fired.push_back(episode(2, t0, t0 + 600));  // GPU 2, ten minutes, long ago
    for (int i = 0; i < 30; ++i) fired.push_back(episode(0, t0 + 86400 + i * 60, t0 + 86400 + i * 60 + 30));
    for (auto e : fired) {
      if (!e.alert.resolved_at) continue;
      e.type = core::AlertEvent::Type::Resolved;
      resolved.push_back(e);
    }
    for (auto& e : fired) e.alert.resolved_at.reset();
    ASSERT_TRUE((*h)->record_alerts(fired));
    ASSERT_TRUE((*h)->record_alerts(resolved));
  }
  auto r = get("/api/v1/alerts?limit=10");
  ASSERT_EQ(r.status, 200u) << r;
  ASSERT_EQ(r.j.at("recent").size(), 10u);
  for (const auto& a : r.j["recent"]) EXPECT_EQ(a.at("gpu_index"), 0) << "GPU 2's episode is not among the newest 10";

  r = get("/api/v1/alerts?limit=10&gpu=2");
  ASSERT_EQ(r.status, 200u) << r;
  ASSERT_EQ(r.j.at("recent").size(), 1u) << r;
  EXPECT_EQ(r.j["recent"][0].at("gpu_index"), 2);
  EXPECT_EQ(r.j["recent"][0].at("message"), fmt::format("episode of GPU 2 at {}", t0));

  // A range overlapping the episode (epoch seconds, then ISO 8601) finds it; one after it does not.
  r = get(fmt::format("/api/v1/alerts?gpu=2&since={}&until={}", t0 + 300, t0 + 3600));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("recent").size(), 1u) << r;
  r = get("/api/v1/alerts?gpu=2&since=2023-11-14T22:00:00Z&until=2023-11-14T22:20:00Z");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("recent").size(), 1u) << r;
  r = get(fmt::format("/api/v1/alerts?gpu=2&since={}", t0 + 601));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("recent").empty()) << r;
  // GPU 0's episodes in its first five minutes; none of them before t0 + 1 day.
  r = get(fmt::format("/api/v1/alerts?gpu=0&since={}&until={}", t0 + 86400, t0 + 86400 + 300));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("recent").size(), 5u) << r;
  r = get(fmt::format("/api/v1/alerts?gpu=0&until={}", t0 + 86400));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("recent").empty()) << r;
  // A duration: all of these are years ago.
  r = get("/api/v1/alerts?since=7d");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("recent").empty()) << r;
  // A GPU without episodes.
  r = get("/api/v1/alerts?gpu=1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("recent").empty()) << r;
  EXPECT_TRUE(r.j.at("firing").empty()) << r;

  for (const char* bad :
       {"gpu=x", "gpu=-1", "since=soon", "until=yesterday", "since=100&until=50", "since=10&until=10"}) {
    r = get(std::string("/api/v1/alerts?") + bad);
    EXPECT_EQ(r.status, 400u) << bad << ": " << r;
    EXPECT_FALSE(r.message().empty()) << bad;
  }
}

// ---- availability ------------------------------------------------------------------------------

TEST_F(ApiTest, AvailabilityExplainsEachGpu) {
  auto r = get("/api/v1/availability");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("available"), true);
  EXPECT_EQ(r.j.at("needed"), 1);
  EXPECT_EQ(r.j.at("qualifying"), 1);
  EXPECT_EQ(r.j.at("min_memory_mb"), 8000);
  EXPECT_EQ(r.j.at("max_utilization"), 50);
  ASSERT_EQ(r.j.at("gpus").size(), 3u);
  EXPECT_EQ(r.j["gpus"][0].at("qualifies"), true);
  EXPECT_TRUE(r.j["gpus"][0].at("reason").is_null());
  EXPECT_EQ(r.j["gpus"][1].at("qualifies"), false);
  EXPECT_NE(r.j["gpus"][1].at("reason").get<std::string>().find("utilization"), std::string::npos) << r;
  EXPECT_EQ(r.j["gpus"][2].at("qualifies"), false);
  EXPECT_NE(r.j["gpus"][2].at("reason").get<std::string>().find("free"), std::string::npos) << r;
  EXPECT_EQ(r.j.at("would_choose").at("indices"), json::array({0}));

  r = get("/api/v1/availability?gpus=2");
  EXPECT_EQ(r.j.at("available"), false);
  EXPECT_TRUE(r.j.at("would_choose").is_null());

  r = get("/api/v1/availability?gpus=2&max_utilization=90");
  EXPECT_EQ(r.j.at("available"), true) << r;
  EXPECT_EQ(r.j.at("would_choose").at("indices"), json::array({0, 1}));

  r = get("/api/v1/availability?min_memory_mb=500&max_utilization=100&gpus=3");
  EXPECT_EQ(r.j.at("qualifying"), 3) << r;

  for (const char* bad : {"gpus=0", "gpus=1025", "max_utilization=101", "min_memory_mb=abc", "min_memory_mb=-1"}) {
    r = get(std::string("/api/v1/availability?") + bad);
    EXPECT_EQ(r.status, 400u) << bad;
    const std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(r.message().find(name), std::string::npos) << r;
  }
}

TEST_F(ApiTest, AvailabilityTakesTheSeedsRuleUnlessExclusive) {
  // GPU 0 qualifies on memory and utilization but runs a process gpufleet did not start (an Xorg).
  auto g0 = gpu(0, 10, 1000, 40, 100);
  core::GpuProcess xorg;
  xorg.pid = 4242;
  xorg.used_memory_mib = 200;
  xorg.name = "Xorg";
  g0.processes.push_back(xorg);
  rig.set_gpus({g0, gpu(1, 80, 2000, 60, 200), gpu(2, 5, 79000, 50, 50.5)});

  auto r = get("/api/v1/availability?fresh=1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("exclusive"), false);
  EXPECT_EQ(r.j["gpus"][0].at("qualifies"), true) << r;
  EXPECT_EQ(r.j.at("would_choose").at("indices"), json::array({0}));

  r = get("/api/v1/availability?fresh=1&exclusive=true");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("exclusive"), true);
  EXPECT_EQ(r.j.at("available"), false) << r;
  EXPECT_NE(r.j["gpus"][0].at("reason").get<std::string>().find("4242"), std::string::npos) << r;

  r = get("/api/v1/availability?exclusive=maybe");
  EXPECT_EQ(r.status, 400u) << r;
  EXPECT_NE(r.message().find("exclusive"), std::string::npos) << r;
}

}  // namespace
}  // namespace gf::server
