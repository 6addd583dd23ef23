// The fleet config file's Kubernetes keys (fleet_sources_from_json): what turns Kubernetes on or off,
// where a relative kubeconfig is taken from, and the errors that name the key. Also what the sources
// say about themselves: no credentials in describe(), "insecure" where they are reached unsafely, and
// Prometheus' token file (read, checked, sent as a bearer token).
#include <sys/stat.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "cluster/fleet_sources.hpp"
#include "fakes/kube_standin.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

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

TEST(FleetConfig, DescribeShowsNoCredentials) {
  auto s = fleet_sources_from_json(
      R"({"prometheus": "http://promuser:PROM-SECRET@127.0.0.1:9090/", "agents": ["http://u:AGENTPW2@127.0.0.1:1"]})",
      "/etc/gpufleet/fleet.json");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->prometheus_url, "http://promuser:PROM-SECRET@127.0.0.1:9090/");  // the request still has them
  const auto d = s->describe();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "prometheus http://127.0.0.1:9090/ (node label Hostname; insecure)");
  EXPECT_EQ(d[1], "1 agent(s)");
  // A user name and password over plain http is a credential in clear.
  EXPECT_EQ(s->prometheus_insecure(),
            "sending the URL's user name and password over plain http to http://127.0.0.1:9090/ (prometheus)");
  s->prometheus_url = "https://promuser:PROM-SECRET@prom:9090";
  EXPECT_EQ(s->prometheus_insecure(), "");
  EXPECT_EQ(s->describe()[0], "prometheus https://prom:9090 (node label Hostname)");
}

TEST(FleetConfig, InsecureSourcesAreMarkedAndWarnedAbout) {
  FleetSources s;
  s.kube_nodes = [] { return Result<std::vector<core::KubeNode>>(std::vector<core::KubeNode>{}); };
  s.kube_description = "/k/config, context c";
  s.kube_insecure = "TLS verification is off for https://k:6443 (kubernetes: insecure-skip-tls-verify)";
  s.prometheus_url = "http://prom:9090";
  s.prometheus_token_file = "/run/secrets/prom-token";
  const auto d = s.describe();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "kubernetes (/k/config, context c; insecure)");
  EXPECT_EQ(d[1], "prometheus http://prom:9090 (node label Hostname; insecure)");
  const auto w = s.insecure_warnings();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], s.kube_insecure);
  EXPECT_EQ(w[1], "sending a bearer token over plain http to http://prom:9090 (prometheus)");

  // With each failed round, the warnings of the sources that failed.
  core::FleetFacts f;
  EXPECT_TRUE(insecure_warnings_for(s, f).empty());
  f.kube_error = "kubernetes: cannot reach the API server";
  f.source_errors = {*f.kube_error};
  EXPECT_EQ(insecure_warnings_for(s, f), std::vector<std::string>{s.kube_insecure});
  f.kube_error.reset();
  f.source_errors = {"prometheus http://prom:9090: unreachable: …"};
  EXPECT_EQ(insecure_warnings_for(s, f), std::vector<std::string>{w[1]});
}

TEST(FleetConfig, PrometheusTokenFileIsRelativeToTheConfigFile) {
  auto s = fleet_sources_from_json(R"({"prometheus": "https://prom:9090", "prometheus_token_file": "prom.token"})",
                                   "/etc/gpufleet/fleet.json");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->prometheus_token_file, "/etc/gpufleet/prom.token");
  EXPECT_FALSE(fleet_sources_from_json(R"({"prometheus_token_file": ""})", "f.json"));
  EXPECT_FALSE(fleet_sources_from_json(R"({"prometheus_token_file": 3})", "f.json"));
}

TEST(FleetConfig, PrometheusTokenFileIsCheckedAtStart) {
  test::TempDir dir;
  FleetSources s;
  s.prometheus_url = "https://prom:9090";
  EXPECT_TRUE(check_prometheus_token(s));  // no token file: nothing to check
  s.prometheus_token_file = (dir.path() / "missing").string();
  auto missing = check_prometheus_token(s);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(s.prometheus_token_file), std::string::npos) << missing.error().message;
  EXPECT_EQ(missing.error().message.find('\n'), std::string::npos);

  s.prometheus_token_file = test::write_file(dir / "empty", "\n");
  auto empty = check_prometheus_token(s);
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("is empty"), std::string::npos) << empty.error().message;

  s.prometheus_token_file = test::write_file(dir / "token", "  PROM-TOKEN \nsecond line\n");
  ASSERT_EQ(::chmod(s.prometheus_token_file.c_str(), 0600), 0);
  auto ok = check_prometheus_token(s);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->empty());
  EXPECT_EQ(read_prometheus_token(s.prometheus_token_file).value(), "PROM-TOKEN");

  // Readable by others: said, not refused. Writable by others: refused (they would choose the token).
  ASSERT_EQ(::chmod(s.prometheus_token_file.c_str(), 0644), 0);
  ok = check_prometheus_token(s);
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_NE(ok->front().find("can be read by other users"), std::string::npos) << ok->front();
  ASSERT_EQ(::chmod(s.prometheus_token_file.c_str(), 0666), 0);
  auto open = check_prometheus_token(s);
  ASSERT_FALSE(open);
  EXPECT_NE(open.error().message.find("writable by others"), std::string::npos) << open.error().message;

  s.prometheus_url.clear();
  EXPECT_FALSE(check_prometheus_token(s));  // a token for no Prometheus is a mistake
}

TEST(FleetConfig, PrometheusTokenIsSentAsBearer) {
  test::TempDir dir;
  fakes::KubeStandin prom;  // any HTTP server that records the Authorization header will do
  prom.set_canned_answer(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  FleetSources s;
  s.prometheus_url = prom.url();
  s.prometheus_token_file = test::write_file(dir / "token", "PROM-TOKEN\n");
  ASSERT_EQ(::chmod(s.prometheus_token_file.c_str(), 0600), 0);
  auto f = gather_fleet(s, std::chrono::system_clock::now());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_TRUE(f->source_errors.empty()) << f->source_errors.front();
  const auto reqs = prom.requests();
  ASSERT_FALSE(reqs.empty());
  for (const auto& r : reqs) {
    EXPECT_EQ(r.path, "/api/v1/query");
    EXPECT_EQ(r.authorization, "Bearer PROM-TOKEN");
  }
  // A token file that went away is that round's Prometheus error, not the whole round's.
  std::filesystem::remove(s.prometheus_token_file);
  f = gather_fleet(s, std::chrono::system_clock::now());
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_EQ(f->source_errors.size(), 1u);
  EXPECT_EQ(f->source_errors[0].rfind("prometheus " + prom.url() + ": cannot read the token file", 0), 0u)
      << f->source_errors[0];
}

// `cluster select` turns display_metrics off: temperature and power (shown by nodes/gpus, never ranked on)
// are not asked, and every other answer still lands on its own metric (the health query comes fifth, not
// seventh). The stand-in gives every query the same series: a GPU whose XID, utilization, memory,
// temperature and power all read 79.
TEST(PrometheusQuery, SelectAsksNoTemperatureNorPower) {
  fakes::KubeStandin prom;
  prom.set_canned_answer(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"n1","gpu":"0",)"
      R"("UUID":"GPU-a","__name__":"DCGM_FI_DEV_XID_ERRORS"},"value":[1700000000,"79"]}]}})");
  for (const bool display : {true, false}) {
    FleetSources s;
    s.prometheus_url = prom.url();
    s.display_metrics = display;
    const auto before = prom.requests().size();
    auto f = gather_fleet(s, std::chrono::system_clock::now());
    ASSERT_TRUE(f) << f.error().message;
    ASSERT_EQ(f->metrics.size(), 1u);
    ASSERT_EQ(f->metrics[0].gpus.size(), 1u);
    const auto& g = f->metrics[0].gpus[0];
    EXPECT_EQ(g.utilization_pct, 79);
    EXPECT_EQ(g.memory_used_mib, 79);
    EXPECT_EQ(g.memory_total_mib, 158);
    EXPECT_EQ(g.unhealthy, "XID 79 (GPU has fallen off the bus)");
    EXPECT_EQ(g.temperature_c.has_value(), display);
    EXPECT_EQ(g.power_w.has_value(), display);
    std::vector<std::string> asked;
    const auto reqs = prom.requests();
    for (std::size_t i = before; i < reqs.size(); ++i) asked.push_back(reqs[i].query.at("query"));
    // The first round, and the per-GPU sample times (the answer has no per-node time: undecided).
    EXPECT_EQ(asked.size(), display ? 8u : 6u);
    const auto names = [&](const char* metric) {
      return std::count_if(asked.begin(), asked.end(),
                           [&](const std::string& q) { return q.find(metric) != std::string::npos; });
    };
    EXPECT_EQ(names("DCGM_FI_DEV_GPU_TEMP"), display ? 1 : 0);
    EXPECT_EQ(names("DCGM_FI_DEV_POWER_USAGE"), display ? 1 : 0);
    EXPECT_EQ(names("DCGM_FI_DEV_FB_FREE"), 1);
    EXPECT_EQ(names("DCGM_FI_DEV_XID_ERRORS"), 1);
  }
}

}  // namespace
}  // namespace gf::cluster
