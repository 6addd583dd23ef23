// The pure halves of the Prometheus and agent sources: parsing answers, joining series into nodes,
// agent lists and documents. (Queries against a real Prometheus and real agents are integration tests.)
#include <gtest/gtest.h>

#include <stdexcept>

#include "cluster/agent_source.hpp"
#include "cluster/prometheus_source.hpp"
#include "support/prom_answer.hpp"
#include "wire/time.hpp"

namespace gf::cluster {
namespace {

using test::prom_answer_text;

// One dcgm-exporter series as Prometheus answers it.
std::string series(const std::string& host, int gpu, const std::string& uuid, const std::string& value,
                   const std::string& extra = "") {
  return R"({"metric":{"__name__":"X","gpu":")" + std::to_string(gpu) + R"(","UUID":")" + uuid +
         R"(","device":"nvidia)" + std::to_string(gpu) + R"(","modelName":"NVIDIA H100 80GB HBM3","Hostname":")" +
         host + "\"" + extra + R"(},"value":[1700000000.5,")" + value + "\"]}";
}

TEST(PrometheusParse, VectorAnswer) {
  auto r = parse_instant_query(prom_answer_text({series("n1", 0, "GPU-a", "37"), series("n1", 1, "GPU-b", "NaN")}));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);  // NaN dropped
  EXPECT_EQ((*r)[0].value, 37);
  EXPECT_EQ((*r)[0].timestamp_s, 1700000000.5);
  EXPECT_EQ((*r)[0].labels.at("Hostname"), "n1");
}

TEST(PrometheusParse, ErrorsSayWhat) {
  auto r = parse_instant_query(R"({"status":"error","errorType":"bad_data","error":"parse error at char 5"})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bad_data: parse error at char 5"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_instant_query("<html>"));
  EXPECT_FALSE(parse_instant_query("[]"));
  r = parse_instant_query(R"({"status":"success","data":{"resultType":"matrix","result":[]}})");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("matrix"), std::string::npos);
  EXPECT_FALSE(parse_instant_query(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})"));
  EXPECT_FALSE(parse_instant_query(
      R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}})"));
}

// The parser reads the answer as a stream: keys in any order, unknown members (warnings, infos, a
// native histogram's member) skipped whatever they hold, and the errors in the order of the checks.
TEST(PrometheusParse, StreamedAnyOrderAndErrorsInOrder) {
  auto r = parse_instant_query(
      R"({"warnings":[{"deep":[[1,{"x":null}]]}],"data":{"result":[{"value":[2,"7.5"],"extra":{"a":[1]},)"
      R"("metric":{"Hostname":"n9","gpu":"3","gpu":"4"}}],"resultType":"vector"},"status":"success"})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].value, 7.5);
  EXPECT_EQ((*r)[0].timestamp_s, 2);
  EXPECT_EQ((*r)[0].labels.size(), 2u);
  EXPECT_EQ((*r)[0].labels.at("gpu"), "4");  // a label sent twice keeps its last value
  EXPECT_EQ((*r)[0].labels.find("UUID"), nullptr);
  EXPECT_THROW((void)(*r)[0].labels.at("UUID"), std::out_of_range);

  const auto error_of = [](const std::string& body) {
    auto e = parse_instant_query(body);
    return e ? std::string("(parsed)") : e.error().message;
  };
  const std::string head = R"({"status":"success","data":{"resultType":"vector","result":[)";
  EXPECT_EQ(error_of(R"({"status":1})"), "the answer has no \"status\"");
  EXPECT_EQ(error_of(R"({"status":"error"})"), "Prometheus answered \"error\": (no errorType): (no error)");
  EXPECT_EQ(error_of(R"({"status":"success","data":[]})"), "the answer has no \"data\" object");
  EXPECT_EQ(error_of(R"({"status":"success","data":{"result":[]}})"), "expected resultType \"vector\", got none");
  EXPECT_EQ(error_of(R"({"status":"success","data":{"resultType":"vector","result":{}}})"),
            "the answer has no \"result\" array");
  EXPECT_EQ(error_of(head + "5]}}"), "a result entry is not an object");
  EXPECT_EQ(error_of(head + R"({"value":[1,"1"]}]}})"), "a result entry has no \"metric\" object");
  EXPECT_EQ(error_of(head + R"({"metric":{},"value":[1,"1",2]}]}})"), "a result entry has no [time, value] pair");
  EXPECT_EQ(error_of(head + R"({"metric":{},"value":[[],"1"]}]}})"), "a sample's time or value is not a number");
  // The first bad entry decides; within one entry the pair is checked before the labels.
  EXPECT_EQ(error_of(head + R"({"metric":{"a":{}},"value":[1]},{"metric":{}}]}})"),
            "a result entry has no [time, value] pair");
  EXPECT_EQ(error_of(head + R"({"metric":{"a":true},"value":[1,"2"]},5]}})"), "label \"a\" is not a string");
  // A dropped sample (NaN) is not looked at further.
  EXPECT_EQ(error_of(head + R"({"metric":{"a":true},"value":[1,"NaN"]}]}})"), "(parsed)");
  EXPECT_EQ(error_of(head + R"({"metric":{}, "value":[1,"1"]}]}} x)"), "the answer is not JSON");
}

PromAnswers answers_for(const std::string& label_key) {
  PromAnswers a;
  const auto p = [](const std::string& body) { return *parse_instant_query(body); };
  const std::string extra = label_key == "Hostname" ? "" : ",\"" + label_key + "\":\"k8s-node-1\"";
  a.utilization = p(prom_answer_text(
      {series("n1", 0, "GPU-a", "10", extra), series("n1", 1, "GPU-b", "90", extra), series("n2", 0, "GPU-c", "0")}));
  a.fb_used = p(prom_answer_text({series("n1", 0, "GPU-a", "1000", extra), series("n1", 1, "GPU-b", "70000", extra),
                                  series("n2", 0, "GPU-c", "5")}));
  a.fb_free = p(prom_answer_text({series("n1", 0, "GPU-a", "80000", extra), series("n1", 1, "GPU-b", "11000", extra),
                                  series("n2", 0, "GPU-c", "995")}));
  a.temperature = p(prom_answer_text({series("n1", 0, "GPU-a", "41", extra)}));
  // n1's GPUs were sampled at two times: the per-node answer (count_values) leaves it to the per-GPU one.
  const auto at = [&](const std::string& t) {
    return R"({"metric":{"Hostname":"n1","gpufleet_sample_time":")" + t + "\"" + extra + R"(},"value":[1,"1"]})";
  };
  a.sample_time = p(prom_answer_text({at("1700000000"), at("1700000010")}));
  a.gpu_sample_time = p(
      prom_answer_text({series("n1", 0, "GPU-a", "1700000000", extra), series("n1", 1, "GPU-b", "1700000010", extra)}));
  return a;
}

TEST(PrometheusJoin, OneNodePerHostnameGpusByUuid) {
  const auto f = join_answers(answers_for("Hostname"), "Hostname");
  ASSERT_EQ(f.nodes.size(), 2u);
  const auto& n1 = f.nodes[0];
  EXPECT_EQ(n1.node, "n1");
  EXPECT_EQ(n1.source, "prometheus");
  ASSERT_EQ(n1.gpus.size(), 2u);
  EXPECT_EQ(n1.gpus[1].index, 1u);
  EXPECT_EQ(n1.gpus[1].uuid, "GPU-b");
  EXPECT_EQ(n1.gpus[1].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(*n1.gpus[1].utilization_pct, 90);
  EXPECT_EQ(*n1.gpus[1].memory_used_mib, 70000);
  EXPECT_EQ(*n1.gpus[1].memory_total_mib, 81000);  // used + free
  EXPECT_EQ(*n1.gpus[0].temperature_c, 41);
  EXPECT_FALSE(n1.gpus[1].temperature_c);
  ASSERT_TRUE(n1.observed);  // the newest sample
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(n1.observed->time_since_epoch()).count(), 1700000010);
  // … and each GPU's own, for staleness per GPU.
  ASSERT_TRUE(n1.gpus[0].observed && n1.gpus[1].observed);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(n1.gpus[0].observed->time_since_epoch()).count(),
            1700000000);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(n1.gpus[1].observed->time_since_epoch()).count(),
            1700000010);
  EXPECT_FALSE(f.nodes[1].observed);
  EXPECT_FALSE(f.nodes[1].gpus[0].observed);
  EXPECT_TRUE(f.warnings.empty());
}

// A GPU exported per MIG instance (GPU_I_ID) has the sum of its instances' framebuffer; a GPU with a
// series of its own keeps that one, whatever its instances say (never both: counted twice).
TEST(PrometheusJoin, FramebufferOwnSeriesElseTheSumOfMigInstances) {
  const auto p = [](const std::string& body) { return *parse_instant_query(body); };
  const auto mig = [](const char* id) { return std::string(R"(,"GPU_I_ID":")") + id + "\""; };
  PromAnswers a;
  a.fb_used = p(prom_answer_text({series("n1", 0, "GPU-a", "100", mig("1")), series("n1", 0, "GPU-a", "200", mig("2")),
                                  series("n1", 1, "GPU-b", "1000"), series("n1", 1, "GPU-b", "50", mig("1"))}));
  a.fb_free = p(prom_answer_text({series("n1", 0, "GPU-a", "300", mig("1")), series("n1", 0, "GPU-a", "400", mig("2")),
                                  series("n1", 1, "GPU-b", "9000")}));
  const auto f = join_answers(a, "Hostname");
  ASSERT_EQ(f.nodes.size(), 1u);
  ASSERT_EQ(f.nodes[0].gpus.size(), 2u);
  EXPECT_EQ(*f.nodes[0].gpus[0].memory_used_mib, 300);
  EXPECT_EQ(*f.nodes[0].gpus[0].memory_total_mib, 1000);
  EXPECT_EQ(*f.nodes[0].gpus[1].memory_used_mib, 1000);
  EXPECT_EQ(*f.nodes[0].gpus[1].memory_total_mib, 10000);
}

TEST(PrometheusJoin, NodeLabelIsConfigurable) {
  const auto f = join_answers(answers_for("kubernetes_node"), "kubernetes_node");
  ASSERT_EQ(f.nodes.size(), 1u);
  EXPECT_EQ(f.nodes[0].node, "k8s-node-1");
  EXPECT_EQ(f.nodes[0].gpus.size(), 2u);
  ASSERT_EQ(f.warnings.size(), 1u);  // n2's series lack the label
  EXPECT_NE(f.warnings[0].find("have no 'kubernetes_node' label"), std::string::npos) << f.warnings[0];
}

TEST(PrometheusQuery, QueriesKeepOnlyTheLabelsUsed) {
  const auto q = prometheus_queries("kubernetes_node");
  ASSERT_EQ(q.size(), 7u);
  EXPECT_EQ(q[0], "max by (kubernetes_node, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_UTIL)");
  EXPECT_EQ(q[2], "max by (kubernetes_node, gpu, UUID, GPU_I_ID) (DCGM_FI_DEV_FB_FREE)");
  // per node; per GPU for the nodes that answer leaves undecided
  EXPECT_EQ(q[5], "count_values by (kubernetes_node) (\"gpufleet_sample_time\", timestamp(DCGM_FI_DEV_GPU_UTIL))");
  // Without display metrics (cluster select): the same queries less temperature and power.
  const auto ranked = prometheus_queries("kubernetes_node", false);
  EXPECT_EQ(ranked, (std::vector<std::string>{q[0], q[1], q[2], q[5], q[6]}));
  EXPECT_EQ(gpu_sample_time_query("kubernetes_node", {}),
            "max by (kubernetes_node, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL))");
  EXPECT_TRUE(valid_label_name("Hostname"));
  EXPECT_TRUE(valid_label_name("_a9"));
  EXPECT_FALSE(valid_label_name("9a"));
  EXPECT_FALSE(valid_label_name("node) or vector(1"));
  EXPECT_FALSE(valid_label_name(""));
  PrometheusOptions o;
  o.url = "http://127.0.0.1:1";
  o.node_label = "a-b";
  auto r = query_prometheus(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a Prometheus label name"), std::string::npos) << r.error().message;
  o.node_label = std::string(kSampleTimeLabel);  // count_values' own label
  EXPECT_FALSE(query_prometheus(o));
}

TEST(PrometheusQuery, UnreachableNamesTheUrl) {
  PrometheusOptions o;
  o.url = "http://127.0.0.1:1";
  o.timeout = std::chrono::milliseconds(2000);
  auto r = query_prometheus(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("prometheus http://127.0.0.1:1: unreachable"), std::string::npos)
      << r.error().message;
  o.url = "ftp://x";
  EXPECT_FALSE(query_prometheus(o));
}

TEST(AgentList, CommentsBlanksAndBadLines) {
  auto r = parse_agent_list("# fleet\n\nhttp://gpu-1:9401/\n  https://gpu-2:9401 # rack 2\nhttp://gpu-1:9401\n",
                            "agents.txt");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"http://gpu-1:9401", "https://gpu-2:9401"}));
  r = parse_agent_list("http://a:1\ngpu-3:9401\n", "agents.txt");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("agents.txt:2:"), std::string::npos) << r.error().message;
  EXPECT_FALSE(parse_agent_list("http://\n", "f"));
  EXPECT_FALSE(normalize_agent_url("http://a b:1"));
  EXPECT_EQ(url_host("http://[::1]:9401/x"), "::1");
  EXPECT_EQ(url_host("https://user@gpu-9/x"), "gpu-9");
}

TEST(AgentDocument, NodeGpusAndTime) {
  const std::string doc = R"({"timestamp":"2026-01-02T03:04:05.250000Z","node":"gpu-box-1","backend":"sim","gpus":[
    {"index":0,"name":"H100","uuid":"GPU-0","utilization":37,"memory_utilization":80,"memory":{"total":81559,"used":12345,"free":69214},
     "temperature":40,"power_usage":120.5},
    {"index":1,"name":"H100","uuid":"GPU-1","utilization":null,"memory":{"total":81559,"used":null},"temperature":null}]})";
  auto m = parse_agent_document(doc, "http://10.0.0.1:9401");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->node, "gpu-box-1");
  EXPECT_EQ(m->source, "agent");
  EXPECT_EQ(m->agent_url, "http://10.0.0.1:9401");
  ASSERT_EQ(m->gpus.size(), 2u);
  EXPECT_EQ(*m->gpus[0].utilization_pct, 37);  // not memory_utilization (bandwidth)
  EXPECT_EQ(*m->gpus[0].memory_used_mib, 12345);
  EXPECT_EQ(*m->gpus[0].memory_total_mib, 81559);
  EXPECT_EQ(*m->gpus[0].power_w, 120.5);
  EXPECT_FALSE(m->gpus[1].utilization_pct);
  EXPECT_FALSE(m->gpus[1].memory_used_mib);
  ASSERT_TRUE(m->observed);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(m->observed->time_since_epoch()).count(),
            1767323045250);
  EXPECT_EQ(m->gpu_resource, "");  // the simulator names no vendor
  // Without "node": the URL's host.
  m = parse_agent_document(R"({"gpus":[]})", "http://gpu-7:9401");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->node, "gpu-7");
  // The backend that read the GPUs says whose they are.
  for (auto [backend, resource] : {std::pair{"nvml", "nvidia.com/gpu"}, std::pair{"nvidia-smi", "nvidia.com/gpu"},
                                   std::pair{"amdgpu", "amd.com/gpu"}, std::pair{"other", ""}}) {
    m = parse_agent_document(std::string(R"({"backend":")") + backend + R"(","gpus":[]})", "http://x");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->gpu_resource, resource) << backend;
  }
  EXPECT_FALSE(parse_agent_document(R"({"gpus":{}})", "http://x"));
  EXPECT_FALSE(parse_agent_document(R"({"gpus":[{"index":-1}]})", "http://x"));
  EXPECT_FALSE(parse_agent_document(R"({"timestamp":"yesterday","gpus":[]})", "http://x"));
  EXPECT_FALSE(wire::parse_iso8601("2026-02-30T00:00:00Z"));
}

TEST(AgentFetch, AnUnreachableAgentIsItsNodesProblemOnly) {
  const auto r = fetch_agents({"http://127.0.0.1:1", "http://127.0.0.1:2"}, std::chrono::milliseconds(2000));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].node, "127.0.0.1");
  EXPECT_FALSE(r[0].error.empty());
  EXPECT_NE(r[1].error.find("http://127.0.0.1:2"), std::string::npos) << r[1].error;
}

TEST(AgentFetch, CredentialsInTheUrlAreNeverShown) {
  const auto r = fetch_agents({"http://u:AGENTPW2@127.0.0.1:1"}, std::chrono::milliseconds(2000));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].agent_url, "http://127.0.0.1:1");
  EXPECT_EQ(r[0].error.rfind("http://127.0.0.1:1: ", 0), 0u) << r[0].error;
  EXPECT_EQ(r[0].error.find("AGENTPW2"), std::string::npos) << r[0].error;
  EXPECT_EQ(r[0].error.find("u:"), std::string::npos) << r[0].error;
  auto doc = parse_agent_document(R"({"node":"n","gpus":[]})", "https://user:pw@gpu-1:9401");
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_EQ(doc->agent_url, "https://gpu-1:9401");
  for (const char* url : {"ftp://u:AGENTPW2@h", "http://u:AGENT/PW2@h:1"}) {  // not http; a '/' in the password
    auto bad = normalize_agent_url(url);
    ASSERT_FALSE(bad) << url;
    EXPECT_EQ(bad.error().message.find("AGENT"), std::string::npos) << bad.error().message;
  }
}

TEST(PrometheusQuery, CredentialsInTheUrlAreNeverShown) {
  PrometheusOptions o;
  o.url = "http://promuser:PROM-SECRET@127.0.0.1:1/";
  o.timeout = std::chrono::milliseconds(2000);
  auto r = query_prometheus(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("prometheus http://127.0.0.1:1: unreachable"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("PROM-SECRET"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("promuser"), std::string::npos) << r.error().message;
  o.url = "http://promuser:PROM/SECRET@127.0.0.1:1/";
  r = query_prometheus(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("percent-encode"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("promuser"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gf::cluster
