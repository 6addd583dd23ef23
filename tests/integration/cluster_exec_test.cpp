// `gpufleet cluster … --exec-nvidia-smi`: the real binary against the stand-in API server with its
// pods/exec WebSocket (tests/fakes/kube_standin.*), a cluster with neither agents nor an exporter, as
// seed 002 reads it. gpu-000 answers with a recorded 8-GPU H100 nvidia-smi CSV, gpu-001 hangs, gpu-002's
// image has no nvidia-smi, gpu-003 runs no GPU pod (nothing to exec into).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fakes/exec_fixture.hpp"
#include "fakes/kube_standin.hpp"
#include "platform/subprocess.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace efs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

struct ClusterExec : ::testing::Test {
  gf::test::TempDir tmp;
  const efs::path dir = tmp.path();
  std::unique_ptr<gf::fakes::KubeStandin> kube;
  std::string kubeconfig;
  std::string csv = gf::test::slurp(GF_FIXTURES_DIR "/nvidia_smi/query-gpu-normal.csv");

  void SetUp() override {
    ASSERT_FALSE(csv.empty());
    auto doc = json::parse(gf::fakes::exec_cluster_json(3, 8));
    doc["nodes"].push_back(gf::fakes::exec_gpu_node("gpu-003", 8));
    gf::fakes::KubeStandinConfig cfg;
    cfg.fixture_json = doc.dump();
    cfg.token = "exec-token";
    cfg.exec["train/job-000"] = {csv, "", 0, "", false, ""};
    cfg.exec["train/job-001"] = {"", "", 0, "", true, ""};
    kube = std::make_unique<gf::fakes::KubeStandin>(cfg);
    kubeconfig = (dir / "kubeconfig.yaml").string();
    std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: " +
                                     kube->url() +
                                     "\nusers:\n- name: u\n  user:\n    token: exec-token\n"
                                     "contexts:\n- name: s\n  context: {cluster: s, user: u}\ncurrent-context: s\n";
    setenv("GPUFLEET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("GPUFLEET_NVIDIA_SMI", "/nonexistent/nvidia-smi", 1);
    setenv("HOME", dir.c_str(), 1);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
  }
  void TearDown() override { kube.reset(); }
  static gf::platform::ProcessOutput exec_run(std::vector<std::string> args) {
    args.insert(args.begin(), GF_BINARY);
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{30s});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : gf::platform::ProcessOutput{};
  }
};

TEST_F(ClusterExec, GpusThroughPodsExec) {
  auto r = exec_run({"cluster", "gpus", "--kubeconfig", kubeconfig, "--exec-nvidia-smi", "--exec-timeout", "1",
                     "--exec-parallel", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  ASSERT_EQ(doc["gpus"].size(), 8u) << r.out;  // gpu-000's eight GPUs
  EXPECT_EQ(doc["gpus"][0]["node"], "gpu-000");
  EXPECT_EQ(doc["gpus"][0]["source"], "exec");
  EXPECT_EQ(doc["gpus"][0]["utilization"], 87.0);
  EXPECT_EQ(doc["gpus"][0]["memory_total_mib"], 81559.0);
  EXPECT_EQ(doc["gpus"][1]["idle"], true);   // 0 % and 0 MiB
  EXPECT_EQ(doc["gpus"][2]["idle"], false);  // 100 %
  std::map<std::string, json> without;
  for (const auto& n : doc["nodes_without_metrics"]) without[n["node"]] = n;
  ASSERT_EQ(without.size(), 3u) << r.out;
  EXPECT_EQ(without["gpu-001"]["health"], "metrics_error");
  EXPECT_NE(without["gpu-001"]["problems"].dump().find("within 1000 ms"), std::string::npos) << r.out;
  EXPECT_NE(without["gpu-002"]["problems"].dump().find("executable file not found"), std::string::npos) << r.out;
  EXPECT_EQ(without["gpu-003"]["health"], "no_metrics");
  bool described = false;
  for (const auto& s : doc["sources"])
    described = described || s.get<std::string>().find("pods/exec") != std::string::npos;
  EXPECT_TRUE(described) << doc["sources"].dump();
  // Exactly the fixed command, in the GPU container, for the three nodes with a GPU pod.
  const auto calls = kube->exec_calls();
  ASSERT_EQ(calls.size(), 3u);
  for (const auto& c : calls) {
    EXPECT_EQ(c.container, "cuda");
    ASSERT_EQ(c.command.size(), 3u);
    EXPECT_EQ(c.command[0], "nvidia-smi");
    EXPECT_EQ(c.command[2], "--format=csv,noheader,nounits");
  }
  EXPECT_LE(kube->max_concurrent_execs(), 2u);
}

TEST_F(ClusterExec, NodesAndSelectUseTheExecMetrics) {
  auto r =
      exec_run({"cluster", "nodes", "--kubeconfig", kubeconfig, "--exec-nvidia-smi", "--exec-timeout", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  const json* a = nullptr;
  for (const auto& n : doc["nodes"])
    if (n["name"] == "gpu-000") a = &n;
  ASSERT_NE(a, nullptr);
  EXPECT_EQ((*a)["metrics_source"], "exec");
  EXPECT_EQ((*a)["gpus_with_metrics"], 8);
  EXPECT_EQ((*a)["idle_gpu_count"], 6);                           // all but the 87 % and 100 % GPUs
  EXPECT_DOUBLE_EQ((*a)["avg_utilization"].get<double>(), 25.5);  // (87 + 100 + 12 + 5) / 8
  // Without the flag the same cluster has no metrics at all, and nothing is exec'ed.
  const auto before = kube->exec_calls().size();
  r = exec_run({"cluster", "nodes", "--kubeconfig", kubeconfig, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(kube->exec_calls().size(), before);
  EXPECT_EQ(json::parse(r.out)["nodes"][0]["has_metrics"], false);
}

TEST_F(ClusterExec, MisuseIsOneLine) {
  auto r = exec_run({"cluster", "nodes", "--agent", "http://127.0.0.1:9", "--exec-parallel", "4"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--exec-nvidia-smi"), std::string::npos) << r.err;
  const auto cfg = (dir / "fleet.json").string();
  std::ofstream(cfg) << R"({"kubernetes": false, "agents": ["http://127.0.0.1:9"], "exec_nvidia_smi": true})";
  r = exec_run({"cluster", "nodes", "--config", cfg});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs the Kubernetes source"), std::string::npos) << r.err;
}

}  // namespace
