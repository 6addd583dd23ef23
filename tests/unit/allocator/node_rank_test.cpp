// Node summaries and node selection from fabricated Kubernetes nodes and metrics.
#include "allocator/node_rank.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace gf::allocator {
namespace {

using namespace std::chrono_literals;
const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));

core::KubeNode kube(std::string name, std::uint64_t allocatable, std::uint64_t requested = 0) {
  core::KubeNode k;
  k.name = std::move(name);
  k.gpu_resource = "nvidia.com/gpu";
  k.gpu_capacity = allocatable;
  k.gpu_allocatable = allocatable;
  k.gpu_requested = requested;
  k.ready = true;
  return k;
}

core::FleetGpu gpu(std::string node, unsigned index, double util, double used_mib, double total_mib = 81920) {
  core::FleetGpu g;
  g.node = std::move(node);
  g.index = index;
  g.model = "H100";
  g.utilization_pct = util;
  g.memory_used_mib = used_mib;
  g.memory_total_mib = total_mib;
  return g;
}

// A node's metrics: one GPU per (utilization %, memory %) pair.
core::NodeMetrics metrics(const std::string& node, std::vector<std::pair<double, double>> loads,
                          std::string source = "prometheus") {
  core::NodeMetrics m;
  m.node = node;
  m.source = std::move(source);
  m.observed = kNow - 5s;
  unsigned i = 0;
  for (auto [u, mem] : loads) m.gpus.push_back(gpu(node, i++, u, mem / 100.0 * 81920));
  return m;
}

RankOptions opts(double util = 30, double mem = 50) {
  RankOptions o;
  o.idle = {util, mem};
  o.now = kNow;
  return o;
}

const NodeSummary& find(const Summaries& s, const std::string& name) {
  const auto it = std::find_if(s.nodes.begin(), s.nodes.end(), [&](const NodeSummary& n) { return n.name == name; });
  if (it == s.nodes.end()) throw std::runtime_error("no summary for " + name);
  return *it;
}

TEST(GpuIdle, BothThresholdsAreStrictAndMemoryIsCapacity) {
  const IdleThresholds t;
  EXPECT_TRUE(gpu_is_idle(gpu("n", 0, 29.9, 40000), t));
  EXPECT_FALSE(gpu_is_idle(gpu("n", 0, 30.0, 100), t));  // utilization at the bound
  EXPECT_FALSE(gpu_is_idle(gpu("n", 0, 0, 40960), t));   // exactly 50 % of 81920 MiB
  EXPECT_TRUE(gpu_is_idle(gpu("n", 0, 0, 40959), t));
  auto unknown = gpu("n", 0, 0, 0);
  unknown.memory_total_mib.reset();
  EXPECT_FALSE(gpu_is_idle(unknown, t));
  EXPECT_TRUE(gpu_is_idle(gpu("n", 0, 35, 100), IdleThresholds{40, 50}));  // thresholds per call
  EXPECT_FALSE(gpu_is_idle(gpu("n", 0, 5, 30000), IdleThresholds{30, 20}));
}

TEST(Summaries, KubernetesAndMetricsCombine) {
  core::FleetFacts f;
  f.kube = {{kube("a", 8, 3)}};
  (*f.kube)[0].gpu_capacity = 8;
  f.metrics = {metrics("a", {{10, 10}, {50, 10}, {10, 60}, {0, 0}})};
  const auto s = summarize(f, opts());
  const auto& a = find(s, "a");
  EXPECT_EQ(a.total_gpus, 8u);
  EXPECT_EQ(a.allocatable_gpus, 8u);
  EXPECT_EQ(a.requested_gpus, 3u);
  EXPECT_EQ(a.free_gpus, 5u);
  EXPECT_EQ(a.gpus_with_metrics, 4u);
  EXPECT_EQ(a.idle_gpu_count, 2u);
  ASSERT_TRUE(a.avg_utilization);
  EXPECT_DOUBLE_EQ(*a.avg_utilization, 17.5);
  EXPECT_DOUBLE_EQ(*a.avg_memory_usage, 20.0);
  EXPECT_EQ(a.health, NodeHealth::Ok);
  EXPECT_TRUE(a.has_metrics);
  EXPECT_EQ(a.from.free_gpus, "kubernetes: allocatable - requested");
  EXPECT_NE(a.from.idle_gpu_count.find("prometheus"), std::string::npos);
}

TEST(Summaries, IdleNeverExceedsFreeWhereKubernetesIsKnown) {
  core::FleetFacts f;
  f.kube = {{kube("a", 4, 3)}};
  f.metrics = {metrics("a", {{0, 0}, {0, 0}, {0, 0}, {0, 0}})};
  const auto s = summarize(f, opts());
  const auto& a = find(s, "a");
  EXPECT_EQ(a.free_gpus, 1u);
  EXPECT_EQ(a.idle_gpu_count, 1u);
  EXPECT_NE(a.from.idle_gpu_count.find("capped"), std::string::npos);
}

TEST(Summaries, NoMetricsCountsFreeGpusIdle) {
  core::FleetFacts f;
  f.kube = {{kube("a", 8, 2)}};
  const auto s = summarize(f, opts());
  const auto& a = find(s, "a");
  EXPECT_FALSE(a.has_metrics);
  EXPECT_EQ(a.idle_gpu_count, 6u);
  EXPECT_EQ(a.gpus_with_metrics, 0u);
  EXPECT_FALSE(a.avg_utilization);
  EXPECT_EQ(a.health, NodeHealth::NoMetrics);
  EXPECT_EQ(a.from.idle_gpu_count, "assumed: no metrics, free GPUs counted idle");
}

TEST(Summaries, StaleMetricsCountAsNoMetrics) {
  core::FleetFacts f;
  f.kube = {{kube("a", 2)}};
  f.metrics = {metrics("a", {{90, 90}, {90, 90}})};
  f.metrics[0].observed = kNow - 61s;
  auto s = summarize(f, opts());
  EXPECT_EQ(find(s, "a").health, NodeHealth::MetricsStale);
  EXPECT_FALSE(find(s, "a").has_metrics);
  EXPECT_EQ(find(s, "a").idle_gpu_count, 2u);
  f.metrics[0].observed = kNow - 59s;
  s = summarize(f, opts());
  EXPECT_EQ(find(s, "a").health, NodeHealth::Ok);
  EXPECT_EQ(find(s, "a").idle_gpu_count, 0u);
}

TEST(Summaries, AGpuWhoseSeriesStoppedIsStaleBesideFreshOnes) {
  // Prometheus keeps answering a stopped series for minutes: its own sample time says it is old.
  core::FleetFacts f;
  f.kube = {{kube("a", 2)}};
  f.metrics = {metrics("a", {{0, 0}, {0, 0}})};
  f.metrics[0].gpus[0].observed = kNow - 5s;
  f.metrics[0].gpus[1].observed = kNow - 300s;  // stopped; the node's newest sample is still fresh
  auto s = summarize(f, opts());
  const auto& n = find(s, "a");
  EXPECT_TRUE(n.has_metrics);
  EXPECT_EQ(n.gpus_with_metrics, 1u);
  EXPECT_EQ(n.idle_gpu_count, 1u);  // the stale GPU is not counted idle on old numbers
  EXPECT_EQ(n.health, NodeHealth::Ok);
  ASSERT_EQ(n.problems.size(), 1u);
  EXPECT_NE(n.problems[0].find("1 GPU(s) with metrics older than the 60 s allowed"), std::string::npos)
      << n.problems[0];
  // Every GPU stale: the node has no metrics (free GPUs counted idle, as for any node without metrics).
  f.metrics[0].gpus[0].observed = kNow - 120s;
  s = summarize(f, opts());
  EXPECT_FALSE(find(s, "a").has_metrics);
  EXPECT_EQ(find(s, "a").health, NodeHealth::MetricsStale);
  EXPECT_EQ(find(s, "a").idle_gpu_count, 2u);
  // max_age 0: never stale.
  auto o = opts();
  o.max_age = std::chrono::milliseconds(0);
  EXPECT_EQ(find(summarize(f, o), "a").gpus_with_metrics, 2u);
}

TEST(Summaries, HealthIsTheWorstStateAndEveryProblemIsListed) {
  core::FleetFacts f;
  auto k = kube("a", 2);
  k.ready = false;
  k.unschedulable = true;
  f.kube = {{k, kube("b", 2), kube("c", 2)}};
  core::NodeMetrics down;
  down.node = "b";
  down.source = "agent";
  down.error = "http://b:9401: connection refused";
  core::NodeMetrics bad = down;
  bad.node = "c";
  bad.source = "prometheus";
  f.metrics = {down, bad};
  const auto s = summarize(f, opts());
  EXPECT_EQ(find(s, "a").health, NodeHealth::NotReady);
  EXPECT_EQ(find(s, "a").problems.size(), 3u);  // not Ready, cordoned, no metrics
  EXPECT_EQ(find(s, "b").health, NodeHealth::AgentUnreachable);
  EXPECT_NE(find(s, "b").problems[0].find("connection refused"), std::string::npos);
  EXPECT_EQ(find(s, "c").health, NodeHealth::MetricsError);
  EXPECT_EQ(health_name(find(s, "b").health), "agent_unreachable");
}

TEST(Summaries, MetricsOnlyFleet) {
  core::FleetFacts f;  // no Kubernetes
  f.metrics = {metrics("m1", {{0, 0}, {80, 10}, {0, 0}})};
  const auto s = summarize(f, opts());
  ASSERT_EQ(s.nodes.size(), 1u);
  const auto& n = s.nodes[0];
  EXPECT_FALSE(n.in_kubernetes);
  EXPECT_EQ(n.total_gpus, 3u);
  EXPECT_EQ(n.free_gpus, 3u);
  EXPECT_EQ(n.requested_gpus, 0u);
  EXPECT_EQ(n.idle_gpu_count, 2u);
  EXPECT_TRUE(n.ready && n.schedulable);
  EXPECT_EQ(n.gpu_product, "H100");
}

TEST(Summaries, MetricsForNodesKubernetesDoesNotListAreNamed) {
  core::FleetFacts f;
  f.kube = {{kube("a", 1)}};
  f.metrics = {metrics("ghost", {{0, 0}})};
  const auto s = summarize(f, opts());
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.unknown_nodes, std::vector<std::string>{"ghost"});
}

TEST(Selection, SeedOrderIdleEnoughThenMoreIdleThenLowerUtilization) {
  core::FleetFacts f;
  f.kube = {{kube("few", 8), kube("many", 8), kube("calm", 8)}};
  f.metrics = {metrics("few", {{0, 0}, {90, 90}, {90, 90}, {90, 90}, {90, 90}, {90, 90}, {90, 90}, {90, 90}}),
               metrics("many", {{20, 0}, {20, 0}, {20, 0}, {20, 0}, {90, 0}, {90, 0}, {90, 0}, {90, 0}}),
               metrics("calm", {{10, 0}, {10, 0}, {10, 0}, {10, 0}, {40, 0}, {40, 0}, {40, 0}, {40, 0}})};
  const auto s = summarize(f, opts());
  // 2 GPUs: "few" has only one idle GPU; "many" and "calm" have 4 each, "calm" is less used.
  auto c = select_node(s, 2);
  ASSERT_TRUE(c.node);
  EXPECT_EQ(*c.node, "calm");
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_EQ(c.candidates[1].node, "many");
  EXPECT_EQ(c.candidates[2].node, "few");
  EXPECT_FALSE(c.candidates[2].enough_idle);
  // Thresholds per call: at utilization < 50 %, "calm" has 8 idle GPUs.
  c = select_node(summarize(f, opts(50, 50)), 6);
  EXPECT_EQ(c.node.value_or(""), "calm");
  // At utilization < 15 % only "few" (1) and "calm" (4) have idle GPUs: more idle wins.
  c = select_node(summarize(f, opts(15, 50)), 1);
  EXPECT_EQ(c.node.value_or(""), "calm");
}

TEST(Selection, TightestFitAmongEquals) {
  core::FleetFacts f;
  f.kube = {{kube("big", 8, 6), kube("small", 4, 2), kube("also-big", 8, 6)}};
  // No metrics anywhere, 2 free GPUs each: all equal, so the name decides.
  auto c = select_node(summarize(f, opts()), 2);
  EXPECT_EQ(c.node.value_or(""), "also-big");
  f.kube = {{kube("big", 8, 0), kube("small", 4, 0)}};
  f.metrics = {metrics("big", {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {90, 90}, {90, 90}, {90, 90}, {90, 90}}),
               metrics("small", {{0, 0}, {0, 0}, {0, 0}, {0, 0}})};
  // Both have 4 idle GPUs; "small" averages 0 %, "big" 45 %: the seed's order picks "small" anyway.
  c = select_node(summarize(f, opts()), 2);
  EXPECT_EQ(c.node.value_or(""), "small");
  // Equal idle count and utilization: the node with fewer free GPUs wins, keeping the 8-GPU block whole.
  // Here 2 idle GPUs and 0 % mean utilization on both (the other GPUs full of memory).
  f.kube = {{kube("big", 8, 0), kube("small", 6, 0)}};
  f.metrics = {metrics("big", {{0, 0}, {0, 0}, {0, 90}, {0, 90}, {0, 90}, {0, 90}, {0, 90}, {0, 90}}),
               metrics("small", {{0, 0}, {0, 0}, {0, 90}, {0, 90}, {0, 90}, {0, 90}})};
  c = select_node(summarize(f, opts()), 2);
  EXPECT_EQ(c.node.value_or(""), "small");
}

TEST(Selection, OnlyReadySchedulableNodesWithEnoughFreeGpusAreCandidates) {
  core::FleetFacts f;
  auto down = kube("down", 8);
  down.ready = false;
  auto cordoned = kube("cordoned", 8);
  cordoned.unschedulable = true;
  f.kube = {{down, cordoned, kube("full", 8, 7), kube("ok", 2, 0)}};
  auto c = select_node(summarize(f, opts()), 2);
  EXPECT_EQ(c.node.value_or(""), "ok");
  c = select_node(summarize(f, opts()), 3);
  EXPECT_FALSE(c.node);
  EXPECT_NE(c.reason.find("no node can host 3 GPU(s)"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("down: not Ready"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("cordoned: unschedulable"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("full: 1 free GPU(s) < 3"), std::string::npos) << c.reason;
  for (const auto& cand : c.candidates) EXPECT_FALSE(cand.eligible) << cand.node;
  // The fallback cannot help when no node has enough free GPUs.
  EXPECT_FALSE(select_node(summarize(f, opts()), 3, Fallback::LeastLoaded).node);
}

TEST(Selection, NoIdleNodeNoPinByDefaultLeastLoadedOnRequest) {
  core::FleetFacts f;
  f.kube = {{kube("hot", 4), kube("warm", 4), kube("tiny", 1)}};
  f.metrics = {metrics("hot", {{95, 10}, {95, 10}, {95, 10}, {95, 10}}),
               metrics("warm", {{60, 10}, {60, 10}, {60, 10}, {10, 10}}), metrics("tiny", {{0, 0}})};
  const auto s = summarize(f, opts());
  auto c = select_node(s, 2);
  EXPECT_FALSE(c.node);
  EXPECT_FALSE(c.fallback_used);
  EXPECT_NE(c.reason.find("no node has 2 idle GPU(s)"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("'warm' with 1 idle"), std::string::npos) << c.reason;
  c = select_node(s, 2, Fallback::LeastLoaded);
  ASSERT_TRUE(c.node);
  EXPECT_EQ(*c.node, "warm");  // "tiny" is idler but has one free GPU
  EXPECT_TRUE(c.fallback_used);
  EXPECT_NE(std::find(c.reasoning.begin(), c.reasoning.end(), "Selected node 'warm' for deployment:"),
            c.reasoning.end());
}

TEST(Selection, ReasoningUsesTheSeedsLines) {
  core::FleetFacts f;
  f.kube = {{kube("host-10-97-65-155", 8)}};
  const auto c = select_node(summarize(f, opts()), 1);
  const std::vector<std::string> expected = {"=== GPU Node Selection ===",
                                             "Looking for node with 1 idle GPU(s)...",
                                             "Selected node 'host-10-97-65-155' for deployment:",
                                             "  - Allocatable GPUs: 8/8",
                                             "  - Free GPUs: 8 (0 requested)",
                                             "  - Idle GPUs: 8",
                                             "  - Avg Utilization: n/a (no metrics)",
                                             "  - Avg Memory Usage: n/a (no metrics)",
                                             "\u2713 Selected node: host-10-97-65-155",
                                             "=========================="};
  EXPECT_EQ(c.reasoning, expected);
  core::FleetFacts g;
  g.metrics = {metrics("m", {{12.5, 25}})};
  const auto d = select_node(summarize(g, opts()), 1);
  EXPECT_NE(std::find(d.reasoning.begin(), d.reasoning.end(), "  - Avg Utilization: 12.5%"), d.reasoning.end());
  EXPECT_NE(std::find(d.reasoning.begin(), d.reasoning.end(), "  - Avg Memory Usage: 25.0%"), d.reasoning.end());
}

TEST(Selection, GpuResourceKeepsEachVendorOnItsOwnNodes) {
  // A mixed fleet: the AMD node is the best by the seed's order (most idle GPUs), then NVIDIA's.
  core::FleetFacts f;
  auto amd = kube("amd-big", 8);
  amd.gpu_resource = "amd.com/gpu";
  auto amd_cordoned = kube("amd-cordoned", 8);
  amd_cordoned.gpu_resource = "amd.com/gpu";
  amd_cordoned.unschedulable = true;
  f.kube = {{amd, amd_cordoned, kube("nv-small", 4), kube("nv-busy", 4, 3)}};
  const auto s = summarize(f, opts());
  EXPECT_EQ(find(s, "amd-big").from.gpu_resource, "kubernetes: node resources");

  auto c = select_node(s, 2);  // any: the 8 idle AMD GPUs win
  EXPECT_EQ(c.node.value_or(""), "amd-big");
  EXPECT_TRUE(c.gpu_resource.empty());
  c = select_node(s, 2, Fallback::None, "nvidia.com/gpu");
  EXPECT_EQ(c.node.value_or(""), "nv-small");
  EXPECT_EQ(c.gpu_resource, "nvidia.com/gpu");
  EXPECT_EQ(c.reasoning[1], "Looking for node with 2 idle GPU(s) of nvidia.com/gpu...");
  for (const auto& cand : c.candidates)
    if (cand.node.rfind("amd", 0) == 0) {
      EXPECT_FALSE(cand.eligible) << cand.node;
      EXPECT_NE(cand.why_not.find("amd.com/gpu, not nvidia.com/gpu"), std::string::npos) << cand.why_not;
    }
  c = select_node(s, 2, Fallback::None, "amd.com/gpu");
  EXPECT_EQ(c.node.value_or(""), "amd-big");
  // 5 AMD GPUs fit on amd-big only; with the NVIDIA resource nothing fits, and the fallback cannot help.
  EXPECT_EQ(select_node(s, 5, Fallback::None, "amd.com/gpu").node.value_or(""), "amd-big");
  c = select_node(s, 5, Fallback::LeastLoaded, "nvidia.com/gpu");
  EXPECT_FALSE(c.node);
  EXPECT_NE(c.reason.find("no node can host 5 GPU(s) of nvidia.com/gpu"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("amd-big: amd.com/gpu, not nvidia.com/gpu"), std::string::npos) << c.reason;
}

TEST(Selection, WithoutKubernetesTheVendorComesFromTheModelName) {
  EXPECT_EQ(gpu_resource_of_model("NVIDIA H100 80GB HBM3"), "nvidia.com/gpu");
  EXPECT_EQ(gpu_resource_of_model("Tesla V100-SXM2-16GB"), "nvidia.com/gpu");
  EXPECT_EQ(gpu_resource_of_model("AMD Instinct MI300X"), "amd.com/gpu");
  EXPECT_EQ(gpu_resource_of_model("AMD GPU [1002:74a1]"), "amd.com/gpu");
  EXPECT_EQ(gpu_resource_of_model("Radeon Pro W7900"), "amd.com/gpu");
  EXPECT_EQ(gpu_resource_of_model("Simulated H100 80GB HBM3"), "");
  EXPECT_EQ(gpu_resource_of_model(""), "");

  core::FleetFacts f;
  f.metrics = {metrics("nv", {{0, 0}, {0, 0}}), metrics("mi", {{0, 0}, {0, 0}, {0, 0}}), metrics("sim", {{0, 0}})};
  for (auto& g : f.metrics[0].gpus) g.model = "NVIDIA A100-SXM4-80GB";
  for (auto& g : f.metrics[1].gpus) g.model = "AMD Instinct MI250X";
  for (auto& g : f.metrics[2].gpus) g.model = "Simulated H100";
  const auto s = summarize(f, opts());
  EXPECT_EQ(find(s, "nv").gpu_resource, "nvidia.com/gpu");
  EXPECT_EQ(find(s, "mi").gpu_resource, "amd.com/gpu");
  EXPECT_EQ(find(s, "sim").gpu_resource, "");
  EXPECT_EQ(select_node(s, 1).node.value_or(""), "mi");  // any: three idle GPUs
  EXPECT_EQ(select_node(s, 1, Fallback::None, "nvidia.com/gpu").node.value_or(""), "nv");
  const auto c = select_node(s, 1, Fallback::None, "nvidia.com/gpu");
  const auto of = [&c](const char* node) {
    return std::find_if(c.candidates.begin(), c.candidates.end(),
                        [node](const Candidate& x) { return x.node == node; });
  };
  // Known to be AMD: refused. Unknown (the model names no vendor): not refused for it.
  ASSERT_NE(of("mi"), c.candidates.end());
  EXPECT_FALSE(of("mi")->eligible);
  EXPECT_EQ(of("mi")->why_not, "amd.com/gpu, not nvidia.com/gpu");
  ASSERT_NE(of("sim"), c.candidates.end());
  EXPECT_TRUE(of("sim")->eligible);
  // With two GPUs only "nv" has room; asked for AMD, "sim" (unknown) is the one left.
  EXPECT_EQ(select_node(s, 2, Fallback::None, "amd.com/gpu").node.value_or(""), "mi");
  f.metrics[1].gpus.pop_back();
  f.metrics[1].gpus.pop_back();
  EXPECT_EQ(select_node(summarize(f, opts()), 1, Fallback::None, "nvidia.com/gpu").node.value_or(""), "nv");
  EXPECT_EQ(select_node(summarize(f, opts()), 1, Fallback::None, "amd.com/gpu").node.value_or(""), "mi");
  // An agent says which backend read its GPUs: that settles a model name without a vendor word.
  f.metrics[2].gpu_resource = "amd.com/gpu";
  const auto s2 = summarize(f, opts());
  EXPECT_EQ(find(s2, "sim").gpu_resource, "amd.com/gpu");
  EXPECT_EQ(find(s2, "sim").from.gpu_resource, "the agent's backend (no Kubernetes)");
  // A node whose GPUs name two vendors has no single resource.
  f.metrics[0].gpus[1].model = "AMD Instinct MI250X";
  EXPECT_EQ(find(summarize(f, opts()), "nv").gpu_resource, "");
}

TEST(Selection, NoNodeIsChosenWhenKubernetesDidNotAnswer) {
  // Kubernetes failed: only metrics are left, and they make every node look Ready, uncordoned and free.
  core::FleetFacts f;
  f.metrics = {metrics("a", {{0, 0}, {0, 0}}), metrics("b", {{90, 90}})};
  f.kube_error = "kubernetes: HTTP 401 Unauthorized from https://api:6443 (check the credentials)";
  f.source_errors.push_back(*f.kube_error);
  const auto s = summarize(f, opts());
  ASSERT_EQ(s.nodes.size(), 2u);  // what is known is still summarized
  EXPECT_EQ(find(s, "a").idle_gpu_count, 2u);
  EXPECT_EQ(find(s, "a").from.requested_gpus, "unknown (Kubernetes did not answer)");
  ASSERT_TRUE(s.kube_error);
  for (auto fb : {Fallback::None, Fallback::LeastLoaded}) {
    const auto c = select_node(s, 1, fb);
    EXPECT_FALSE(c.node);
    EXPECT_TRUE(c.source_failed);
    EXPECT_FALSE(c.fallback_used);
    EXPECT_EQ(c.reason.rfind(*f.kube_error, 0), 0u) << c.reason;
    EXPECT_NE(std::find(c.reasoning.begin(), c.reasoning.end(), "No node pinned: the Kubernetes scheduler decides."),
              c.reasoning.end());
  }
  // Without the error the same metrics choose a node.
  f.kube_error.reset();
  const auto c = select_node(summarize(f, opts()), 1);
  EXPECT_EQ(c.node.value_or(""), "a");
  EXPECT_FALSE(c.source_failed);
}

TEST(Selection, EmptyFleetSaysSo) {
  const auto c = select_node(Summaries{}, 1, Fallback::LeastLoaded);
  EXPECT_FALSE(c.node);
  EXPECT_EQ(c.reason, "no GPU nodes are known");
}

}  // namespace
}  // namespace gf::allocator
