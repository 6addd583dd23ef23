#include "cluster/manifest.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "cluster/yaml_text.hpp"

namespace gf::cluster {
namespace {

using ::testing::HasSubstr;

PlaceOptions on_node(std::string node = "gpu-node-1") {
  PlaceOptions o;
  o.node = std::move(node);
  return o;
}

std::string place_error(std::string_view text, const PlaceOptions& o = on_node()) {
  auto r = place_manifest(text, o);
  EXPECT_FALSE(r) << "expected an error, got:\n" << (r ? r->output : "");
  return r ? "" : r.error().message;
}

constexpr std::string_view kPod = R"(apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    image: x
)";

TEST(PlaceErrors, TextThatIsNotYamlNamesTheLine) {
  EXPECT_THAT(place_error("apiVersion: v1\nkind: [Pod\n"), HasSubstr("not YAML: line 3"));
}

TEST(PlaceErrors, BrokenJsonIsReportedAsJson) {
  EXPECT_THAT(place_error("{\"apiVersion\": \"v1\", \"kind\": }"), HasSubstr("not JSON"));
}

// Found by fuzz_manifest: a number beyond a double is nlohmann's out_of_range, not its parse_error.
TEST(PlaceErrors, AJsonNumberBeyondADoubleIsAnErrorNotACrash) {
  EXPECT_THAT(place_error("{\"apiVersion\": 94e111111, \"kind\": \"Pod\"}"), HasSubstr("not JSON"));
}

TEST(PlaceErrors, ADocumentThatIsNotAMappingNamesItsIndex) {
  const auto msg = place_error(std::string(kPod) + "---\n- a\n- b\n");
  EXPECT_THAT(msg, HasSubstr("document 2"));
  EXPECT_THAT(msg, HasSubstr("expected a mapping"));
}

TEST(PlaceErrors, ADeploymentWithoutPodTemplateNamesThePath) {
  const auto msg = place_error("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n");
  EXPECT_THAT(msg, HasSubstr("document 1 (\"Deployment\" \"d\")"));
  EXPECT_THAT(msg, HasSubstr("spec.template: missing"));
}

TEST(PlaceErrors, NegativeGpuCountNamesThePath) {
  const auto msg = place_error(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {limits: {nvidia.com/gpu: -2}}
)");
  EXPECT_THAT(msg, HasSubstr("spec.containers[0].resources.limits.nvidia.com/gpu"));
  EXPECT_THAT(msg, HasSubstr("negative"));
}

TEST(PlaceErrors, FractionalGpuCountIsRefused) {
  EXPECT_THAT(place_error("kind: Pod\napiVersion: v1\nspec: {containers: [{name: c, resources: {requests: "
                          "{amd.com/gpu: '1.5'}}}]}\n"),
              HasSubstr("expected a whole number of GPUs"));
}

TEST(PlaceErrors, ParallelFlagWithoutValueOrWithABadOne) {
  EXPECT_THAT(place_error("kind: Pod\napiVersion: v1\nspec: {containers: [{name: c, args: [--tp-size]}]}\n"),
              HasSubstr("spec.containers[0].args[0]: \"--tp-size\" has no value"));
  EXPECT_THAT(place_error("kind: Pod\napiVersion: v1\nspec: {containers: [{name: c, args: [--tp=0]}]}\n"),
              HasSubstr("parameter 'tp'"));
}

TEST(PlaceErrors, EmptyInputAndBadNodeName) {
  EXPECT_THAT(place_error("# nothing here\n"), HasSubstr("no document"));
  EXPECT_THAT(place_error(kPod, on_node("Bad Node\x1b")), HasSubstr("\\u001b"));
}

TEST(PlaceErrors, GpusOptionOfZeroIsRefused) {
  PlaceOptions o = on_node();
  o.gpus = 0;
  EXPECT_THAT(place_error(kPod, o), HasSubstr("--gpus 0"));
}

TEST(PlaceErrors, ControlCharactersInMessagesAreEscaped) {
  const auto msg = place_error("apiVersion: v1\nkind: \"Pod\"\nmetadata: {name: \"evil\\e[31m\"}\nspec: {}\n");
  EXPECT_THAT(msg, HasSubstr("\\u001b[31m"));
  EXPECT_EQ(msg.find('\x1b'), std::string::npos);
}

TEST(Place, OtherKindsAndOtherGroupsPassThroughUntouched) {
  const std::string text =
      "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: k}\nspec: {predictor: {}}\n"
      "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
  auto r = place_manifest(text, on_node());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, text);
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_FALSE(r->documents[0].placeable);
  EXPECT_THAT(r->documents[0].notes.at(0), HasSubstr("not the one gpufleet places (ome.io)"));
  EXPECT_FALSE(r->documents[1].placeable);
  EXPECT_EQ(r->documents[1].gpu_source, GpuSource::None);
}

TEST(Place, MultiNodeEnginesAreNotPinned) {
  const std::string text = R"(apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: big}
spec:
  engine:
    leader: {runner: {resources: {limits: {nvidia.com/gpu: 8}}}}
    worker: {size: 1, runner: {resources: {limits: {nvidia.com/gpu: 8}}}}
)";
  auto r = place_manifest(text, on_node());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->output, text);
  EXPECT_FALSE(r->documents.at(0).placeable);
  EXPECT_THAT(r->documents[0].notes.at(0), HasSubstr("multi-node engine"));
}

TEST(Place, GpusOptionWinsAndAMismatchIsReported) {
  PlaceOptions o = on_node();
  o.gpus = 2;
  auto r = place_manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources: {limits: {nvidia.com/gpu: 4}}
)",
                          o);
  ASSERT_TRUE(r) << r.error().message;
  const auto& d = r->documents.at(0);
  EXPECT_EQ(d.gpus, 2u);
  EXPECT_EQ(d.gpu_source, GpuSource::Option);
  ASSERT_FALSE(d.notes.empty());
  EXPECT_THAT(d.notes[0], HasSubstr("asks for 4 GPUs"));
  // The manifest's own count is not rewritten.
  EXPECT_THAT(r->output, HasSubstr("nvidia.com/gpu: 4"));
}

TEST(Place, RequestWithoutLimitGetsTheLimit) {
  auto r = place_manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      requests:
        nvidia.com/gpu: 2
)",
                          on_node());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->documents.at(0).gpu_source, GpuSource::Requests);
  const auto back = YAML::Load(r->output);
  EXPECT_EQ(back["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 2);
}

TEST(Place, GpuResourcesAreTheNamesTheManifestAsksFor) {
  // Two documents: an NVIDIA deployment and an AMD pod (a request without a limit counts as well).
  auto r = place_manifest(R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: nv}
spec:
  template:
    spec:
      containers:
      - name: c
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Pod
metadata: {name: amd}
spec:
  containers:
  - name: c
    resources: {requests: {amd.com/gpu: 2}}
)",
                          PlaceOptions{});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->documents.at(0).gpu_resources, std::vector<std::string>{"nvidia.com/gpu"});
  EXPECT_EQ(r->documents.at(1).gpu_resources, std::vector<std::string>{"amd.com/gpu"});
  EXPECT_EQ(r->gpu_resources(), (std::vector<std::string>{"nvidia.com/gpu", "amd.com/gpu"}));
  // The request without a limit gets its limit under its own name, whatever the option says.
  auto opt = on_node();
  opt.gpu_resource = "nvidia.com/gpu";
  r = place_manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: amd}
spec:
  containers:
  - name: c
    resources: {requests: {amd.com/gpu: 2}}
)",
                     opt);
  ASSERT_TRUE(r) << r.error().message;
  const auto back = YAML::Load(r->output);
  EXPECT_EQ(back["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"].as<int>(), 2);
  EXPECT_FALSE(back["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]);
  // No GPU named anywhere: any node.
  r = place_manifest("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n",
                     PlaceOptions{});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->gpu_resources().empty());
}

TEST(Place, ExistingPinToAnotherNodeIsReported) {
  auto r = place_manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: kubernetes.io/hostname, operator: In, values: [other-node]}
  containers:
  - {name: c, resources: {limits: {nvidia.com/gpu: 1}}}
)",
                          on_node());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_FALSE(r->documents.at(0).notes.empty());
  EXPECT_THAT(r->documents[0].notes[0], HasSubstr("can no longer match"));
}

TEST(Place, ANumericNodeNameStaysAString) {
  auto r = place_manifest(kPod, on_node("1234"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_THAT(r->output, HasSubstr("- \"1234\""));
}

TEST(Place, AnchorsAreWrittenOutInFull) {
  auto r = place_manifest(R"(apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: a
    env: &common
    - {name: X, value: "1"}
  - name: b
    env: *common
)",
                          on_node());
  ASSERT_TRUE(r) << r.error().message;
  const auto back = YAML::Load(r->output);
  EXPECT_EQ(back["spec"]["containers"][1]["env"][0]["value"].Tag(), "!");
  EXPECT_EQ(back["spec"]["containers"][1]["env"][0]["value"].as<std::string>(), "1");
}

TEST(Place, AliasBombIsAnErrorNotAHang) {
  std::string text =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  x0: &a0 [1, 1, 1, 1, 1, 1, "
      "1, 1]\n";
  for (int i = 1; i < 9; ++i) {
    text += "  x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 8; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  EXPECT_THAT(place_error(text), HasSubstr("more than"));
}

TEST(SplitYaml, MarkersStartAndEndDocuments) {
  const auto chunks = split_yaml_documents("# head\na: 1\n--- # c\nb: 2\n...\nc: 3\n---\n");
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].text, "# head\na: 1\n");
  EXPECT_EQ(chunks[0].prefix, "# head\n");
  EXPECT_EQ(chunks[1].text, "--- # c\nb: 2\n...\n");
  EXPECT_EQ(chunks[1].prefix, "--- # c\n");
  EXPECT_TRUE(chunks[1].ends_document);
  EXPECT_FALSE(chunks[0].ends_document);
  EXPECT_EQ(chunks[2].text, "c: 3\n");
  EXPECT_EQ(chunks[3].text, "---\n");
}

TEST(Place, ADocumentAfterAnEndMarkerStaysItsOwn) {
  const std::string text = std::string(kPod) + "...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
  auto r = place_manifest(text, on_node());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->documents.size(), 2u);
  EXPECT_TRUE(r->documents[0].changed);
  EXPECT_EQ(YAML::LoadAll(r->output).size(), 2u);
}

TEST(EmitYaml, QuotedScalarsStayStringsAndPlainOnesStayPlain) {
  const auto doc = YAML::Load("a: \"4\"\nb: 4\nc: 'yes'\nd: yes\ne: |\n  x\n  y\nf: [1, \"2\"]\ng:\n");
  auto text = emit_yaml_document(doc);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text, "a: \"4\"\nb: 4\nc: \"yes\"\nd: yes\ne: |\n  x\n  y\nf: [1, \"2\"]\ng: null\n");
}

TEST(ApplyRequest, PathsPerKind) {
  DocumentPlacement d;
  d.api_version = "apps/v1";
  d.kind = "Deployment";
  d.name = "web";
  d.namespace_name = "ns";
  d.text = "kind: Deployment\n";
  auto r = apply_request(d, "default");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->method, "PATCH");
  EXPECT_EQ(r->path, "/apis/apps/v1/namespaces/ns/deployments/web?fieldManager=gpufleet");
  EXPECT_EQ(r->content_type, "application/apply-patch+yaml");
  EXPECT_EQ(r->body, d.text);

  d.api_version = "v1";
  d.kind = "Pod";
  d.namespace_name.clear();
  r = apply_request(d, "team-a", "gpufleet", true);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->path, "/api/v1/namespaces/team-a/pods/web?fieldManager=gpufleet&force=true");

  d.api_version = "ome.io/v1beta1";
  d.kind = "InferenceService";
  r = apply_request(d, "");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->path, "/apis/ome.io/v1beta1/namespaces/default/inferenceservices/web?fieldManager=gpufleet");
}

TEST(ApplyRequest, RefusesWhatCouldBendThePath) {
  DocumentPlacement d;
  d.api_version = "batch/v1";
  d.kind = "Job";
  d.name = "../../secrets/x";
  EXPECT_FALSE(apply_request(d, "default"));
  d.name = "ok";
  EXPECT_FALSE(apply_request(d, "a/b"));
  EXPECT_FALSE(apply_request(d, "default", "gpu fleet"));
  d.api_version = "apps/v1";  // a Job under the wrong group
  EXPECT_FALSE(apply_request(d, "default"));
  d.api_version = "v1";
  d.kind = "ConfigMap";
  EXPECT_FALSE(apply_request(d, "default"));
  d.name.clear();
  d.kind = "Pod";
  EXPECT_FALSE(apply_request(d, "default"));  // generateName only: server-side apply needs a name
}

}  // namespace
}  // namespace gf::cluster
