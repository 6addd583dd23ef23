// The pure parts of the Kubernetes client: quantities, NodeList and PodList parsing, and the sum of
// GPU requests per node, on the fixture tests/fixtures/kube/cluster.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster/kube_client.hpp"
#include "support/files.hpp"

#include "gf_test_paths.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

json fixture() {
  auto j = json::parse(gf::test::slurp(std::string(GF_FIXTURES_DIR) + "/kube/cluster.json"), nullptr, false);
  if (!j.is_object()) throw std::runtime_error("cannot read the kube fixture");
  return j;
}

const core::KubeNode& by_name(const std::vector<core::KubeNode>& nodes, const std::string& name) {
  for (const auto& n : nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node " + name);
}

TEST(Quantity, WholeCountsFromEveryNotation) {
  EXPECT_EQ(*parse_quantity_count("8"), 8u);
  EXPECT_EQ(*parse_quantity_count("0"), 0u);
  EXPECT_EQ(*parse_quantity_count("+3"), 3u);
  EXPECT_EQ(*parse_quantity_count("1k"), 1000u);
  EXPECT_EQ(*parse_quantity_count("2Ki"), 2048u);
  EXPECT_EQ(*parse_quantity_count("1e3"), 1000u);
  EXPECT_EQ(*parse_quantity_count("1E2"), 100u);
  EXPECT_EQ(*parse_quantity_count("1000m"), 1u);
  EXPECT_EQ(*parse_quantity_count("1500m"), 2u);  // rounds up, as Kubernetes' Value()
  EXPECT_EQ(*parse_quantity_count("0.5"), 1u);
  EXPECT_EQ(*parse_quantity_count("0.05"), 1u);
  EXPECT_EQ(*parse_quantity_count("2.5k"), 2500u);
  EXPECT_EQ(*parse_quantity_count("1n"), 1u);
  EXPECT_EQ(*parse_quantity_count("007"), 7u);
}

TEST(Quantity, RejectsMalformedNegativeAndHuge) {
  for (const char* bad : {"", "abc", "1x", "1.2.3", ".", "1e", "1e+", "Ki", "1 k", "1KI"}) {
    auto q = parse_quantity_count(bad);
    EXPECT_FALSE(q) << bad;
    if (!q) {
      EXPECT_THAT(q.error().message, HasSubstr("not a quantity")) << bad;
    }
  }
  auto neg = parse_quantity_count("-1");
  ASSERT_FALSE(neg);
  EXPECT_THAT(neg.error().message, HasSubstr("negative"));
  for (const char* huge : {"1E", "9007199254740993", "1e300", "99999999999999999999999999999999999"}) {
    auto q = parse_quantity_count(huge);
    ASSERT_FALSE(q) << huge;
    EXPECT_THAT(q.error().message, HasSubstr("too large")) << huge;
  }
  EXPECT_EQ(*parse_quantity_count("8Pi"), 9007199254740992u);  // exactly 2^53
}

TEST(NodeList, GpuCountsProductReadinessAndCordon) {
  const auto f = fixture();
  json list{
      {"kind", "NodeList"}, {"apiVersion", "v1"}, {"metadata", {{"continue", "next-page"}}}, {"items", f["nodes"]}};
  auto page = parse_node_list(list.dump());
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->continue_token, "next-page");
  ASSERT_EQ(page->nodes.size(), 5u);

  const auto& a = by_name(page->nodes, "gpu-a");
  EXPECT_EQ(a.gpu_resource, "nvidia.com/gpu");
  EXPECT_EQ(a.gpu_capacity, 8u);
  EXPECT_EQ(a.gpu_allocatable, 8u);
  EXPECT_EQ(a.gpu_requested, 0u);
  EXPECT_EQ(a.gpu_product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_TRUE(a.ready);
  EXPECT_FALSE(a.unschedulable);
  EXPECT_EQ(a.labels.at("nvidia.com/gpu.count"), "8");

  EXPECT_TRUE(by_name(page->nodes, "gpu-b").unschedulable);
  const auto& c = by_name(page->nodes, "gpu-c");
  EXPECT_EQ(c.gpu_resource, "amd.com/gpu");
  EXPECT_EQ(c.gpu_capacity, 2u);
  EXPECT_EQ(c.gpu_product, "AMD_Instinct_MI300X");
  EXPECT_FALSE(c.ready);

  const auto& cpu = by_name(page->nodes, "cpu-1");
  EXPECT_EQ(cpu.gpu_resource, "");
  EXPECT_EQ(cpu.gpu_capacity, 0u);
  EXPECT_EQ(cpu.gpu_allocatable, 0u);
  EXPECT_TRUE(cpu.ready);

  EXPECT_EQ(by_name(page->nodes, "gpu-d").gpu_allocatable, 7u);
}

TEST(NodeList, MalformedInputIsAnError) {
  EXPECT_FALSE(parse_node_list("{"));
  EXPECT_FALSE(parse_node_list("[]"));
  auto kind = parse_node_list(R"({"kind": "PodList", "items": []})");
  ASSERT_FALSE(kind);
  EXPECT_THAT(kind.error().message, HasSubstr("expected a NodeList"));
  auto items = parse_node_list(R"({"kind": "NodeList", "items": 3})");
  EXPECT_FALSE(items);
  auto quantity = parse_node_list(
      R"({"items": [{"metadata": {"name": "n"}, "status": {"capacity": {"nvidia.com/gpu": "lots"}}}]})");
  ASSERT_FALSE(quantity);
  EXPECT_THAT(quantity.error().message, HasSubstr("node n: capacity nvidia.com/gpu"));
  auto nameless = parse_node_list(R"({"items": [{"metadata": {}}]})");
  EXPECT_FALSE(nameless);
  auto empty = parse_node_list(R"({"kind": "NodeList", "items": null})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->nodes.empty());
}

TEST(PodList, EffectiveRequestsPerPod) {
  const auto f = fixture();
  auto page = parse_pod_list(json{{"kind", "PodList"}, {"items", f["pods"]}}.dump());
  ASSERT_TRUE(page) << page.error().message;
  std::map<std::string, PodGpuRequest> by;
  for (const auto& p : page->pods) by[p.name] = p;
  EXPECT_EQ(by.count("nginx"), 0u);  // no GPUs: not kept
  EXPECT_EQ(by.at("run-1").gpus.at("nvidia.com/gpu"), 2u);
  EXPECT_EQ(by.at("pend-1").gpus.at("nvidia.com/gpu"), 1u);    // limits only
  EXPECT_EQ(by.at("init-big").gpus.at("nvidia.com/gpu"), 3u);  // init 3 > containers 1 + 1
  EXPECT_EQ(by.at("sidecar").gpus.at("nvidia.com/gpu"), 3u);   // init 2 runs beside the sidecar's 1
  EXPECT_EQ(by.at("amd-job").gpus.at("amd.com/gpu"), 1u);
  EXPECT_EQ(by.at("done-1").phase, "Succeeded");
  EXPECT_EQ(by.at("unscheduled").node, "");
  EXPECT_EQ(by.at("run-1").namespace_, "train");
  EXPECT_EQ(by.at("run-1").node, "gpu-a");
}

TEST(PodList, ContainersOutweighingInitContainers) {
  auto page = parse_pod_list(R"({"items": [{"metadata": {"name": "p"}, "spec": {"nodeName": "n",
      "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}],
      "containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}},
                     {"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}}]})");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->pods.size(), 1u);
  EXPECT_EQ(page->pods[0].gpus.at("nvidia.com/gpu"), 3u);
  auto bad = parse_pod_list(R"({"items": [{"metadata": {"namespace": "x", "name": "p"},
      "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "-1"}}}]}}]})");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("pod x/p"));
}

TEST(AddPodRequests, OnlyLivePodsOnListedNodesOfTheNodesResource) {
  const auto f = fixture();
  auto nodes = parse_node_list(json{{"items", f["nodes"]}}.dump());
  auto pods = parse_pod_list(json{{"items", f["pods"]}}.dump());
  ASSERT_TRUE(nodes && pods);
  add_pod_requests(nodes->nodes, pods->pods);
  EXPECT_EQ(by_name(nodes->nodes, "gpu-a").gpu_requested, 6u);  // 2 + 1 + 3; Succeeded and Failed excluded
  EXPECT_EQ(by_name(nodes->nodes, "gpu-b").gpu_requested, 1u);
  EXPECT_EQ(by_name(nodes->nodes, "gpu-c").gpu_requested, 1u);  // the nvidia.com/gpu pod there counts nowhere
  EXPECT_EQ(by_name(nodes->nodes, "cpu-1").gpu_requested, 0u);
  EXPECT_EQ(by_name(nodes->nodes, "gpu-d").gpu_requested, 3u);
  EXPECT_FALSE(pod_holds_gpus("Succeeded"));
  EXPECT_FALSE(pod_holds_gpus("Failed"));
  EXPECT_TRUE(pod_holds_gpus("Pending"));
  EXPECT_TRUE(pod_holds_gpus("Unknown"));
}

}  // namespace
}  // namespace gf::cluster
