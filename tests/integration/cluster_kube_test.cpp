// `gpufleet cluster …` with Kubernetes as a source: the real binary against the stand-in API server
// (tests/fakes/kube_standin.*), alone and together with a real `gpufleet --backend sim serve` agent.
// The stand-in's cluster (tests/fixtures/kube/cluster.json): gpu-a 8 GPUs, 6 requested (2 free);
// gpu-b cordoned; gpu-c not Ready; cpu-1 without GPUs; gpu-d 7 GPUs, 3 requested (4 free).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "fakes/kube_standin.hpp"
#include "platform/http_client.hpp"
#include "platform/subprocess.hpp"
#include "support/agent_process.hpp"
#include "support/eventually.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using gf::platform::ProcessOutput;
using gf::test::slurp;
using nlohmann::json;

constexpr const char* kToken = "s3cret-token";
constexpr const char* kDeploymentItem = "/apis/apps/v1/namespaces/inference/deployments/vllm-llama";

std::size_t line_count(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// stderr's lines other than warnings. The stand-in API server is plain http with a token, so every
// command that reaches it says so on a warning line of its own first.
std::size_t error_line_count(const std::string& s) {
  std::size_t n = 0;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) n += line.rfind("gpufleet: warning: ", 0) != 0;
  return n;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// `gpufleet --backend sim serve` as a child process (its stdout and stderr in dir), on an ephemeral port.
class KubeAgent : public gf::test::AgentProcess {
 public:
  bool start(const fs::path& dir, const std::vector<std::string>& args) {
    std::vector<std::string> argv{"--backend",   "sim",          "serve", "--listen",
                                  "127.0.0.1:0", "--no-history", "--db",  (dir / "agent.db").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return AgentProcess::start(dir, argv);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }
  // What it printed, stdout then stderr.
  std::string output_text() const { return stdout_text() + stderr_text(); }
};

struct ClusterKube : ::testing::Test {
  gf::test::TempDir tmp;
  const fs::path dir = tmp.path();
  std::unique_ptr<gf::fakes::KubeStandin> kube;
  std::string kubeconfig;  // the stand-in, the right token
  std::string deployment = GF_FIXTURES_DIR "/manifests/deployment.in.yaml";

  void SetUp() override {
    gf::fakes::KubeStandinConfig cfg;
    cfg.fixture_json = slurp(GF_FIXTURES_DIR "/kube/cluster.json");
    ASSERT_FALSE(cfg.fixture_json.empty());
    cfg.token = kToken;
    kube = std::make_unique<gf::fakes::KubeStandin>(cfg);
    kubeconfig = write_kubeconfig("kubeconfig.yaml", kToken);
    // No real GPU stack and no kubeconfig of the machine's user is consulted.
    setenv("GPUFLEET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("GPUFLEET_NVIDIA_SMI", "/nonexistent/nvidia-smi", 1);
    setenv("GPUFLEET_SYSFS_ROOT", "/nonexistent-sysfs", 1);
    setenv("HOME", dir.c_str(), 1);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
  }
  void TearDown() override { kube.reset(); }

  std::string write_file(const std::string& name, const std::string& text) {
    return gf::test::write_file(dir / name, text);
  }
  // Two contexts: "standin" (current, namespace team-a) and "other" (namespace team-b); both reach the stand-in.
  std::string write_kubeconfig(const std::string& name, const std::string& token) {
    return write_file(
        name, "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: " + kube->url() +
                  "\nusers:\n- name: tester\n  user:\n    token: " + token +
                  "\ncontexts:\n- name: standin\n  context: {cluster: standin, user: tester, namespace: team-a}\n"
                  "- name: other\n  context: {cluster: standin, user: tester, namespace: team-b}\n"
                  "current-context: standin\n");
  }
  static ProcessOutput run(std::vector<std::string> args) {
    args.insert(args.begin(), GF_BINARY);
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{30s});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : ProcessOutput{};
  }
  static json parse(const std::string& text) {
    auto j = json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << text;
    return j;
  }
  static const json* node(const json& doc, const std::string& name) {
    for (const auto& n : doc["nodes"])
      if (n["name"] == name) return &n;
    return nullptr;
  }
};

// GET url until it answers 200 (the first fleet refresh has landed) or 20 s have passed.
std::pair<long, std::string> get_when_ready(const std::string& url) {
  gf::platform::HttpRequest rq;
  rq.url = url;
  rq.timeout = 5s;
  long status = 0;
  std::string body;
  gf::test::eventually(
      [&] {
        auto out = gf::platform::http_perform(rq);
        if (!out.ok()) return false;
        status = out.response().status;
        body = out.response().body;
        return status == 200;
      },
      20s, 50ms);
  return {status, body};
}

TEST_F(ClusterKube, NodesFromKubernetesAlone) {
  auto r = run({"cluster", "nodes", "--kubeconfig", kubeconfig, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse(r.out);
  const auto* a = node(j, "gpu-a");
  const auto* d = node(j, "gpu-d");
  ASSERT_TRUE(a && d) << r.out;
  EXPECT_EQ((*a)["allocatable_gpus"], 8);
  EXPECT_EQ((*a)["free_gpus"], 2);
  EXPECT_EQ((*d)["free_gpus"], 4);
  EXPECT_EQ((*d)["idle_gpu_count"], 4);  // no metrics: free counts as idle
  EXPECT_NE(j["sources"].dump().find("kubernetes"), std::string::npos) << j["sources"];
  EXPECT_GE(kube->count("GET", "/api/v1/nodes"), 1u);
  for (const auto& rq : kube->requests()) EXPECT_EQ(rq.authorization, std::string("Bearer ") + kToken);
}

TEST_F(ClusterKube, FreeFromKubernetesIdleFromAnAgent) {
  // Four simulated GPUs on "gpu-d": two busy, two idle.
  const auto scenario = write_file("scenario.json", R"({"driver_version": "sim-test", "gpus": [
    {"name": "Sim H100", "memory_total_mib": 81559, "load": [{"t": 0, "utilization": 95, "memory_used_mib": 70000}]},
    {"name": "Sim H100", "memory_total_mib": 81559, "load": [{"t": 0, "utilization": 90, "memory_used_mib": 60000}]},
    {"name": "Sim H100", "memory_total_mib": 81559, "load": [{"t": 0, "utilization": 0, "memory_used_mib": 500}]},
    {"name": "Sim H100", "memory_total_mib": 81559, "load": [{"t": 0, "utilization": 0, "memory_used_mib": 500}]}]})");
  KubeAgent agent;
  ASSERT_TRUE(agent.start(dir, {"--node-name", "gpu-d", "--sim-scenario", scenario})) << agent.output_text();
  auto r = run({"cluster", "nodes", "--kubeconfig", kubeconfig, "--agent", agent.url(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << agent.output_text();
  const auto j = parse(r.out);
  const auto* d = node(j, "gpu-d");
  ASSERT_TRUE(d) << r.out;
  EXPECT_EQ((*d)["free_gpus"], 4);       // Kubernetes: 7 allocatable - 3 requested
  EXPECT_EQ((*d)["idle_gpu_count"], 2);  // the agent: two GPUs below the thresholds
  EXPECT_EQ((*d)["gpus_with_metrics"], 4);
  const auto* a = node(j, "gpu-a");
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)["idle_gpu_count"], 2);  // no agent there: its 2 free GPUs count as idle

  // gpu-d has 4 free GPUs but only 2 idle: a job of 3 finds no node with enough idle GPUs …
  auto s = run({"cluster", "select", "--gpus", "3", "--kubeconfig", kubeconfig, "--agent", agent.url()});
  EXPECT_EQ(s.exit_code, 75) << s.out << s.err;
  // … unless the least-loaded fallback may pin it where enough GPUs are unrequested.
  s = run({"cluster", "select", "--gpus", "3", "--kubeconfig", kubeconfig, "--agent", agent.url(), "--fallback",
           "least-loaded", "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(parse(s.out)["node"], "gpu-d");
  agent.stop();
}

TEST_F(ClusterKube, SelectWithKubernetesOnly) {
  auto r = run({"cluster", "select", "--gpus", "3", "--kubeconfig", kubeconfig});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Selected node: gpu-d"), std::string::npos) << r.out;
  r = run({"cluster", "select", "--gpus", "5", "--kubeconfig", kubeconfig, "--json"});
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_TRUE(parse(r.out)["node"].is_null());
}

TEST_F(ClusterKube, KubernetesFromTheConfigFileAndTheDefaultKubeconfig) {
  // Relative to the config file's directory.
  fs::create_directories(dir / "conf");
  write_kubeconfig("conf/kube.yaml", kToken);
  const auto cfg = write_file("conf/fleet.json", R"({"kubeconfig": "kube.yaml", "context": "other"})");
  auto r = run({"cluster", "select", "--gpus", "3", "--config", cfg, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = parse(r.out);
  EXPECT_EQ(j["node"], "gpu-d");
  EXPECT_NE(j.dump().find("context other"), std::string::npos) << j.dump();

  // No source named at all: ~/.kube/config (HOME is the test's directory).
  write_kubeconfig(".kube/config", kToken);
  r = run({"cluster", "select", "--gpus", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Selected node: gpu-d"), std::string::npos) << r.out;

  // "kubernetes": false turns the default off, and then nothing is left: the options are listed.
  const auto off = write_file("off.json", R"({"kubernetes": false})");
  r = run({"cluster", "nodes", "--config", off});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kubeconfig"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--prometheus"), std::string::npos) << r.err;
  // A bad value names the key.
  const auto bad = write_file("bad.json", R"({"in_cluster": "yes"})");
  r = run({"cluster", "nodes", "--config", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("in_cluster"), std::string::npos) << r.err;
}

TEST_F(ClusterKube, UnauthorizedIsOneLineAndExit1) {
  const auto wrong = write_kubeconfig("wrong.yaml", "not-the-token");
  auto r = run({"cluster", "nodes", "--kubeconfig", wrong});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(error_line_count(r.err), 1u) << r.err;
  EXPECT_EQ(line_count(r.err), 2u) << r.err;  // and the warning: a token over plain http
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("wrong.yaml"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", wrong, "--apply"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(error_line_count(r.err), 1u) << r.err;
  EXPECT_EQ(occurrences(r.err, "sending a bearer token over plain http"), 1u) << r.err;  // said once
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;
  EXPECT_FALSE(kube->object(kDeploymentItem).has_value());
}

// Kubernetes is a configured source and refuses (401, 403): an agent still reports its node, but
// every node would then look Ready, uncordoned and free, so no node is chosen on those partial facts.
TEST_F(ClusterKube, AFailingKubernetesSourcePinsNothing) {
  fs::create_directories(dir / "agent");
  KubeAgent agent;
  ASSERT_TRUE(agent.start(dir / "agent", {"--node-name", "gpu-b"})) << agent.output_text();  // gpu-b is cordoned
  const auto wrong = write_kubeconfig("wrong.yaml", "not-the-token");

  // nodes: what the agent knows, and the error.
  auto r = run({"cluster", "nodes", "--kubeconfig", wrong, "--agent", agent.url(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse(r.out);
  ASSERT_NE(node(j, "gpu-b"), nullptr) << r.out;
  EXPECT_NE(j["kubernetes_error"].get<std::string>().find("401"), std::string::npos) << j["kubernetes_error"];
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;

  // select: no node, exit 1 (an error talking to a configured source, not 75), one line naming it.
  r = run({"cluster", "select", "--kubeconfig", wrong, "--agent", agent.url()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(error_line_count(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Selected node"), std::string::npos) << r.out;
  r = run({"cluster", "select", "--kubeconfig", wrong, "--agent", agent.url(), "--json", "--fallback", "least-loaded"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  j = parse(r.out);
  EXPECT_TRUE(j["node"].is_null()) << r.out;
  EXPECT_EQ(j["source_failed"], true);
  EXPECT_NE(j["reason"].get<std::string>().find("401"), std::string::npos) << j["reason"];

  // place: the manifest unchanged, and why.
  const auto original = slurp(deployment);
  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", wrong, "--agent", agent.url()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, original);
  EXPECT_NE(r.err.find("No node pinned: kubernetes: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the Kubernetes scheduler decides"), std::string::npos) << r.err;

  // 403 on the pods (RBAC without list pods): the same, naming the 403.
  gf::fakes::KubeStandinConfig cfg;
  cfg.fixture_json = slurp(GF_FIXTURES_DIR "/kube/cluster.json");
  cfg.token = kToken;
  cfg.forbid_pods = true;
  gf::fakes::KubeStandin forbidding(cfg);
  const auto forbidden =
      write_file("forbidden.yaml", "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: " +
                                       forbidding.url() + "\nusers:\n- name: u\n  user:\n    token: " + kToken +
                                       "\ncontexts:\n- name: s\n  context: {cluster: s, user: u}\n"
                                       "current-context: s\n");
  r = run({"cluster", "select", "--kubeconfig", forbidden, "--agent", agent.url()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(error_line_count(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.err;
  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", forbidden, "--agent", agent.url(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  j = parse(r.out);
  EXPECT_TRUE(j["node"].is_null());
  EXPECT_EQ(j["source_failed"], true);
  EXPECT_EQ(j["manifest"], original);

  // serve: the same sources as options; /api/v1/cluster/select answers no node and the reason.
  fs::create_directories(dir / "view");
  KubeAgent view;
  ASSERT_TRUE(view.start(dir / "view", {"--kubeconfig", forbidden, "--agent", agent.url()})) << view.output_text();
  auto [status, body] = get_when_ready(view.url() + "/api/v1/cluster/select?gpus=1");
  ASSERT_EQ(status, 200) << body << view.output_text();
  j = parse(body);
  EXPECT_TRUE(j["node"].is_null()) << body;
  EXPECT_EQ(j["source_failed"], true);
  EXPECT_NE(j["reason"].get<std::string>().find("403"), std::string::npos) << j["reason"];
  std::tie(status, body) = get_when_ready(view.url() + "/api/v1/cluster/nodes");
  ASSERT_EQ(status, 200) << body;
  EXPECT_NE(node(parse(body), "gpu-b"), nullptr) << body;
  view.stop();
  agent.stop();
}

// Vendors: an amd.com/gpu workload goes to AMD nodes only, an nvidia.com/gpu one to NVIDIA nodes, and
// one that names no GPU gets the chosen node's resource as its limit.
TEST_F(ClusterKube, PlacementFollowsTheGpuResource) {
  // amd-1 has the most free GPUs (8), nv-1 has 4.
  gf::fakes::KubeStandinConfig cfg;
  cfg.fixture_json = R"({"nodes": [
    {"metadata": {"name": "amd-1", "labels": {"kubernetes.io/hostname": "amd-1"}},
     "spec": {}, "status": {"capacity": {"amd.com/gpu": "8"}, "allocatable": {"amd.com/gpu": "8"},
                            "conditions": [{"type": "Ready", "status": "True"}]}},
    {"metadata": {"name": "nv-1", "labels": {"kubernetes.io/hostname": "nv-1"}},
     "spec": {}, "status": {"capacity": {"nvidia.com/gpu": "4"}, "allocatable": {"nvidia.com/gpu": "4"},
                            "conditions": [{"type": "Ready", "status": "True"}]}}], "pods": []})";
  cfg.token = kToken;
  kube = std::make_unique<gf::fakes::KubeStandin>(cfg);
  kubeconfig = write_kubeconfig("mixed.yaml", kToken);

  auto r = run({"cluster", "select", "--gpus", "2", "--kubeconfig", kubeconfig, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse(r.out)["node"], "amd-1");
  r = run({"cluster", "select", "--gpus", "2", "--kubeconfig", kubeconfig, "--gpu-resource", "nvidia.com/gpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Selected node: nv-1"), std::string::npos) << r.out;
  r = run({"cluster", "select", "--gpus", "5", "--kubeconfig", kubeconfig, "--gpu-resource", "nvidia.com/gpu"});
  EXPECT_EQ(r.exit_code, 75) << r.out;
  EXPECT_NE(r.err.find("amd-1: amd.com/gpu, not nvidia.com/gpu"), std::string::npos) << r.err;
  r = run({"cluster", "select", "--kubeconfig", kubeconfig, "--gpu-resource", "intel.com/gpu"});
  EXPECT_EQ(r.exit_code, 2);

  // The Deployment asks for nvidia.com/gpu: nv-1, though amd-1 has more free GPUs.
  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse(r.out);
  EXPECT_EQ(j["node"], "nv-1");
  EXPECT_EQ(j["gpu_resource"], "nvidia.com/gpu");
  // An AMD InferenceService: amd-1.
  r = run({"cluster", "place", "-f", GF_FIXTURES_DIR "/manifests/isvc_amd.in.yaml", "--kubeconfig", kubeconfig});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("- amd-1"), std::string::npos) << r.out;
  // A pod naming no GPU goes to the best node (amd-1) and its added limit is amd.com/gpu.
  r = run(
      {"cluster", "place", "-f", GF_FIXTURES_DIR "/manifests/rocm_pod.in.yaml", "--kubeconfig", kubeconfig, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Created Pod 'rocm-smoke' in namespace 'team-a' on node 'amd-1'\n");
  const auto stored = kube->object("/api/v1/namespaces/team-a/pods/rocm-smoke");
  ASSERT_TRUE(stored.has_value());
  const auto pod = parse(*stored);
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"], 1) << *stored;
  EXPECT_FALSE(pod["spec"]["containers"][0]["resources"]["limits"].contains("nvidia.com/gpu")) << *stored;
}

TEST_F(ClusterKube, PlacePinsToTheSelectedNode) {
  auto r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kubernetes.io/hostname"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- gpu-d"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vllm/vllm-openai:v0.6.3"), std::string::npos);  // the rest is kept
  EXPECT_NE(r.err.find("Selected node: gpu-d"), std::string::npos) << r.err;
  EXPECT_EQ(kube->count("PATCH", kDeploymentItem), 0u);  // nothing applied without --apply

  // -o FILE: the same text in the file, nothing on stdout.
  const auto out = (dir / "pinned.yaml").string();
  auto o = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "-o", out});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_TRUE(o.out.empty());
  EXPECT_EQ(slurp(out), r.out);
  // … but never through a symbolic link.
  fs::create_symlink(dir / "target.yaml", dir / "link.yaml");
  o = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "-o", (dir / "link.yaml").string()});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir / "target.yaml"));

  // --json: the decision per document, with the manifest.
  auto j = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto doc = parse(j.out);
  EXPECT_EQ(doc["node"], "gpu-d");
  EXPECT_EQ(doc["required_gpus"], 2);
  ASSERT_EQ(doc["documents"].size(), 1u);
  EXPECT_EQ(doc["documents"][0]["kind"], "Deployment");
  EXPECT_EQ(doc["documents"][0]["gpu_source"], "limits");
  EXPECT_EQ(doc["documents"][0]["node"], "gpu-d");
  EXPECT_FALSE(doc["documents"][0]["changes"].empty());
  EXPECT_EQ(doc["manifest"], r.out);
}

TEST_F(ClusterKube, ApplyCreatesThenUpdates) {
  auto r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Created Deployment 'vllm-llama' in namespace 'inference' on node 'gpu-d'\n");
  const auto stored = kube->object(kDeploymentItem);
  ASSERT_TRUE(stored.has_value());
  const auto obj = parse(*stored);
  const auto& expr =
      obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "kubernetes.io/hostname");
  EXPECT_EQ(expr["operator"], "In");
  EXPECT_EQ(expr["values"], json::array({"gpu-d"}));
  bool server_side_apply = false;
  for (const auto& rq : kube->requests())
    if (rq.method == "PATCH" && rq.path == kDeploymentItem)
      server_side_apply = rq.query.count("fieldManager") && rq.query.at("fieldManager") == "gpufleet" &&
                          rq.content_type == "application/apply-patch+yaml";
  EXPECT_TRUE(server_side_apply);

  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--apply", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = parse(r.out);
  EXPECT_EQ(doc["documents"][0]["applied"], "updated");
  EXPECT_EQ(doc["documents"][0]["status"], 200);
  EXPECT_EQ(kube->count("PATCH", kDeploymentItem), 2u);

  r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--apply"});
  EXPECT_EQ(r.out, "Updated Deployment 'vllm-llama' in namespace 'inference' on node 'gpu-d'\n");
}

// The seed's flow end to end: an OME InferenceService placed and created through the API server.
TEST_F(ClusterKube, ApplyCreatesAnInferenceService) {
  const auto isvc = GF_FIXTURES_DIR "/manifests/isvc.in.yaml";  // 4 GPUs; gpu-d is the node with 4 free
  auto r = run({"cluster", "place", "-f", isvc, "--kubeconfig", kubeconfig, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Created InferenceService 'my-task-exp1' in namespace 'autotuner' on node 'gpu-d'\n");
  EXPECT_NE(r.err.find("Selected node 'gpu-d' for deployment:"), std::string::npos) << r.err;
  constexpr const char* kItem = "/apis/ome.io/v1beta1/namespaces/autotuner/inferenceservices/my-task-exp1";
  bool applied = false;
  for (const auto& rq : kube->requests())
    if (rq.path == kItem)
      applied = rq.method == "PATCH" && rq.content_type == "application/apply-patch+yaml" &&
                rq.query.count("fieldManager") && rq.query.at("fieldManager") == "gpufleet";
  EXPECT_TRUE(applied);
  const auto stored = kube->object(kItem);
  ASSERT_TRUE(stored.has_value());
  const auto obj = parse(*stored);
  EXPECT_EQ(obj["kind"], "InferenceService");
  EXPECT_EQ(obj["apiVersion"], "ome.io/v1beta1");
  const auto& terms = obj["spec"]["engine"]["affinity"]["nodeAffinity"]
                         ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u) << *stored;
  const auto& expr = terms[0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "kubernetes.io/hostname");
  EXPECT_EQ(expr["operator"], "In");
  EXPECT_EQ(expr["values"], json::array({"gpu-d"}));
  EXPECT_EQ(obj["spec"]["engine"]["runner"]["resources"]["limits"]["nvidia.com/gpu"], 4) << *stored;  // kept
  EXPECT_EQ(obj["metadata"]["labels"]["autotuner.io/task"], "my-task");

  r = run({"cluster", "place", "-f", isvc, "--kubeconfig", kubeconfig, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Updated InferenceService 'my-task-exp1' in namespace 'autotuner' on node 'gpu-d'\n");
  EXPECT_EQ(kube->count("PATCH", kItem), 2u);
  // Only lists of nodes and pods and the server-side apply: what deploy/kubernetes/rbac.yaml grants
  // (get/list nodes and pods; create and patch the kinds placed), nothing it would refuse.
  for (const auto& rq : kube->requests()) {
    const bool list = rq.method == "GET" && (rq.path == "/api/v1/nodes" || rq.path == "/api/v1/pods");
    EXPECT_TRUE(list || (rq.method == "PATCH" && rq.path == kItem)) << rq.method << " " << rq.target;
  }
}

// serve takes the cluster verbs' source options, alone or over --cluster-config.
TEST_F(ClusterKube, ServeTakesTheSourceOptions) {
  fs::create_directories(dir / "node");
  KubeAgent node_agent;
  ASSERT_TRUE(node_agent.start(dir / "node", {"--node-name", "gpu-d"})) << node_agent.output_text();

  fs::create_directories(dir / "view");
  KubeAgent view;
  ASSERT_TRUE(view.start(dir / "view", {"--agent", node_agent.url()})) << view.output_text();
  auto [status, body] = get_when_ready(view.url() + "/api/v1/cluster/nodes");
  ASSERT_EQ(status, 200) << body << view.output_text();
  auto j = parse(body);
  const auto* d = node(j, "gpu-d");
  ASSERT_NE(d, nullptr) << body;
  EXPECT_EQ((*d)["metrics_source"], "agent");
  EXPECT_EQ((*d)["has_metrics"], true);
  EXPECT_EQ(j["kubernetes"], false);  // no kubeconfig is guessed by an agent
  view.stop();

  // Options win over the file; sources add up (the file's Kubernetes, the option's agent).
  const auto cfg = write_file("fleet.json", R"({"kubeconfig": "kubeconfig.yaml", "utilization_threshold": 10})");
  fs::create_directories(dir / "view2");
  KubeAgent view2;
  ASSERT_TRUE(view2.start(dir / "view2",
                          {"--cluster-config", cfg, "--agent", node_agent.url(), "--utilization-threshold", "95"}))
      << view2.output_text();
  std::tie(status, body) = get_when_ready(view2.url() + "/api/v1/cluster/nodes");
  ASSERT_EQ(status, 200) << body << view2.output_text();
  j = parse(body);
  EXPECT_EQ(j["thresholds"]["utilization"], 95.0);
  EXPECT_EQ(j["kubernetes"], true);
  d = node(j, "gpu-d");
  ASSERT_NE(d, nullptr) << body;
  EXPECT_EQ((*d)["in_kubernetes"], true);
  EXPECT_EQ((*d)["metrics_source"], "agent");
  view2.stop();

  // Fleet options without any source are a mistake, said before anything starts.
  auto r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--no-history", "--db", (dir / "x.db").string(),
                "--max-age", "5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("need a fleet source"), std::string::npos) << r.err;
  node_agent.stop();
}

TEST_F(ClusterKube, ApplyUsesTheContextNamespaceAndStdin) {
  // A Pod naming no namespace goes to the context's (team-b for context "other"), read from stdin.
  const auto pod = write_file("pod.yaml",
                              "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\nspec:\n  containers:\n"
                              "  - name: c\n    image: busybox\n");
  auto r = gf::platform::run_process({"/bin/sh", "-c",
                                      std::string("exec \"$0\" cluster place -f - --kubeconfig \"$1\" --context other "
                                                  "--apply < \"$2\""),
                                      GF_BINARY, kubeconfig, pod},
                                     gf::platform::RunOptions{30s});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->exit_code, 0) << r->err;
  EXPECT_EQ(r->out, "Created Pod 'probe' in namespace 'team-b' on node 'gpu-d'\n");
  const auto stored = kube->object("/api/v1/namespaces/team-b/pods/probe");
  ASSERT_TRUE(stored.has_value());
  EXPECT_NE(stored->find("\"nvidia.com/gpu\""), std::string::npos) << *stored;  // the GPU limit it lacked
  // --namespace that contradicts the document's is refused before anything is sent.
  auto n =
      run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--apply", "--namespace", "elsewhere"});
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_FALSE(kube->object(kDeploymentItem).has_value());
}

TEST_F(ClusterKube, NoGpuSelectionLeavesTheManifestAlone) {
  const auto original = slurp(deployment);
  auto r = run({"cluster", "place", "-f", deployment, "--kubeconfig", kubeconfig, "--no-gpu-selection"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, original);
  EXPECT_EQ(kube->count("GET", "/api/v1/nodes"), 0u);  // the fleet was not asked
  EXPECT_NE(r.err.find("--no-gpu-selection"), std::string::npos) << r.err;
  // Without any source at all it still works: nothing is asked.
  r = run({"cluster", "place", "-f", deployment, "--no-gpu-selection"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, original);
}

TEST_F(ClusterKube, NoQualifyingNodeFailsOverToTheScheduler) {
  const auto original = slurp(deployment);
  // 5 GPUs per pod: no node has 5 free.
  auto r = run({"cluster", "place", "-f", deployment, "--gpus", "5", "--kubeconfig", kubeconfig});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, original);
  EXPECT_NE(r.err.find("No node pinned"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the Kubernetes scheduler decides"), std::string::npos) << r.err;

  // Applied unpinned, and the line says why.
  r = run({"cluster", "place", "-f", deployment, "--gpus", "5", "--kubeconfig", kubeconfig, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Created Deployment 'vllm-llama' in namespace 'inference' (no node pinned: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("the Kubernetes scheduler decides)"), std::string::npos) << r.out;
  const auto stored = kube->object(kDeploymentItem);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->find("kubernetes.io/hostname"), std::string::npos) << *stored;

  // An unreachable source is a failed selection too, not a failed command.
  r = run({"cluster", "place", "-f", deployment, "--prometheus", "http://127.0.0.1:1", "--timeout", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, original);
  EXPECT_NE(r.err.find("No node pinned: no fleet source answered"), std::string::npos) << r.err;
}

TEST_F(ClusterKube, ServeClusterConfigReadsKubernetes) {
  const auto cfg = write_file("fleet.json", R"({"kubeconfig": "kubeconfig.yaml", "refresh_interval_s": 1})");
  KubeAgent agent;
  ASSERT_TRUE(agent.start(dir, {"--cluster-config", cfg})) << agent.output_text();
  const auto [status, body] = get_when_ready(agent.url() + "/api/v1/cluster/select?gpus=3");
  ASSERT_EQ(status, 200) << body << agent.output_text();
  EXPECT_EQ(parse(body)["node"], "gpu-d");
  agent.stop();
}

// Finding 7 of the security review: user names and passwords in Prometheus and agent URLs are sent
// with the requests and shown nowhere else: not in sources, errors or agent_url, on the command line's
// output or in the agent's /api/v1/cluster/ documents.
TEST_F(ClusterKube, CredentialsInUrlsAreNeverShown) {
  gf::fakes::KubeStandin prom;  // a Prometheus that knows no GPU, and records what it is sent
  prom.set_canned_answer(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  const std::string prom_url = "http://promuser:PROM-SECRET@127.0.0.1:" + std::to_string(prom.port()) + "/";
  const std::string shown_prom = "http://127.0.0.1:" + std::to_string(prom.port()) + "/";
  const std::string agent_url = "http://u:AGENTPW2@127.0.0.1:1";  // nothing listens: the error names the URL
  const auto leaks = [](const std::string& text) {
    for (const char* secret : {"PROM-SECRET", "promuser", "AGENTPW2", "u:AGENTPW2"})
      if (text.find(secret) != std::string::npos) return std::string(secret);
    return std::string();
  };

  auto r = run({"cluster", "nodes", "--json", "--prometheus", prom_url, "--agent", agent_url, "--timeout", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(leaks(r.out), "") << r.out;
  EXPECT_EQ(leaks(r.err), "") << r.err;
  auto j = parse(r.out);
  EXPECT_NE(j["sources"].dump().find("prometheus " + shown_prom), std::string::npos) << j["sources"];
  EXPECT_NE(j["errors"].dump().find("agent http://127.0.0.1:1: "), std::string::npos) << j["errors"];
  ASSERT_FALSE(prom.requests().empty());
  EXPECT_EQ(prom.requests().front().authorization.rfind("Basic ", 0), 0u);  // the request still carries them
  // The same in text, and when Prometheus cannot be reached either.
  r = run({"cluster", "gpus", "--prometheus", "http://promuser:PROM-SECRET@127.0.0.1:1", "--agent", agent_url,
           "--timeout", "2"});
  EXPECT_EQ(leaks(r.out + r.err), "") << r.out << r.err;
  EXPECT_NE(r.err.find("prometheus http://127.0.0.1:1: unreachable"), std::string::npos) << r.err;

  // The agent's fleet view, from its config file.
  const auto cfg = write_file(
      "fleet.json",
      json{{"prometheus", prom_url}, {"agents", {agent_url}}, {"refresh_interval_s", 1}, {"timeout_s", 2}}.dump());
  KubeAgent view;
  ASSERT_TRUE(view.start(dir, {"--cluster-config", cfg})) << view.output_text();
  for (const char* route : {"/api/v1/cluster/nodes", "/api/v1/cluster/gpus", "/api/v1/cluster/select?gpus=1"}) {
    const auto [status, body] = get_when_ready(view.url() + route);
    ASSERT_EQ(status, 200) << route << ": " << body << view.output_text();
    EXPECT_EQ(leaks(body), "") << route << ": " << body;
    EXPECT_NE(body.find(shown_prom), std::string::npos) << route << ": " << body;
  }
  const auto nodes = parse(get_when_ready(view.url() + "/api/v1/cluster/nodes").second);
  const auto* agent_node = node(nodes, "127.0.0.1");
  ASSERT_NE(agent_node, nullptr) << nodes.dump();
  EXPECT_EQ((*agent_node)["agent_url"], "http://127.0.0.1:1");
  view.stop();
  EXPECT_EQ(leaks(view.output_text()), "") << view.output_text();
}

// --prometheus-token-file (and the config's prometheus_token_file): the first line goes to Prometheus
// as a bearer token; a file that cannot be used stops the command with one line.
TEST_F(ClusterKube, PrometheusTokenFile) {
  gf::fakes::KubeStandin prom;
  prom.set_canned_answer(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  const auto token = write_file("prom.token", "PROM-TOKEN\n");
  fs::permissions(token, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  auto r = run({"cluster", "nodes", "--json", "--prometheus", prom.url(), "--prometheus-token-file", token});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // Prometheus knows no GPU: an empty list
  ASSERT_FALSE(prom.requests().empty());
  for (const auto& rq : prom.requests()) EXPECT_EQ(rq.authorization, "Bearer PROM-TOKEN");
  EXPECT_NE(r.err.find("gpufleet: warning: sending a bearer token over plain http to " + prom.url()), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("PROM-TOKEN"), std::string::npos) << r.err;

  for (const auto& bad : {(dir / "missing.token").string(), write_file("empty.token", "\n")}) {
    r = run({"cluster", "nodes", "--prometheus", prom.url(), "--prometheus-token-file", bad});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(line_count(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  }
  // serve refuses to start the same way, from the config file too.
  const auto cfg =
      write_file("fleet.json", json{{"prometheus", prom.url()}, {"prometheus_token_file", "empty.token"}}.dump());
  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--no-history", "--db", (dir / "x.db").string(),
           "--cluster-config", cfg});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("empty.token is empty"), std::string::npos) << r.err;
}

// Finding 13: TLS verification off, or a bearer token over plain http, is said on stderr (at start,
// and by serve with every failed refresh) and marks the source "insecure".
TEST_F(ClusterKube, InsecureKubernetesIsSaid) {
  // The stand-in: plain http with a token.
  auto r = run({"cluster", "nodes", "--json", "--kubeconfig", kubeconfig});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "gpufleet: warning: sending a bearer token over plain http to " + kube->url() + " (kubernetes)\n");
  EXPECT_NE(parse(r.out)["sources"].dump().find("context standin; insecure)"), std::string::npos) << r.out;

  // TLS without verification, on a server that is not there.
  const auto skip = write_file("skip.yaml",
                               "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n"
                               "    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\n"
                               "users:\n- name: u\n  user:\n    token: K8S-SECRET-TOKEN\n"
                               "contexts:\n- name: s\n  context: {cluster: s, user: u}\ncurrent-context: s\n");
  r = run({"cluster", "nodes", "--kubeconfig", skip, "--timeout", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("gpufleet: warning: TLS verification is off for https://127.0.0.1:1"), std::string::npos)
      << r.err;

  // serve: at start, then again with each failed refresh; "insecure" in the documents' sources.
  const auto cfg =
      write_file("fleet.json", R"({"kubeconfig": "skip.yaml", "refresh_interval_s": 0.2, "timeout_s": 1})");
  KubeAgent view;
  ASSERT_TRUE(view.start(dir, {"--cluster-config", cfg})) << view.output_text();
  const auto [status, body] = get_when_ready(view.url() + "/api/v1/cluster/nodes");
  ASSERT_EQ(status, 200) << body << view.output_text();
  EXPECT_NE(parse(body)["sources"].dump().find("; insecure)"), std::string::npos) << body;
  gf::test::eventually(
      [&] { return occurrences(view.output_text(), "TLS verification is off for https://127.0.0.1:1") >= 3; }, 20s,
      50ms);
  const auto err = view.output_text();
  EXPECT_GE(occurrences(err, "TLS verification is off for https://127.0.0.1:1"), 3u) << err;  // start + 2 rounds
  EXPECT_NE(err.find("gpufleet: warning: TLS verification is off"), std::string::npos) << err;
  EXPECT_NE(err.find("gpufleet: fleet: warning: TLS verification is off"), std::string::npos) << err;
  view.stop();
}

}  // namespace
