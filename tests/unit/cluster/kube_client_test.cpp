// KubeClient against the stand-in API server (tests/fakes/kube_standin.hpp): pagination, the pod
// filter, the GPU sums, every named failure, and raw requests (server-side apply).
#include "cluster/kube_client.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fakes/kube_standin.hpp"
#include "support/files.hpp"

#include "gf_test_paths.hpp"

namespace gf::cluster {
namespace {

using fakes::KubeStandin;
using fakes::KubeStandinConfig;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string fixture_text() {
  auto text = gf::test::slurp(std::string(GF_FIXTURES_DIR) + "/kube/cluster.json");
  if (text.empty()) throw std::runtime_error("cannot read the kube fixture");
  return text;
}

KubeConfig config_for(const std::string& server, const std::string& token = "s3cret") {
  KubeConfig c;
  c.server = server;
  c.namespace_ = "default";
  c.bearer_token = token;
  c.source = "/test/kubeconfig, context t";
  return c;
}

KubeStandinConfig cluster(bool honour_selector = true) {
  KubeStandinConfig c;
  c.fixture_json = fixture_text();
  c.token = "s3cret";
  c.honour_field_selector = honour_selector;
  return c;
}

std::map<std::string, core::KubeNode> by_name(const std::vector<core::KubeNode>& nodes) {
  std::map<std::string, core::KubeNode> out;
  for (const auto& n : nodes) out.emplace(n.name, n);
  return out;
}

void expect_fixture_sums(const std::vector<core::KubeNode>& list) {
  ASSERT_EQ(list.size(), 5u);
  const auto nodes = by_name(list);
  EXPECT_EQ(nodes.at("gpu-a").gpu_requested, 6u);
  EXPECT_EQ(nodes.at("gpu-a").gpu_allocatable - nodes.at("gpu-a").gpu_requested, 2u);  // free
  EXPECT_EQ(nodes.at("gpu-b").gpu_requested, 1u);
  EXPECT_TRUE(nodes.at("gpu-b").unschedulable);
  EXPECT_EQ(nodes.at("gpu-c").gpu_requested, 1u);
  EXPECT_FALSE(nodes.at("gpu-c").ready);
  EXPECT_EQ(nodes.at("cpu-1").gpu_capacity, 0u);
  EXPECT_EQ(nodes.at("cpu-1").gpu_resource, "");
  EXPECT_EQ(nodes.at("gpu-d").gpu_requested, 3u);
  EXPECT_EQ(nodes.at("gpu-d").gpu_allocatable, 7u);
}

TEST(KubeClient, GpuNodesPagesThroughNodesAndPods) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()), KubeOptions{std::chrono::milliseconds(5000), 2});
  auto nodes = client.gpu_nodes();
  ASSERT_TRUE(nodes) << nodes.error().message;
  expect_fixture_sums(*nodes);

  // 5 nodes in pages of 2: 3 requests; 9 live pods (of 11) in pages of 2: 5 requests.
  EXPECT_EQ(server.count("GET", "/api/v1/nodes"), 3u);
  EXPECT_EQ(server.count("GET", "/api/v1/pods"), 5u);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 8u);
  EXPECT_EQ(reqs[0].query.at("limit"), "2");
  EXPECT_EQ(reqs[0].query.count("continue"), 0u);
  EXPECT_EQ(reqs[1].query.at("continue"), "NodeList:2");
  EXPECT_EQ(reqs[2].query.at("continue"), "NodeList:4");
  for (const auto& r : reqs) {
    EXPECT_EQ(r.authorization, "Bearer s3cret");
    if (r.path == "/api/v1/pods") {
      EXPECT_EQ(r.query.at("fieldSelector"), "status.phase!=Succeeded,status.phase!=Failed");
    }
  }
}

TEST(KubeClient, FiltersFinishedPodsWhenTheServerIgnoresTheSelector) {
  KubeStandin server(cluster(/*honour_selector=*/false));
  KubeClient client(config_for(server.url()), KubeOptions{std::chrono::milliseconds(5000), 2});
  auto nodes = client.gpu_nodes();
  ASSERT_TRUE(nodes) << nodes.error().message;
  expect_fixture_sums(*nodes);
  EXPECT_EQ(server.count("GET", "/api/v1/pods"), 6u);  // all 11 pods came back
}

TEST(KubeClient, OnePageWhenItAllFits) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()));
  auto nodes = client.gpu_nodes();
  ASSERT_TRUE(nodes) << nodes.error().message;
  expect_fixture_sums(*nodes);
  EXPECT_EQ(server.count("GET", "/api/v1/nodes"), 1u);
  EXPECT_EQ(server.requests()[0].query.at("limit"), "500");
}

TEST(KubeClient, UnauthorizedNamesTheCredentialsSource) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url(), "wrong"));
  auto nodes = client.gpu_nodes();
  ASSERT_FALSE(nodes);
  EXPECT_THAT(nodes.error().message,
              StartsWith("the API server at " + server.url() +
                         " refused the credentials (401 Unauthorized) from /test/kubeconfig, context t"));
  EXPECT_THAT(nodes.error().message, HasSubstr("bearer token"));
}

TEST(KubeClient, ForbiddenNamesTheMissingPermission) {
  auto cfg = cluster();
  cfg.forbid_pods = true;
  KubeStandin server(cfg);
  KubeClient client(config_for(server.url()));
  auto nodes = client.gpu_nodes();
  ASSERT_FALSE(nodes);
  const auto& m = nodes.error().message;
  EXPECT_THAT(m, HasSubstr("403 Forbidden"));
  EXPECT_THAT(m, HasSubstr("cannot list resource \"pods\" in API group \"\" at the cluster scope"));
  EXPECT_THAT(m, HasSubstr("RBAC permission to list pods in all namespaces"));
}

TEST(KubeClient, ConnectionRefusedIsUnreachable) {
  std::string url;
  {
    KubeStandin gone;
    url = gone.url();
  }  // closed: nothing listens on that port now
  KubeClient client(config_for(url));
  auto nodes = client.gpu_nodes();
  ASSERT_FALSE(nodes);
  EXPECT_THAT(nodes.error().message, StartsWith("cannot reach the API server at " + url));
}

TEST(KubeClient, ServerThatNeverAnswersTimesOut) {
  KubeStandinConfig cfg;
  cfg.never_answer = true;
  KubeStandin server(cfg);
  KubeClient client(config_for(server.url()), KubeOptions{std::chrono::milliseconds(300), 500});
  auto nodes = client.gpu_nodes();
  ASSERT_FALSE(nodes);
  EXPECT_THAT(nodes.error().message, HasSubstr("did not answer GET /api/v1/nodes?limit=500 within 300 ms"));
  EXPECT_EQ(server.count("GET", "/api/v1/nodes"), 1u);  // the request did arrive
}

TEST(KubeClient, HttpsAgainstAPlainServerIsATlsError) {
  KubeStandin server(cluster());
  const std::string https = "https://127.0.0.1:" + std::to_string(server.port());
  KubeClient client(config_for(https));
  auto nodes = client.gpu_nodes();
  ASSERT_FALSE(nodes);
  EXPECT_THAT(nodes.error().message, StartsWith("TLS with the API server at " + https + " failed"));
}

TEST(KubeClient, MalformedAndOversizedAnswersAreNamed) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()));
  server.set_canned_answer("{\"kind\": \"NodeList\", \"items\": [");
  auto malformed = client.gpu_nodes();
  ASSERT_FALSE(malformed);
  EXPECT_THAT(malformed.error().message, HasSubstr("sent a malformed NodeList for GET /api/v1/nodes?limit=500"));

  server.set_canned_answer(R"({"kind": "Status", "items": []})");
  auto wrong_kind = client.gpu_nodes();
  ASSERT_FALSE(wrong_kind);
  EXPECT_THAT(wrong_kind.error().message, HasSubstr("expected a NodeList, got kind Status"));

  KubeClient small(config_for(server.url()), KubeOptions{std::chrono::milliseconds(5000), 500, 1024});
  server.set_canned_answer(R"({"kind": "NodeList", "items": [], "pad": ")" + std::string(4096, 'x') + "\"}");
  auto big = small.gpu_nodes();
  ASSERT_FALSE(big);
  EXPECT_THAT(big.error().message, HasSubstr("sent more than 1024 bytes for GET /api/v1/nodes"));
}

TEST(KubeClient, RequestReturnsErrorStatusesAsResponses) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()));
  auto missing = client.request("GET", "/api/v1/namespaces/ml/configmaps/nope");
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_EQ(missing->status, 404);
  EXPECT_THAT(missing->content_type, HasSubstr("application/json"));
  EXPECT_EQ(json::parse(missing->body)["reason"], "NotFound");
  EXPECT_EQ(describe_status_error(client.config(), 404, "GET", "/api/v1/namespaces/ml/configmaps/nope", missing->body),
            "the API server at " + server.url() +
                " answered 404 Not Found to GET /api/v1/namespaces/ml/configmaps/nope: configmaps \"nope\" not found");
  auto relative = client.request("GET", "api/v1/nodes");
  ASSERT_FALSE(relative);
  EXPECT_THAT(relative.error().message, HasSubstr("must start with /"));
}

TEST(KubeClient, ServerSideApplyCreatesThenUpdates) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()));
  const std::string path = "/apis/batch/v1/namespaces/ml/jobs/train-1";
  const std::string yaml =
      "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train-1\n  namespace: ml\n"
      "spec:\n  template:\n    spec:\n      nodeName: gpu-a\n      containers:\n      - name: main\n"
      "        image: \"pytorch:24.01\"\n        resources: {limits: {nvidia.com/gpu: 2}}\n";
  auto created = client.request("PATCH", path + "?fieldManager=gpufleet", yaml, "application/apply-patch+yaml");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->status, 201) << created->body;
  auto updated = client.request("PATCH", path + "?fieldManager=gpufleet", yaml, "application/apply-patch+yaml");
  ASSERT_TRUE(updated);
  EXPECT_EQ(updated->status, 200);
  const auto stored = server.object(path);
  ASSERT_TRUE(stored);
  const auto obj = json::parse(*stored);
  EXPECT_EQ(obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], 2);
  EXPECT_EQ(obj["metadata"]["managedFields"][0]["manager"], "gpufleet");
  EXPECT_EQ(json::parse(created->body)["metadata"]["uid"], obj["metadata"]["uid"]);  // same object
  const auto reqs = server.requests();
  EXPECT_EQ(reqs.back().content_type, "application/apply-patch+yaml");
  EXPECT_EQ(reqs.back().query.at("fieldManager"), "gpufleet");

  auto got = client.request("GET", path);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(json::parse(got->body)["kind"], "Job");

  auto no_manager = client.request("PATCH", path, yaml, "application/apply-patch+yaml");
  ASSERT_TRUE(no_manager);
  EXPECT_EQ(no_manager->status, 400);
  auto wrong_type = client.request("PATCH", path + "?fieldManager=gpufleet", yaml, "application/json");
  ASSERT_TRUE(wrong_type);
  EXPECT_EQ(wrong_type->status, 415);
  auto wrong_name = client.request("PATCH", "/apis/batch/v1/namespaces/ml/jobs/other?fieldManager=gpufleet", yaml,
                                   "application/apply-patch+yaml");
  ASSERT_TRUE(wrong_name);
  EXPECT_EQ(wrong_name->status, 400);
}

TEST(KubeClient, PostCreatesOnceThenConflicts) {
  KubeStandin server(cluster());
  KubeClient client(config_for(server.url()));
  const std::string body =
      R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}})";
  auto first = client.request("POST", "/api/v1/namespaces/ml/configmaps", body);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 201);
  auto second = client.request("POST", "/api/v1/namespaces/ml/configmaps", body);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 409);
  EXPECT_EQ(json::parse(second->body)["reason"], "AlreadyExists");
  EXPECT_TRUE(server.object("/api/v1/namespaces/ml/configmaps/cm"));
}

}  // namespace
}  // namespace gf::cluster
