// The fleet config file's Kubernetes keys (fleet_sources_from_json): what turns Kubernetes on or off,
// where a relative kubeconfig is taken from, and the errors that name the key.
#include <gtest/gtest.h>

#include "cluster/fleet_sources.hpp"

namespace gf::cluster {
namespace {

TEST(FleetConfig, KubernetesTrueMeansTheUsualSearch) {
  auto s = fleet_sources_from_json(R"({"kubernetes": true})", "/etc/gpufleet/fleet.json");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(s->kubernetes.has_value());
  EXPECT_TRUE(s->kubernetes->kubeconfig.empty());
  EXPECT_TRUE(s->kubernetes->context.empty());
  EXPECT_FALSE(s->kubernetes->in_cluster);
  EXPECT_FALSE(s->kubernetes_off);
  EXPECT_FALSE(s->kube_nodes);  // the caller wires it
}

TEST(FleetConfig, KubeconfigIsRelativeToTheConfigFile) {
  auto s =
      fleet_sources_from_json(R"({"kubeconfig": "kube/admin.yaml", "context": "prod"})", "/etc/gpufleet/fleet.json");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(s->kubernetes.has_value());
  EXPECT_EQ(s->kubernetes->kubeconfig, "/etc/gpufleet/kube/admin.yaml");
  EXPECT_EQ(s->kubernetes->context, "prod");
  auto abs = fleet_sources_from_json(R"({"kubeconfig": "/root/.kube/config"})", "fleet.json");
  ASSERT_TRUE(abs);
  EXPECT_EQ(abs->kubernetes->kubeconfig, "/root/.kube/config");
  auto ic = fleet_sources_from_json(R"({"in_cluster": true})", "fleet.json");
  ASSERT_TRUE(ic);
  EXPECT_TRUE(ic->kubernetes && ic->kubernetes->in_cluster);
  auto not_ic = fleet_sources_from_json(R"({"in_cluster": false, "prometheus": "http://p:9090"})", "fleet.json");
  ASSERT_TRUE(not_ic);
  EXPECT_FALSE(not_ic->kubernetes.has_value());
}

TEST(FleetConfig, KubernetesFalseTurnsItOff) {
  FleetSources base;
  base.kubernetes.emplace();
  auto s = fleet_sources_from_json(R"({"kubernetes": false, "prometheus": "http://p:9090"})", "f.json", base);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->kubernetes.has_value());
  EXPECT_TRUE(s->kubernetes_off);
  auto both = fleet_sources_from_json(R"({"kubernetes": false, "context": "prod"})", "f.json");
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().message.find("kubernetes is false"), std::string::npos) << both.error().message;
}

TEST(FleetConfig, BadValuesNameTheKey) {
  for (const char* text :
       {R"({"kubernetes": "yes"})", R"({"in_cluster": 1})", R"({"kubeconfig": 3})", R"({"context": ""})"}) {
    auto s = fleet_sources_from_json(text, "f.json");
    ASSERT_FALSE(s) << text;
    EXPECT_EQ(s.error().message.rfind("f.json: ", 0), 0u) << s.error().message;
  }
  auto unknown = fleet_sources_from_json(R"({"kube": true})", "f.json");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("kubeconfig"), std::string::npos);  // the known keys are listed
}

TEST(FleetConfig, DescribeNamesWhereKubernetesReadsFrom) {
  FleetSources s;
  s.kube_nodes = [] { return Result<std::vector<core::KubeNode>>(std::vector<core::KubeNode>{}); };
  s.kube_description = "/root/.kube/config, context prod";
  ASSERT_FALSE(s.describe().empty());
  EXPECT_EQ(s.describe().front(), "kubernetes (/root/.kube/config, context prod)");
  EXPECT_TRUE(s.any());
}

}  // namespace
}  // namespace gf::cluster
