// Golden tests of manifest placement: each tests/fixtures/manifests/NAME.in.* placed on node
// "gpu-node-1" must give NAME.out.* byte for byte. After a deliberate change of the output, run the
// test with GF_UPDATE_GOLDEN=1 to rewrite the .out files, and review their diff before committing.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "cluster/manifest.hpp"

#include "gf_test_paths.hpp"

namespace gf::cluster {
namespace {

const std::filesystem::path kDir = std::filesystem::path(GF_FIXTURES_DIR) / "manifests";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Golden {
  std::string name;  // NAME.in.EXT -> NAME.out.EXT
  std::string ext;
  std::optional<unsigned> gpus_option;
  unsigned gpus_on_node;
  GpuSource source;
};

// Failure messages name the fixture rather than dumping the struct's bytes.
void PrintTo(const Golden& g, std::ostream* os) { *os << g.name << ".in." << g.ext; }

class PlaceGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(PlaceGolden, MatchesExpectedOutput) {
  const auto& g = GetParam();
  const auto input = read_file(kDir / (g.name + ".in." + g.ext));
  PlaceOptions opt;
  opt.node = "gpu-node-1";
  opt.gpus = g.gpus_option;
  auto r = place_manifest(input, opt);
  ASSERT_TRUE(r) << r.error().message;
  const auto out_path = kDir / (g.name + ".out." + g.ext);
  if (std::getenv("GF_UPDATE_GOLDEN")) {
    std::ofstream(out_path, std::ios::binary) << r->output;
  }
  EXPECT_EQ(r->output, read_file(out_path)) << "placed output differs from " << out_path;
  EXPECT_EQ(r->gpus_on_node(), g.gpus_on_node);
  bool found_source = false;
  for (const auto& d : r->documents) found_source = found_source || (d.placeable && d.gpu_source == g.source);
  EXPECT_TRUE(found_source) << "no placed document took its count from " << gpu_source_name(g.source);

  // Placing the output again on the same node changes nothing: the pin is not added twice.
  auto again = place_manifest(r->output, opt);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->changed());
  EXPECT_EQ(again->output, r->output);
}

TEST_P(PlaceGolden, WithoutNodeTheInputPassesThroughByteForByte) {
  const auto& g = GetParam();
  const auto input = read_file(kDir / (g.name + ".in." + g.ext));
  PlaceOptions opt;
  opt.gpus = g.gpus_option;
  auto r = place_manifest(input, opt);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->changed());
  EXPECT_EQ(r->output, input);
  // The need is known without a node: that is what node selection is given.
  EXPECT_EQ(r->gpus_on_node(), g.gpus_on_node);
}

INSTANTIATE_TEST_SUITE_P(
    Manifests, PlaceGolden,
    ::testing::Values(Golden{"deployment", "yaml", std::nullopt, 2, GpuSource::Limits},
                      Golden{"statefulset", "yaml", std::nullopt, 4, GpuSource::Parallel},
                      Golden{"job", "yaml", std::nullopt, 4, GpuSource::Parallel},
                      Golden{"pod", "yaml", 3u, 3, GpuSource::Option},
                      Golden{"pod_default", "yaml", std::nullopt, 1, GpuSource::Default},
                      Golden{"isvc", "yaml", std::nullopt, 4, GpuSource::Limits},
                      Golden{"isvc_decoder", "yaml", std::nullopt, 6, GpuSource::Parallel},
                      Golden{"isvc_runtime_resources", "yaml", std::nullopt, 2, GpuSource::Parallel},
                      Golden{"isvc_no_engine", "yaml", std::nullopt, 1, GpuSource::Default},
                      Golden{"affinity", "yaml", std::nullopt, 1, GpuSource::Limits},
                      Golden{"multi", "yaml", std::nullopt, 4, GpuSource::Parallel},
                      Golden{"deployment", "json", std::nullopt, 4, GpuSource::Parallel},
                      Golden{"list", "json", std::nullopt, 2, GpuSource::Limits}),
    [](const ::testing::TestParamInfo<Golden>& info) { return info.param.name + "_" + info.param.ext; });

// A JSON List (`kubectl get -o json`): each item is a document of its own, which --apply sends alone.
TEST(PlaceList, EachItemIsADocument) {
  const auto input = read_file(kDir / "list.in.json");
  PlaceOptions opt;
  opt.node = "gpu-node-1";
  auto r = place_manifest(input, opt);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_EQ(r->documents[0].kind, "Deployment");
  EXPECT_TRUE(r->documents[0].placeable);
  EXPECT_TRUE(r->documents[0].changed);
  EXPECT_EQ(r->documents[1].kind, "Service");
  EXPECT_FALSE(r->documents[1].changed);
  // The item's own text, pinned, is what --apply sends for it.
  const auto item = nlohmann::json::parse(r->documents[0].text);
  EXPECT_EQ(item["kind"], "Deployment");
  EXPECT_EQ(
      item["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
          ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
      "gpu-node-1");
  auto rq = apply_request(r->documents[0], "default");
  ASSERT_TRUE(rq) << rq.error().message;
  EXPECT_EQ(rq->path, "/apis/apps/v1/namespaces/inference/deployments/vllm-qwen?fieldManager=gpufleet");
  // An item that is not an object names its place in the List.
  auto bad = place_manifest(R"({"apiVersion": "v1", "kind": "List", "items": [1]})", opt);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("List items[0]"), std::string::npos) << bad.error().message;
  // An empty List (kubectl's answer when nothing matches) has nothing to pin and passes through as is.
  const std::string empty = "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n";
  auto none = place_manifest(empty, opt);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->documents.empty());
  EXPECT_FALSE(none->changed());
  EXPECT_EQ(none->output, empty);
}

// Vendors: an AMD InferenceService keeps its amd.com/gpu and says so (node selection takes only AMD
// nodes for it); a pod that names no GPU, pinned to an AMD node, gets an amd.com/gpu limit.
struct VendorGolden {
  std::string in, out;
  std::string node_resource;                    // PlaceOptions::gpu_resource: the chosen node's
  std::vector<std::string> manifest_resources;  // PlaceResult::gpu_resources()
  unsigned gpus_on_node;
};
void PrintTo(const VendorGolden& g, std::ostream* os) { *os << g.out; }

class PlaceVendorGolden : public ::testing::TestWithParam<VendorGolden> {};

TEST_P(PlaceVendorGolden, MatchesExpectedOutput) {
  const auto& g = GetParam();
  const auto input = read_file(kDir / g.in);
  PlaceOptions opt;
  auto described = place_manifest(input, opt);  // the first pass of `cluster place`: no node yet
  ASSERT_TRUE(described) << described.error().message;
  EXPECT_EQ(described->gpu_resources(), g.manifest_resources);
  EXPECT_EQ(described->gpus_on_node(), g.gpus_on_node);
  opt.node = "gpu-node-1";
  opt.gpu_resource = g.node_resource;
  auto r = place_manifest(input, opt);
  ASSERT_TRUE(r) << r.error().message;
  const auto out_path = kDir / g.out;
  if (std::getenv("GF_UPDATE_GOLDEN")) std::ofstream(out_path, std::ios::binary) << r->output;
  EXPECT_EQ(r->output, read_file(out_path)) << "placed output differs from " << out_path;
  EXPECT_EQ(r->output.find("nvidia.com/gpu"), std::string::npos) << r->output;
}

INSTANTIATE_TEST_SUITE_P(
    Vendors, PlaceVendorGolden,
    ::testing::Values(VendorGolden{"isvc_amd.in.yaml", "isvc_amd.out.yaml", "amd.com/gpu", {"amd.com/gpu"}, 2},
                      VendorGolden{"rocm_pod.in.yaml", "rocm_pod.out.yaml", "amd.com/gpu", {}, 1}),
    [](const ::testing::TestParamInfo<VendorGolden>& info) {
      return info.param.in.substr(0, info.param.in.find('.'));
    });

}  // namespace
}  // namespace gf::cluster
