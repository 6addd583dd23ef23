// The meta routes (/metrics, uptime, OpenAPI, fields, routing errors, usage) through the Router, on the
// fixture of api_rig.hpp.
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

// ---- meta --------------------------------------------------------------------------------------

TEST_F(ApiTest, PrometheusMetricsOneUtilLinePerGpu) {
  const auto r = get("/metrics");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.content_type, wire::kPrometheusContentType);
  std::istringstream in(r.body);
  std::string line;
  std::map<std::string, std::string> util;  // gpu label → value
  while (std::getline(in, line)) {
    if (line.rfind("DCGM_FI_DEV_GPU_UTIL{", 0) != 0) continue;
    const auto g = line.find("gpu=\"");
    ASSERT_NE(g, std::string::npos) << line;
    const auto end = line.find('"', g + 5);
    util[line.substr(g + 5, end - g - 5)] = line.substr(line.rfind(' ') + 1);
  }
  ASSERT_EQ(util.size(), 3u) << r.body;
  EXPECT_EQ(util["0"], "10");
  EXPECT_EQ(util["1"], "80");
  EXPECT_EQ(util["2"], "5");
  EXPECT_NE(r.body.find("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"), std::string::npos);
}

// The agent's acquires wait in the arbiter's queue: /metrics counts them (it used to read only the
// store's queue, which the agent does not use, and said 0 while clients waited).
struct QuietSink final : node::ConnectionSink {
  void granted(std::int64_t, const scheduler::Allocation&) override {}
  void refused(std::int64_t, const Error&) override {}
  void waiting(std::int64_t, const node::WaitingEvent&) override {}
  void lease_ended(const std::string&, const std::string&) override {}
  void lease_warning(const std::string&, const std::string&) override {}
};

TEST_F(ApiTest, PrometheusCountsTheArbitersWaitingAcquires) {
  ctx.clock = &clock;  // the agent's series are made at most once a second: each look is a second later
  auto waiting_jobs = [&] {
    clock.advance(std::chrono::seconds(1));
    const auto r = get("/metrics");
    const auto at = r.body.find("\ngpufleet_jobs_waiting");
    if (at == std::string::npos) return std::string("absent");
    const auto end = r.body.find('\n', at + 1);
    const auto line = r.body.substr(at + 1, end - at - 1);
    return line.substr(line.rfind(' ') + 1);
  };
  EXPECT_EQ(waiting_jobs(), "0");
  const node::Peer alice{1001, 1001, 4001, "alice", false};
  const auto c = arbiter->connect(alice, std::make_shared<QuietSink>());
  node::AcquireRequest r;
  r.need.gpus = 3;  // every GPU of the rig: GPU 1 is busy, so it waits
  r.wait = 1h;
  auto got = arbiter->acquire(c, 1, r);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_FALSE(*got) << "granted, not queued";
  EXPECT_EQ(waiting_jobs(), "1");
  arbiter->disconnect(c);
  EXPECT_EQ(waiting_jobs(), "0");
}

// Uptime is the routes' clock's (ctx.clock), in /metrics as in /api/health: a fake clock moves both.
TEST_F(ApiTest, UptimeIsTheRoutesClock) {
  test::FakeClock clock;
  ctx.clock = &clock;
  ctx.started = clock.now();
  clock.advance(std::chrono::seconds(90));
  const auto r = get("/metrics");
  ASSERT_EQ(r.status, 200u) << r;
  std::istringstream in(r.body);
  std::string line, uptime;
  while (std::getline(in, line))
    if (line.rfind("gpufleet_agent_uptime_seconds{", 0) == 0) uptime = line.substr(line.rfind(' ') + 1);
  EXPECT_EQ(uptime, "90") << r.body;
  EXPECT_EQ(get("/api/health").j.at("uptime_s"), 90.0);
  clock.advance(std::chrono::milliseconds(2500));
  EXPECT_EQ(get("/api/health").j.at("uptime_s"), 92.5);
}

// The agent's own series are made at most once a second (and again for a new reading): within the
// second a scrape gets the same text, the second after a new one. The GPU series are the reading's.
TEST_F(ApiTest, AgentSeriesAreMadeAtMostOnceASecond) {
  test::FakeClock clock;
  ctx.clock = &clock;
  ctx.started = clock.now();
  auto uptime = [&](bool gzip) {
    accept_gzip = gzip;
    const auto r = get("/metrics");
    EXPECT_EQ(r.gzip, gzip);
    std::istringstream in(gzip ? wire::gunzip(r.body) : r.body);
    std::string line, value = "absent";
    while (std::getline(in, line))
      if (line.rfind("gpufleet_agent_uptime_seconds{", 0) == 0) value = line.substr(line.rfind(' ') + 1);
    return value;
  };
  clock.advance(std::chrono::seconds(10));
  EXPECT_EQ(uptime(false), "10");
  clock.advance(std::chrono::milliseconds(900));
  EXPECT_EQ(uptime(false), "10");  // made 0.9 s ago: the same text
  EXPECT_EQ(uptime(true), "10");   // and its gzip end, made now for this reading's compressed GPU part
  clock.advance(std::chrono::milliseconds(100));
  EXPECT_EQ(uptime(true), "11");  // a second old: made again
  EXPECT_EQ(uptime(false), "11");
}

TEST_F(ApiTest, OpenApiIsServedAsJson) {
  const auto r = get("/api/openapi.json");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, openapi_document());
  EXPECT_FALSE(r.j.is_discarded());
}

TEST_F(ApiTest, FieldsDocumentIsTheTable) {
  const auto r = get("/api/v1/fields");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.j, wire::fields_json());
  EXPECT_EQ(r.j["fields"][0]["key"], "utilization");
}

TEST_F(ApiTest, OpenApiListsTheHistoryMetricsFromTheTable) {
  const auto doc = nlohmann::json::parse(openapi_document());
  nlohmann::json metric;
  for (const auto& p : doc["paths"]["/api/v1/history"]["get"]["parameters"])
    if (p["name"] == "metric") metric = p;
  ASSERT_TRUE(metric.is_object());
  EXPECT_EQ(
      metric["schema"]["enum"],
      nlohmann::json({"utilization",  "memory_utilization", "memory_used",   "temperature",     "power",
                      "fan",          "sm_clock",           "mem_clock",     "graphics_active", "sm_active",
                      "sm_occupancy", "tensor_active",      "dram_active",   "fp64_active",     "fp32_active",
                      "fp16_active",  "pcie_tx_bytes",      "pcie_rx_bytes", "nvlink_tx_bytes", "nvlink_rx_bytes"}));
  EXPECT_NE(metric["description"].get<std::string>().find("temperature (°C)"), std::string::npos);
}

// The defaults the document states are the ones the handlers apply: core/policy.hpp for availability and
// leases, allocator::IdleThresholds for the fleet's idle GPUs.
TEST_F(ApiTest, OpenApiDefaultsAreThePolicys) {
  const auto doc = nlohmann::json::parse(openapi_document());
  nlohmann::json floor, ceiling;
  for (const auto& p : doc["paths"]["/api/v1/availability"]["get"]["parameters"]) {
    if (p["name"] == "min_memory_mb") floor = p["schema"]["default"];
    if (p["name"] == "max_utilization") ceiling = p["schema"]["default"];
  }
  EXPECT_EQ(floor, core::kDefaultMinFreeMemoryMib);
  EXPECT_EQ(ceiling, core::kDefaultMaxUtilizationPct);
  const auto& body =
      doc["paths"]["/api/v1/allocations"]["post"]["requestBody"]["content"]["application/json"]["schema"];
  EXPECT_EQ(body["properties"]["min_memory_mb"]["default"], core::kDefaultMinFreeMemoryMib);
  EXPECT_EQ(body["properties"]["max_utilization"]["default"], core::kDefaultMaxUtilizationPct);
  const allocator::IdleThresholds idle;
  const auto& params = doc["components"]["parameters"];
  EXPECT_EQ(params["utilization_threshold"]["schema"]["default"].get<double>(), idle.utilization_pct);
  EXPECT_EQ(params["memory_threshold"]["schema"]["default"].get<double>(), idle.memory_pct);
  EXPECT_EQ(openapi_document().find('@'), std::string::npos) << "a placeholder was left in the text";
}

TEST_F(ApiTest, RoutingErrorsAndHead) {
  auto r = get("/api/v1/allocations");
  EXPECT_EQ(r.status, 405u);
  EXPECT_EQ(r.header("Allow"), "POST");
  EXPECT_EQ(get("/api/v2/anything").status, 404u);
  EXPECT_EQ(call(Method::Head, "/metrics").status, 200u);
  EXPECT_EQ(call(Method::Put, "/api/v1/leases").status, 405u);
}

}  // namespace
}  // namespace gf::server

namespace gf::server {
namespace {

std::string method_key(Method m) {
  switch (m) {
    case Method::Get: return "get";
    case Method::Post: return "post";
    case Method::Delete: return "delete";
    case Method::Put: return "put";
    default: return "other";
  }
}

// The published description and the router agree: every route is documented, nothing else is.
TEST_F(ApiTest, OpenApiPathsAreExactlyTheRoutes) {
  const auto doc = nlohmann::json::parse(openapi_document());
  std::set<std::string> documented, routed;
  for (const auto& [path, ops] : doc.at("paths").items())
    for (const auto& [method, op] : ops.items()) {
      documented.insert(method + " " + path);
      EXPECT_TRUE(op.contains("summary")) << method << " " << path;
      EXPECT_TRUE(op.contains("responses")) << method << " " << path;
      // A path parameter in the pattern is declared.
      if (path.find('{') != std::string::npos) {
        EXPECT_TRUE(op.contains("parameters")) << path;
      }
    }
  for (const auto& r : router.routes()) {
    routed.insert(method_key(r.method) + " " + r.pattern);
    // Routes that change state say so.
    if (r.access == Access::Write) {
      const auto& op = doc["paths"][r.pattern][method_key(r.method)];
      EXPECT_TRUE(op.contains("security")) << r.pattern;
    }
  }
  EXPECT_EQ(documented, routed);
}

}  // namespace
}  // namespace gf::server

namespace gf::server {
namespace {

// Without a usage ledger (no store) the accounting route says so with 503, and the metrics carry no
// per-user series (nothing is made up).
TEST_F(ApiTest, UsageWithoutALedgerIsNotReady) {
  auto r = call(Method::Get, "/api/v1/usage?since=1h");
  EXPECT_EQ(r.status, 503u) << r;
  auto m = call(Method::Get, "/metrics");
  ASSERT_EQ(m.status, 200u) << m;
  EXPECT_EQ(m.body.find("gpufleet_user_"), std::string::npos);
}

}  // namespace
}  // namespace gf::server
