// The health of GPUs seen through Prometheus (issue 21): the one health query, and how its series
// (dcgm-exporter's last XID and row-remap failure, a gpufleet agent's gpufleet_gpu_health) become
// FleetGpu::unhealthy with core::judge_health's rule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocator/node_rank.hpp"
#include "cluster/prometheus_source.hpp"
#include "support/prom_answer.hpp"

namespace gf::cluster {
namespace {

using test::parsed_prom_answer;

// One series of node "n" as the health query answers it: the family's name, the GPU, more labels.
std::string health_series(const std::string& name, int gpu, const std::string& value, const std::string& more = "") {
  return R"({"metric":{"__name__":")" + name + R"(","gpu":")" + std::to_string(gpu) + R"(","UUID":"GPU-)" +
         std::to_string(gpu) + R"(","Hostname":"n")" + more + R"(},"value":[1700000000,")" + value + "\"]}";
}

// Node "n" with `gpus` idle GPUs (GPU-0 …), and the health answer given.
PromAnswers fleet_with_health(int gpus, std::vector<std::string> health) {
  PromAnswers a;
  std::vector<std::string> util, used, free;
  for (int i = 0; i < gpus; ++i) {
    util.push_back(health_series("DCGM_FI_DEV_GPU_UTIL", i, "0"));
    used.push_back(health_series("DCGM_FI_DEV_FB_USED", i, "0"));
    free.push_back(health_series("DCGM_FI_DEV_FB_FREE", i, "81559"));
  }
  a.utilization = parsed_prom_answer(util);
  a.fb_used = parsed_prom_answer(used);
  a.fb_free = parsed_prom_answer(free);
  a.health = parsed_prom_answer(health);
  return a;
}

TEST(PrometheusHealth, OneQueryForTheThreeFamiliesOnlyWhatIsWrong) {
  const auto q = prometheus_queries("kubernetes_node");
  ASSERT_EQ(q.size(), 7u);
  EXPECT_EQ(q[6],
            "max by (kubernetes_node, gpu, UUID, __name__, state) "
            "({__name__=~\"DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_ROW_REMAP_FAILURE|gpufleet_gpu_health\","
            "state!~\"ok|error\"} != 0)");
}

TEST(PrometheusHealth, CriticalXidsRowRemapAndLostAreUnhealthyApplicationFaultsAreNot) {
  const auto f = join_answers(
      fleet_with_health(
          7, {health_series("DCGM_FI_DEV_XID_ERRORS", 0, "79"), health_series("DCGM_FI_DEV_XID_ERRORS", 1, "13"),
              health_series("DCGM_FI_DEV_ROW_REMAP_FAILURE", 2, "1"),
              health_series("gpufleet_gpu_health", 3, "1", R"(,"state":"lost")"),
              // the agent's verdict with an application fault as the last XID (a 48 came first)
              health_series("gpufleet_gpu_health", 4, "1", R"(,"state":"unhealthy")"),
              health_series("DCGM_FI_DEV_XID_ERRORS", 4, "31"), health_series("DCGM_FI_DEV_XID_ERRORS", 5, "95"),
              health_series("DCGM_FI_DEV_ROW_REMAP_FAILURE", 5, "1"),
              // a state this source does not judge, and a GPU no other metric names
              health_series("gpufleet_gpu_health", 6, "1", R"(,"state":"error")"),
              health_series("DCGM_FI_DEV_XID_ERRORS", 9, "79")}),
      "Hostname");
  ASSERT_EQ(f.nodes.size(), 1u);
  const auto& g = f.nodes[0].gpus;
  ASSERT_EQ(g.size(), 7u);  // the health series of GPU 9 made no GPU
  EXPECT_EQ(g[0].unhealthy, "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(g[1].unhealthy, "");  // XID 13: an application fault
  EXPECT_EQ(g[2].unhealthy, "row remap failure");
  EXPECT_EQ(g[3].unhealthy, "GPU lost");
  EXPECT_EQ(g[4].unhealthy, "unhealthy (gpufleet; last XID 31)");
  EXPECT_EQ(g[5].unhealthy, "XID 95 (uncontained ECC error)");  // the XID before the remap, as the agent says
  EXPECT_EQ(g[6].unhealthy, "");
}

TEST(PrometheusHealth, RankingCountsThemNeitherIdleNorFreeAndSaysWhy) {
  const auto f = join_answers(fleet_with_health(4, {health_series("DCGM_FI_DEV_XID_ERRORS", 0, "79"),
                                                    health_series("DCGM_FI_DEV_XID_ERRORS", 1, "79"),
                                                    health_series("DCGM_FI_DEV_XID_ERRORS", 2, "43")}),
                              "Hostname");
  core::FleetFacts facts;
  facts.metrics = f.nodes;
  allocator::RankOptions o;
  o.max_age = std::chrono::milliseconds(0);
  const auto s = allocator::summarize(facts, o);
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].idle_gpu_count, 2u);
  EXPECT_EQ(s.nodes[0].free_gpus, 2u);
  EXPECT_EQ(s.nodes[0].unhealthy.count, 2u);
  EXPECT_EQ(allocator::unhealthy_words(s.nodes[0].unhealthy),
            "2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus)");
  const auto c = allocator::select_node(s, 3);
  EXPECT_FALSE(c.node);
  EXPECT_NE(c.reason.find("n: 2 free GPU(s) < 3 (2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus))"),
            std::string::npos)
      << c.reason;
}

}  // namespace
}  // namespace gf::cluster
