// The fleet documents: the seed's keys, null for what is unknown, candidates in rank order.
#include "wire/fleet_json.hpp"

#include <gtest/gtest.h>

namespace gf::wire {
namespace {

core::FleetFacts facts() {
  core::FleetFacts f;
  core::KubeNode a;
  a.name = "a";
  a.gpu_capacity = a.gpu_allocatable = 4;
  a.gpu_requested = 1;
  a.ready = true;
  core::KubeNode b = a;
  b.name = "b";
  b.ready = false;
  f.kube = std::vector<core::KubeNode>{a, b};
  core::NodeMetrics m;
  m.node = "a";
  m.source = "prometheus";
  for (unsigned i = 0; i < 2; ++i) {
    core::FleetGpu g;
    g.node = "a";
    g.index = i;
    g.utilization_pct = i * 80.0;
    g.memory_used_mib = 1000;
    g.memory_total_mib = 3000;
    m.gpus.push_back(g);
  }
  f.metrics = {m};
  f.source_errors = {"agent x: down"};
  return f;
}

TEST(FleetJson, NodesGpusAndChoice) {
  const auto f = facts();
  allocator::RankOptions o;
  const auto s = allocator::summarize(f, o);
  FleetQueryInfo q;
  q.sources = {"prometheus http://p:9090"};
  const auto nodes = fleet_nodes_json(s, f, q);
  ASSERT_EQ(nodes["nodes"].size(), 2u);
  const auto& a = nodes["nodes"][0];
  EXPECT_EQ(a["name"], "a");
  EXPECT_EQ(a["total_gpus"], 4);
  EXPECT_EQ(a["free_gpus"], 3);
  EXPECT_EQ(a["idle_gpu_count"], 1);
  EXPECT_EQ(a["gpus_with_metrics"], 2);
  EXPECT_EQ(a["avg_utilization"], 40.0);
  EXPECT_EQ(a["avg_memory_usage"], 33.3);
  EXPECT_EQ(a["health"], "ok");
  EXPECT_TRUE(a["avg_temperature"].is_null());
  EXPECT_EQ(nodes["nodes"][1]["health"], "not_ready");
  EXPECT_TRUE(nodes["nodes"][1]["avg_utilization"].is_null());
  EXPECT_EQ(nodes["errors"][0], "agent x: down");
  EXPECT_EQ(nodes["thresholds"]["utilization"], 30.0);

  const auto gpus = fleet_gpus_json(s, f, q);
  ASSERT_EQ(gpus["gpus"].size(), 2u);
  EXPECT_EQ(gpus["gpus"][0]["idle"], true);
  EXPECT_EQ(gpus["gpus"][1]["idle"], false);
  EXPECT_EQ(gpus["gpus"][1]["memory_usage"], 33.3);
  ASSERT_EQ(gpus["nodes_without_metrics"].size(), 1u);
  EXPECT_EQ(gpus["nodes_without_metrics"][0]["node"], "b");

  const auto c = allocator::select_node(s, 1);
  const auto j = node_choice_json(c, 1, allocator::Fallback::None, f, q);
  EXPECT_EQ(j["node"], "a");
  EXPECT_EQ(j["candidates"][0]["rank"], 1);
  EXPECT_TRUE(j["candidates"][1]["rank"].is_null());
  EXPECT_EQ(j["candidates"][1]["why_not"], "not Ready");
  EXPECT_EQ(j["fallback"], "none");
  const auto none = node_choice_json(allocator::select_node(s, 4), 4, allocator::Fallback::LeastLoaded, f, q);
  EXPECT_TRUE(none["node"].is_null());
  EXPECT_FALSE(none["reason"].get<std::string>().empty());
  EXPECT_EQ(none["fallback"], "least-loaded");
}

}  // namespace
}  // namespace gf::wire
