// The fleet routes over fabricated facts: thresholds and GPU counts from the query, 400 for bad values,
// 503 without a view or before the first refresh.
#include "server/api_cluster.hpp"

#include <gtest/gtest.h>

#include <latch>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "support/fake_clock.hpp"
#include "wire/gzip.hpp"

namespace gf::server {
namespace {

struct Answer {
  unsigned status = 0;
  nlohmann::json j;
};

Answer get(const Router& router, const std::string& path, std::map<std::string, std::string> query = {}) {
  Request req;
  req.path = path;
  req.target = path;
  req.query = std::move(query);
  const auto m = router.match(req);
  if (!m.route) return {m.status, {}};
  const auto r = invoke(*m.route, req);
  return {r.status, nlohmann::json::parse(*r.body, nullptr, false)};
}

std::shared_ptr<const core::FleetFacts> fleet(
    std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) {
  auto f = std::make_shared<core::FleetFacts>();
  // "busy": 4 GPUs at 50 %; "quiet": 2 GPUs at 20 %; both at 10 % memory.
  for (auto [name, n, util] : {std::tuple{"busy", 4u, 50.0}, std::tuple{"quiet", 2u, 20.0}}) {
    core::NodeMetrics m;
    m.node = name;
    m.source = "agent";
    m.observed = now;
    for (unsigned i = 0; i < n; ++i) {
      core::FleetGpu g;
      g.node = name;
      g.index = i;
      g.utilization_pct = util;
      g.memory_used_mib = 100;
      g.memory_total_mib = 1000;
      m.gpus.push_back(g);
    }
    f->metrics.push_back(m);
  }
  f->collected = now;
  return f;
}

TEST(ClusterRoutes, SelectNodesGpus) {
  std::shared_ptr<const core::FleetFacts> facts;
  ClusterView view;
  view.latest = [&facts] { return facts; };
  view.sources = {"2 agent(s)"};
  Router router;
  add_cluster_routes(router, &view);

  auto a = get(router, "/api/v1/cluster/nodes");
  EXPECT_EQ(a.status, 503u);
  EXPECT_EQ(a.j["error"], "cluster_not_ready");
  facts = fleet();

  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["node"], "quiet");
  a = get(router, "/api/v1/cluster/select", {{"gpus", "3"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_TRUE(a.j["node"].is_null());  // "busy" has no idle GPU at 50 %
  EXPECT_FALSE(a.j["reason"].get<std::string>().empty());
  a = get(router, "/api/v1/cluster/select", {{"gpus", "3"}, {"utilization_threshold", "60"}});
  EXPECT_EQ(a.j["node"], "busy");
  a = get(router, "/api/v1/cluster/select", {{"gpus", "3"}, {"fallback", "least-loaded"}});
  EXPECT_EQ(a.j["node"], "busy");
  EXPECT_EQ(a.j["fallback_used"], true);

  a = get(router, "/api/v1/cluster/nodes", {{"utilization_threshold", "10"}});
  ASSERT_EQ(a.status, 200u);
  ASSERT_EQ(a.j["nodes"].size(), 2u);
  EXPECT_EQ(a.j["nodes"][1]["idle_gpu_count"], 0);
  EXPECT_EQ(a.j["thresholds"]["utilization"], 10.0);
  a = get(router, "/api/v1/cluster/gpus");
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["gpus"].size(), 6u);

  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"gpus", "0"},
                                                                             {"gpus", "-1"},
                                                                             {"gpus", "x"},
                                                                             {"utilization_threshold", "101"},
                                                                             {"memory_threshold", "nan"},
                                                                             {"fallback", "any"}}) {
    a = get(router, "/api/v1/cluster/select", {{k, v}});
    EXPECT_EQ(a.status, 400u) << k << "=" << v;
    EXPECT_EQ(a.j["error"], "bad_request");
  }
}

// The facts' age is the routes' clock's: metrics older than max_age count as none (nothing sleeps).
TEST(ClusterRoutes, MetricsAgeByTheRoutesClock) {
  test::FakeClock clock;
  const auto facts = fleet(clock.wall_now());
  ClusterView view;
  view.latest = [&facts] { return facts; };
  view.max_age = std::chrono::seconds(60);
  Router router;
  add_cluster_routes(router, &view, clock);

  auto a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["node"], "quiet");
  a = get(router, "/api/v1/cluster/nodes");
  ASSERT_EQ(a.status, 200u);
  for (const auto& n : a.j["nodes"]) EXPECT_EQ(n["health"], "ok") << n;

  clock.advance(std::chrono::seconds(61));
  a = get(router, "/api/v1/cluster/nodes");
  ASSERT_EQ(a.status, 200u);
  ASSERT_EQ(a.j["nodes"].size(), 2u);
  for (const auto& n : a.j["nodes"]) EXPECT_EQ(n["health"], "metrics_stale") << n;
  // Stale metrics count as none: every free GPU is taken as idle, and the bigger node wins.
  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["node"], "busy") << a.j;
}

// A GPU whose own series stopped leaves the GPU list by the routes' clock, as it leaves the node
// summaries, even while the facts' collection time stands still (a stalled refresh).
TEST(ClusterRoutes, AStaleGpuLeavesTheGpuListByTheRoutesClock) {
  test::FakeClock clock;
  auto f = std::make_shared<core::FleetFacts>(*fleet(clock.wall_now()));
  for (auto& m : f->metrics)
    for (auto& g : m.gpus) g.observed = clock.wall_now();
  std::shared_ptr<const core::FleetFacts> facts = f;
  ClusterView view;
  view.latest = [&facts] { return facts; };
  view.max_age = std::chrono::seconds(60);
  Router router;
  add_cluster_routes(router, &view, clock);
  auto a = get(router, "/api/v1/cluster/gpus");
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["gpus"].size(), 6u) << a.j;
  clock.advance(std::chrono::seconds(61));
  a = get(router, "/api/v1/cluster/gpus");
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["gpus"].size(), 0u) << a.j;
}

TEST(ClusterRoutes, SelectByGpuResourceAndNoPinWhenKubernetesFailed) {
  auto mixed = std::make_shared<core::FleetFacts>();
  mixed->kube.emplace();
  for (auto [name, resource] : {std::pair{"amd-1", "amd.com/gpu"}, std::pair{"nv-1", "nvidia.com/gpu"}}) {
    core::KubeNode k;
    k.name = name;
    k.gpu_resource = resource;
    k.gpu_capacity = k.gpu_allocatable = 4;
    k.ready = true;
    mixed->kube->push_back(k);
  }
  std::shared_ptr<const core::FleetFacts> facts = mixed;
  ClusterView view;
  view.latest = [&facts] { return facts; };
  Router router;
  add_cluster_routes(router, &view);

  auto a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}});
  EXPECT_EQ(a.j["node"], "amd-1");  // equal nodes: the name decides
  EXPECT_TRUE(a.j["gpu_resource"].is_null());
  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}, {"gpu_resource", "nvidia.com/gpu"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["node"], "nv-1");
  EXPECT_EQ(a.j["gpu_resource"], "nvidia.com/gpu");
  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}, {"gpu_resource", "amd.com/gpu"}});
  EXPECT_EQ(a.j["node"], "amd-1");
  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}, {"gpu_resource", "any"}});
  EXPECT_EQ(a.j["node"], "amd-1");
  a = get(router, "/api/v1/cluster/select", {{"gpus", "2"}, {"gpu_resource", "intel.com/gpu"}});
  EXPECT_EQ(a.status, 400u);

  // Kubernetes did not answer this round: metrics alone never choose a node.
  auto failed = std::make_shared<core::FleetFacts>(*fleet());
  failed->kube_error = "kubernetes: HTTP 403 Forbidden: cannot list pods";
  failed->source_errors.push_back(*failed->kube_error);
  facts = failed;
  a = get(router, "/api/v1/cluster/select", {{"gpus", "1"}});
  ASSERT_EQ(a.status, 200u);
  EXPECT_TRUE(a.j["node"].is_null());
  EXPECT_EQ(a.j["source_failed"], true);
  EXPECT_NE(a.j["reason"].get<std::string>().find("HTTP 403"), std::string::npos) << a.j["reason"];
  EXPECT_EQ(a.j["kubernetes_error"], *failed->kube_error);
  // The nodes document still shows what the metrics know, and the error.
  a = get(router, "/api/v1/cluster/nodes");
  ASSERT_EQ(a.status, 200u);
  EXPECT_EQ(a.j["nodes"].size(), 2u);
  EXPECT_EQ(a.j["errors"][0], *failed->kube_error);
}

// /nodes and /gpus render once per refresh: the same text is shared until new facts come, other
// thresholds are asked for, or the clock moves a node's stated age or staleness.
TEST(ClusterRoutes, DocumentsRenderedOncePerRefresh) {
  test::FakeClock clock;
  std::shared_ptr<const core::FleetFacts> facts = fleet(clock.wall_now());
  ClusterView view;
  view.latest = [&facts] { return facts; };
  view.max_age = std::chrono::seconds(60);
  Router router;
  add_cluster_routes(router, &view, clock);
  const auto body = [&](const std::string& path, std::map<std::string, std::string> query = {}) {
    Request req;
    req.path = req.target = path;
    req.query = std::move(query);
    const auto m = router.match(req);
    return invoke(*m.route, req).body;
  };
  for (const char* path : {"/api/v1/cluster/nodes", "/api/v1/cluster/gpus"}) {
    const auto first = body(path);
    EXPECT_EQ(body(path), first) << path;  // the same text, not a copy
    clock.advance(std::chrono::seconds(30));
    EXPECT_EQ(body(path), first) << path;  // still fresh: nothing to say differently
    const auto other = body(path, {{"utilization_threshold", "10"}});
    EXPECT_NE(other, first);
    EXPECT_NE(*other, *first) << path;
    EXPECT_NE(*body(path), *other) << path;  // the default thresholds again
    facts = fleet(clock.wall_now());         // a refresh
    const auto refreshed = body(path);
    EXPECT_NE(refreshed, first) << path;
    EXPECT_EQ(body(path), refreshed) << path;
  }
  // Stale: the stated age moves with the clock, each second.
  clock.advance(std::chrono::seconds(70));
  auto j = nlohmann::json::parse(*body("/api/v1/cluster/nodes"));
  EXPECT_EQ(j["nodes"][0]["health"], "metrics_stale");
  EXPECT_EQ(j["nodes"][0]["problems"][0], "metrics are 70 s old (more than the 60 s allowed)") << j;
  clock.advance(std::chrono::milliseconds(400));
  EXPECT_EQ(nlohmann::json::parse(*body("/api/v1/cluster/nodes"))["nodes"][0]["problems"][0],
            "metrics are 70 s old (more than the 60 s allowed)");
  clock.advance(std::chrono::milliseconds(700));
  EXPECT_EQ(nlohmann::json::parse(*body("/api/v1/cluster/nodes"))["nodes"][0]["problems"][0],
            "metrics are 71 s old (more than the 60 s allowed)");
}

// A client that accepts gzip gets the kept text gzip-encoded, made once; the others the plain text.
TEST(ClusterRoutes, DocumentsGzipEncodedOnceForClientsThatAcceptIt) {
  std::shared_ptr<const core::FleetFacts> facts = fleet();
  ClusterView view;
  view.latest = [&facts] { return facts; };
  Router router;
  add_cluster_routes(router, &view);
  const auto get_as = [&](bool gzip) {
    Request req;
    req.path = req.target = "/api/v1/cluster/nodes";
    req.accepts_gzip = gzip;
    return invoke(*router.match(req).route, req);
  };
  const auto plain = get_as(false);
  EXPECT_FALSE(plain.gzip);
  const auto gz = get_as(true);
  ASSERT_TRUE(gz.gzip);
  EXPECT_TRUE(gz.negotiated);
  EXPECT_EQ(wire::gunzip(*gz.body), *plain.body);
  EXPECT_EQ(get_as(true).body, gz.body);  // the same encoded text, not made again
  EXPECT_EQ(get_as(false).body, plain.body);
}

// Requests that miss the kept text together wait for one rendering (and one encoding) rather than each
// making its own: every one of them gets the same text. The view holds them until all have asked.
TEST(ClusterRoutes, RequestsThatMissTogetherShareOneRendering) {
  constexpr int kClients = 8;
  auto big = std::make_shared<core::FleetFacts>();
  for (int n = 0; n < 2000; ++n) {
    core::NodeMetrics m;
    m.node = "node-" + std::to_string(n);
    m.source = "agent";
    m.observed = big->collected = std::chrono::system_clock::now();
    for (unsigned i = 0; i < 8; ++i) {
      core::FleetGpu g;
      g.node = m.node;
      g.index = i;
      g.utilization_pct = 3;
      m.gpus.push_back(g);
    }
    big->metrics.push_back(std::move(m));
  }
  const std::shared_ptr<const core::FleetFacts> facts = big;
  for (const bool gzip : {false, true}) {
    std::latch all_asked(kClients);
    ClusterView view;
    view.latest = [&] {
      all_asked.arrive_and_wait();
      return facts;
    };
    Router router;
    add_cluster_routes(router, &view);
    std::vector<std::shared_ptr<const std::string>> bodies(kClients);
    {
      std::vector<std::jthread> clients;
      for (int c = 0; c < kClients; ++c)
        clients.emplace_back([&, c] {
          Request req;
          req.path = req.target = "/api/v1/cluster/gpus";
          req.accepts_gzip = gzip;
          bodies[c] = invoke(*router.match(req).route, req).body;
        });
    }
    for (const auto& b : bodies) {
      ASSERT_TRUE(b);
      EXPECT_EQ(b, bodies[0]) << (gzip ? "gzip" : "plain");  // the same text, made once
    }
  }
}

TEST(ClusterRoutes, WithoutAViewTheyAnswer503) {
  Router router;
  add_cluster_routes(router, nullptr);
  const auto a = get(router, "/api/v1/cluster/select", {{"gpus", "1"}});
  EXPECT_EQ(a.status, 503u);
  EXPECT_EQ(a.j["error"], "cluster_not_configured");
}

}  // namespace
}  // namespace gf::server
