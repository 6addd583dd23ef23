// The deployment files render and say what deploy/README.md promises: `kubectl kustomize
// deploy/kubernetes` (offline) gives the agent's DaemonSet, Service, ServiceMonitor and least-rights
// RBAC; `systemd-analyze verify` accepts the unit without a warning. Skipped, saying so, only when the
// tool itself is not installed.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::UnorderedElementsAre;

const fs::path kDeploy = fs::path(GF_SOURCE_DIR) / "deploy";

struct Run {
  int status = -1;
  std::string output;
};

Run run(const std::string& command) {
  Run r;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool have(const std::string& tool) { return run("command -v " + tool + " >/dev/null 2>&1").status == 0; }

std::vector<std::string> strings(const YAML::Node& seq) {
  std::vector<std::string> out;
  if (seq.IsSequence()) {
    for (const auto& s : seq) out.push_back(s.as<std::string>());
  }
  return out;
}

class Kustomize : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have("kubectl")) GTEST_SKIP() << "kubectl is not installed: cannot render deploy/kubernetes";
    const auto r = run("kubectl kustomize '" + (kDeploy / "kubernetes").string() + "' 2>&1");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const auto& doc : YAML::LoadAll(r.output)) {
      if (doc.IsNull()) continue;
      objects_[doc["kind"].as<std::string>() + "/" + doc["metadata"]["name"].as<std::string>()] = doc;
    }
  }
  YAML::Node get(const std::string& key) {
    const auto it = objects_.find(key);
    EXPECT_NE(it, objects_.end()) << "not rendered: " << key;
    return it == objects_.end() ? YAML::Node() : it->second;
  }
  std::map<std::string, YAML::Node> objects_;
};

TEST_F(Kustomize, RendersExactlyTheExpectedObjects) {
  std::set<std::string> keys;
  for (const auto& [k, v] : objects_) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{
                      "Namespace/gpufleet", "ServiceAccount/gpufleet-agent", "ServiceAccount/gpufleet-cluster",
                      "ClusterRole/gpufleet-cluster-view", "ClusterRoleBinding/gpufleet-cluster-view",
                      "ClusterRole/gpufleet-place", "RoleBinding/gpufleet-place", "DaemonSet/gpufleet-agent",
                      "Service/gpufleet-agent", "ServiceMonitor/gpufleet-agent", "ServiceAccount/gpufleet-exec",
                      "ClusterRole/gpufleet-exec-nvidia-smi", "ClusterRoleBinding/gpufleet-exec-nvidia-smi"}));
  for (const auto& [k, v] : objects_) {
    const auto kind = v["kind"].as<std::string>();
    if (kind == "Namespace" || kind.rfind("Cluster", 0) == 0) continue;
    EXPECT_EQ(v["metadata"]["namespace"].as<std::string>(""), "gpufleet") << k;
  }
}

TEST_F(Kustomize, DaemonSetRunsTheAgentForProcessAttribution) {
  const auto ds = get("DaemonSet/gpufleet-agent");
  const auto pod = ds["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["hostPID"].as<bool>(false));
  EXPECT_EQ(pod["runtimeClassName"].as<std::string>(""), "nvidia");
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>(true));
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(""), "gpufleet-agent");
  bool tolerates_gpu = false;
  for (const auto& t : pod["tolerations"]) tolerates_gpu |= t["key"].as<std::string>("") == "nvidia.com/gpu";
  EXPECT_TRUE(tolerates_gpu);

  ASSERT_EQ(pod["containers"].size(), 1u);
  const auto c = pod["containers"][0];
  const auto args = strings(c["args"]);
  ASSERT_GE(args.size(), 5u);
  EXPECT_EQ(args[0], "serve");
  EXPECT_THAT(args, Contains("0.0.0.0:9401"));
  EXPECT_THAT(args, Contains("$(NODE_NAME)"));
  bool node_name_from_api = false;
  for (const auto& e : c["env"]) {
    node_name_from_api |= e["name"].as<std::string>("") == "NODE_NAME" &&
                          e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>("") == "spec.nodeName";
  }
  EXPECT_TRUE(node_name_from_api);
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(c[probe]["httpGet"]["path"].as<std::string>(""), "/api/health") << probe;
    EXPECT_EQ(c[probe]["httpGet"]["port"].as<std::string>(""), "http") << probe;
  }
  for (const char* side : {"requests", "limits"}) {
    EXPECT_TRUE(c["resources"][side]["cpu"].IsDefined()) << side;
    EXPECT_TRUE(c["resources"][side]["memory"].IsDefined()) << side;
    EXPECT_FALSE(c["resources"][side]["nvidia.com/gpu"].IsDefined()) << "the agent must not hold GPUs";
  }
  const auto sc = c["securityContext"];
  EXPECT_FALSE(sc["privileged"].as<bool>(true));
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>(true));
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>(false));
  EXPECT_THAT(strings(sc["capabilities"]["drop"]), UnorderedElementsAre("ALL"));
  EXPECT_THAT(strings(sc["capabilities"]["add"]), UnorderedElementsAre("SYS_PTRACE"));
}

TEST_F(Kustomize, ServiceAndServiceMonitorMeetOnThePortNamedMetrics) {
  const auto svc = get("Service/gpufleet-agent");
  ASSERT_EQ(svc["spec"]["ports"].size(), 1u);
  EXPECT_EQ(svc["spec"]["ports"][0]["name"].as<std::string>(""), "metrics");
  EXPECT_EQ(svc["spec"]["ports"][0]["port"].as<int>(0), 9401);
  const auto ds = get("DaemonSet/gpufleet-agent");
  const auto pod_labels = ds["spec"]["template"]["metadata"]["labels"];
  for (const auto& kv : svc["spec"]["selector"]) {
    EXPECT_EQ(pod_labels[kv.first.as<std::string>()].as<std::string>(""), kv.second.as<std::string>());
  }
  const auto sm = get("ServiceMonitor/gpufleet-agent");
  EXPECT_EQ(sm["apiVersion"].as<std::string>(""), "monitoring.coreos.com/v1");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["port"].as<std::string>(""), "metrics");
  EXPECT_EQ(sm["spec"]["endpoints"][0]["path"].as<std::string>(""), "/metrics");
  for (const auto& kv : sm["spec"]["selector"]["matchLabels"]) {
    EXPECT_EQ(svc["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(""), kv.second.as<std::string>());
  }
}

// group/resource -> verbs, over every rule of a role.
std::map<std::string, std::set<std::string>> grants(const YAML::Node& role) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& rule : role["rules"]) {
    for (const auto& g : strings(rule["apiGroups"])) {
      for (const auto& r : strings(rule["resources"])) {
        for (const auto& v : strings(rule["verbs"])) out[g + "/" + r].insert(v);
      }
    }
  }
  return out;
}

TEST_F(Kustomize, RbacGivesEachRoleOnlyWhatItNeeds) {
  using Grants = std::map<std::string, std::set<std::string>>;
  EXPECT_EQ(grants(get("ClusterRole/gpufleet-cluster-view")),
            (Grants{{"/nodes", {"get", "list"}}, {"/pods", {"get", "list"}}}));  // no watch: nothing watches
  // Server-side apply only: PATCH, which needs create too when the object is new; no GET, no PUT.
  const std::set<std::string> write = {"create", "patch"};
  EXPECT_EQ(grants(get("ClusterRole/gpufleet-place")), (Grants{{"/pods", write},
                                                               {"apps/deployments", write},
                                                               {"apps/statefulsets", write},
                                                               {"batch/jobs", write},
                                                               {"ome.io/inferenceservices", write}}));
  // Placement is granted per namespace, never cluster-wide; the agent is bound to nothing.
  EXPECT_EQ(get("RoleBinding/gpufleet-place")["roleRef"]["name"].as<std::string>(""), "gpufleet-place");
  for (const auto& [k, v] : objects_) {
    if (v["kind"].as<std::string>().find("Binding") == std::string::npos) continue;
    for (const auto& s : v["subjects"]) EXPECT_NE(s["name"].as<std::string>(""), "gpufleet-agent") << k;
    if (v["kind"].as<std::string>() == "ClusterRoleBinding") {
      EXPECT_NE(v["roleRef"]["name"].as<std::string>(""), "gpufleet-place") << k;
    }
  }
  EXPECT_FALSE(get("ServiceAccount/gpufleet-agent")["automountServiceAccountToken"].as<bool>(true));
  // The exec source: exec (get for the WebSocket upgrade, create since 1.30) and the listings, bound to
  // its own account alone; the cluster view's account cannot exec.
  EXPECT_EQ(grants(get("ClusterRole/gpufleet-exec-nvidia-smi")),
            (Grants{{"/nodes", {"get", "list"}}, {"/pods", {"get", "list"}}, {"/pods/exec", {"get", "create"}}}));
  const auto exec_binding = get("ClusterRoleBinding/gpufleet-exec-nvidia-smi");
  ASSERT_EQ(exec_binding["subjects"].size(), 1u);
  EXPECT_EQ(exec_binding["subjects"][0]["name"].as<std::string>(""), "gpufleet-exec");
  for (const auto& [k, v] : objects_) {
    if (v["kind"].as<std::string>().find("Binding") == std::string::npos) continue;
    if (v["roleRef"]["name"].as<std::string>("") == "gpufleet-exec-nvidia-smi") continue;
    for (const auto& s : v["subjects"]) EXPECT_NE(s["name"].as<std::string>(""), "gpufleet-exec") << k;
  }
}

TEST(SystemdUnit, VerifiesWithoutWarnings) {
  if (!have("systemd-analyze")) GTEST_SKIP() << "systemd-analyze is not installed: cannot verify the unit";
  std::ifstream in(kDeploy / "systemd" / "gpufleet-agent.service");
  ASSERT_TRUE(in.good());
  std::string unit((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // verify checks that ExecStart's program exists: point it at the binary just built.
  const std::string installed = "/usr/local/bin/gpufleet";
  const auto at = unit.find("ExecStart=" + installed);
  ASSERT_NE(at, std::string::npos);
  unit.replace(at + 10, installed.size(), GF_BINARY);
  for (const char* hardening :
       {"ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=gpufleet", "RuntimeDirectory=gpufleet",
        "CapabilityBoundingSet=CAP_SYS_PTRACE", "PrivateTmp=yes", "User=root"}) {
    EXPECT_NE(unit.find(hardening), std::string::npos) << hardening;
  }
  const gf::test::TempDir dir;
  const auto path = dir / "gpufleet-agent.service";
  gf::test::write_file(path, unit);
  const auto r = run("systemd-analyze verify '" + path.string() + "' 2>&1");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output, "") << "systemd-analyze warns (it ignores bad values with a warning only)";
}

// The shared-node layout (issue 12): the agent listens on the socket every user's CLI looks for first,
// the store's directory is root's alone (0700: nobody else can open the store, so nobody can forge a
// lease with sqlite3), the socket's directory is open for connecting (0755). Read key by key, so that
// this holds where systemd-analyze is missing too.
TEST(SystemdUnit, SharedNodeLayout) {
  std::ifstream in(kDeploy / "systemd" / "gpufleet-agent.service");
  ASSERT_TRUE(in.good());
  std::map<std::string, std::vector<std::string>> keys;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    const auto eq = line.find('=');
    if (eq != std::string::npos) keys[line.substr(0, eq)].push_back(line.substr(eq + 1));
  }
  auto one = [&](const std::string& k) { return keys[k].size() == 1 ? keys[k][0] : std::string("<not once>"); };
  EXPECT_EQ(one("User"), "root");
  EXPECT_EQ(one("StateDirectory"), "gpufleet");
  EXPECT_EQ(one("StateDirectoryMode"), "0700");
  EXPECT_EQ(one("RuntimeDirectory"), "gpufleet");
  EXPECT_EQ(one("RuntimeDirectoryMode"), "0755");
  EXPECT_EQ(one("ProtectSystem"), "strict");
  EXPECT_EQ(one("NoNewPrivileges"), "yes");
  EXPECT_EQ(one("PrivateTmp"), "yes");
  const std::string exec = one("ExecStart");
  EXPECT_EQ(exec.rfind("/usr/local/bin/gpufleet serve ", 0), 0u) << exec;
  EXPECT_NE(exec.find(" --socket /run/gpufleet/agent.sock"), std::string::npos) << exec;
  EXPECT_NE(exec.find(" --db /var/lib/gpufleet/gpufleet.db"), std::string::npos) << exec;
  EXPECT_TRUE(keys["Environment"].empty()) << "no GPUFLEET_DB: users reach the store through the socket only";
}

}  // namespace

// The container image (issue 23, item 10). No container engine runs here, so the image is never built in
// the suite; what can drift is checked instead: the build stage runs `make package` (which CI runs too),
// the runtime stage installs the packages scripts/package.sh lists and starts the binary where the script
// stages it, and the DaemonSet's image name is the one deploy/README.md tells people to build.
TEST(ContainerImage, RunsTheStepsCiRunsAndStartsTheStagedAgent) {
  std::ifstream in(fs::path(GF_SOURCE_DIR) / "Dockerfile");
  ASSERT_TRUE(in.good());
  std::vector<std::string> from, run;
  std::string entrypoint, copy_stage;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("FROM ", 0) == 0) from.push_back(line);
    if (line.rfind("RUN ", 0) == 0) run.push_back(line);
    if (line.rfind("ENTRYPOINT ", 0) == 0) entrypoint = line;
    if (line.rfind("COPY --from=build ", 0) == 0) copy_stage = line;
  }
  ASSERT_EQ(from.size(), 2u) << "a build stage and a runtime stage";
  EXPECT_NE(from[0].find("bookworm"), std::string::npos) << from[0];  // Debian 12
  EXPECT_EQ(from[1], "FROM debian:12-slim");
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(run[0], "RUN make package DEPS_ARGS=--build PACKAGE_DIR=/stage");
  EXPECT_EQ(copy_stage, "COPY --from=build /stage/ /");
  EXPECT_EQ(entrypoint, R"(ENTRYPOINT ["/usr/local/bin/gpufleet"])");

  const std::string text = gf::test::slurp(fs::path(GF_SOURCE_DIR) / "scripts" / "package.sh");
  EXPECT_NE(text.find(R"(install -m 0755 "$bin" "$stage/usr/local/bin/gpufleet")"), std::string::npos);
  EXPECT_NE(text.find("usr/local/share/gpufleet/runtime-packages.txt"), std::string::npos);

  const std::string ci_text = gf::test::slurp(fs::path(GF_SOURCE_DIR) / ".ci" / "run");
  EXPECT_NE(ci_text.find("stage make package"), std::string::npos) << "CI runs the image's build steps";
}
