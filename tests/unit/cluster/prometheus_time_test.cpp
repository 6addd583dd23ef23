// The sample times of the Prometheus source: asked per node (count_values), per GPU only for the nodes
// whose answer leaves them undecided, with the same result as asking every GPU's.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cluster/prometheus_source.hpp"
#include "support/prom_answer.hpp"

namespace gf::cluster {
namespace {

using test::parsed_prom_answer;

// One GPU's series (utilization, framebuffer or its sample time), as `max by (Hostname, gpu, UUID)` answers.
std::string gpu_series(const std::string& node, int gpu, const std::string& value) {
  return R"({"metric":{"Hostname":")" + node + R"(","gpu":")" + std::to_string(gpu) + R"(","UUID":"GPU-)" + node + "-" +
         std::to_string(gpu) + R"("},"value":[1700000099,")" + value + "\"]}";
}
// One line of count_values by (Hostname) ("gpufleet_sample_time", …).
std::string node_time(const std::string& node, const std::string& t, int series) {
  return R"({"metric":{"Hostname":")" + node + R"(","gpufleet_sample_time":")" + t + R"("},"value":[1700000099,")" +
         std::to_string(series) + "\"]}";
}
long long seconds_of(const std::optional<std::chrono::system_clock::time_point>& t) {
  return t ? std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count() : -1;
}

// Nodes a, b, c, d with 3 GPUs of utilization each; d's GPU 3 has framebuffer only.
PromAnswers four_nodes() {
  PromAnswers a;
  std::vector<std::string> util, fb;
  for (const char* n : {"a", "b", "c", "d"})
    for (int g = 0; g < 3; ++g) {
      util.push_back(gpu_series(n, g, "5"));
      fb.push_back(gpu_series(n, g, "100"));
    }
  fb.push_back(gpu_series("d", 3, "100"));
  a.utilization = parsed_prom_answer(util);
  a.fb_used = parsed_prom_answer(fb);
  return a;
}

TEST(PrometheusSampleTime, OneTimePerNodeIsEveryGpusTime) {
  auto a = four_nodes();
  a.sample_time = parsed_prom_answer({node_time("a", "1700000001.5", 3), node_time("d", "1700000004", 3)});
  // A per-GPU answer does not override a decided node.
  a.gpu_sample_time = parsed_prom_answer({gpu_series("a", 0, "1600000000")});
  const auto f = join_answers(a, "Hostname");
  ASSERT_EQ(f.nodes.size(), 4u);
  const auto& na = f.nodes[0];
  EXPECT_EQ(seconds_of(na.observed), 1700000001);
  ASSERT_TRUE(na.observed);
  EXPECT_EQ(na.observed->time_since_epoch(), std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                 std::chrono::duration<double>(1700000001.5)));
  for (const auto& g : na.gpus) EXPECT_EQ(g.observed, na.observed) << g.uuid;
  // b has no sample time at all: unknown age, as before.
  EXPECT_FALSE(f.nodes[1].observed);
  EXPECT_FALSE(f.nodes[1].gpus[0].observed);
  // d: its three GPUs with utilization take the time; the GPU without a utilization series has none
  // (the per-GPU query, timestamp of the utilization, would not name it either).
  const auto& nd = f.nodes[3];
  ASSERT_EQ(nd.gpus.size(), 4u);
  EXPECT_EQ(seconds_of(nd.observed), 1700000004);
  EXPECT_EQ(seconds_of(nd.gpus[2].observed), 1700000004);
  EXPECT_FALSE(nd.gpus[3].observed);
}

TEST(PrometheusSampleTime, SeveralTimesOrOtherCountsAreAskedPerGpu) {
  auto a = four_nodes();
  a.sample_time = parsed_prom_answer({
      node_time("a", "1700000010", 2), node_time("a", "1700000000", 1),  // two times
      node_time("b", "1700000020", 4),                                   // a GPU scraped twice
      node_time("c", "not a number", 3),                                 // unreadable
      node_time("d", "1700000040", 2),                                   // a NaN utilization sample
  });
  a.gpu_sample_time = parsed_prom_answer({gpu_series("a", 0, "1700000010"), gpu_series("a", 1, "1700000010"),
                                          gpu_series("a", 2, "1700000000"), gpu_series("b", 0, "1700000020"),
                                          gpu_series("b", 1, "1700000019"), gpu_series("c", 1, "1700000030")});
  const auto f = join_answers(a, "Hostname");
  ASSERT_EQ(f.nodes.size(), 4u);
  // a: the stale GPU is stale beside fresh ones, and the node has the newest.
  EXPECT_EQ(seconds_of(f.nodes[0].observed), 1700000010);
  EXPECT_EQ(seconds_of(f.nodes[0].gpus[1].observed), 1700000010);
  EXPECT_EQ(seconds_of(f.nodes[0].gpus[2].observed), 1700000000);
  EXPECT_EQ(seconds_of(f.nodes[1].observed), 1700000020);
  EXPECT_EQ(seconds_of(f.nodes[1].gpus[1].observed), 1700000019);
  EXPECT_FALSE(f.nodes[1].gpus[2].observed);  // not in the per-GPU answer
  EXPECT_EQ(seconds_of(f.nodes[2].observed), 1700000030);
  EXPECT_FALSE(f.nodes[2].gpus[0].observed);
  // d was undecided and the per-GPU answer did not name it: no time, never a guess.
  EXPECT_FALSE(f.nodes[3].observed);
  EXPECT_FALSE(f.nodes[3].gpus[0].observed);
}

TEST(PrometheusSampleTime, SecondQueryNamesTheUndecidedNodesAsLiterals) {
  EXPECT_EQ(gpu_sample_time_query("Hostname", {"gpu-1", "a.b"}),
            R"(max by (Hostname, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu\\-1|a\\.b"})))");
  // A quote and a backslash: RE2's escape, then the string's.
  EXPECT_EQ(gpu_sample_time_query("node", {R"(x"y\z w)"}),
            R"(max by (node, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL{node=~"x\\\"y\\\\z w"})))");
  // Too many names, or a name that is not printable ASCII: every node's times.
  const std::string all = "max by (Hostname, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL))";
  EXPECT_EQ(gpu_sample_time_query("Hostname", std::vector<std::string>(kMaxNamedNodes + 1, "n")), all);
  EXPECT_EQ(gpu_sample_time_query("Hostname", {"ok", "tab\there"}), all);
  EXPECT_EQ(gpu_sample_time_query("Hostname", {"n\xc3\xa9"}), all);
  EXPECT_NE(gpu_sample_time_query("Hostname", std::vector<std::string>(kMaxNamedNodes, "n")), all);
}

}  // namespace
}  // namespace gf::cluster
