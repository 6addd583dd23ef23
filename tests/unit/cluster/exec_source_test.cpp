// pods/exec as a fleet source: the channel decoder, the Status, the choice of pods, and the real
// WebSocket client against the stand-in API server (tests/fakes/kube_standin.*), both subprotocols.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cluster/exec_protocol.hpp"
#include "cluster/exec_source.hpp"
#include "cluster/fleet_sources.hpp"
#include "fakes/exec_fixture.hpp"
#include "fakes/kube_standin.hpp"
#include "fakes/tls_front.hpp"
#include "platform/subprocess.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace std::chrono_literals;
using gf::cluster::ExecStreams;
namespace nsmi = gf::backends::nvidia_smi;

std::string exec_msg(unsigned char channel, std::string_view data) {
  return std::string(1, static_cast<char>(channel)) + std::string(data);
}

std::string exec_read_fixture(const std::string& name) {
  return gf::test::slurp(std::string(GF_FIXTURES_DIR) + "/nvidia_smi/" + name);
}

TEST(ExecStreamsTest, ReassemblesStdoutAndStderrAndReadsTheStatus) {
  ExecStreams s(true);
  for (unsigned char c : {1, 2, 3}) ASSERT_TRUE(s.feed(exec_msg(c, "")));  // the opening channel bytes
  ASSERT_TRUE(s.feed(""));
  ASSERT_TRUE(s.feed(exec_msg(1, "0, GPU-a")));
  ASSERT_TRUE(s.feed(exec_msg(1, "bc, x\n")));
  ASSERT_TRUE(s.feed(exec_msg(2, "warn")));
  ASSERT_TRUE(s.feed(exec_msg(255, "\x01")));
  ASSERT_TRUE(s.feed(exec_msg(3, R"({"metadata":{},"status":"Success"})")));
  EXPECT_EQ(s.out(), "0, GPU-abc, x\n");
  EXPECT_EQ(s.err(), "warn");
  EXPECT_EQ(s.closed_channels(), 1u << 1);
  auto st = s.finish();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_TRUE(st->success);
  EXPECT_EQ(st->exit_code, 0);
}

TEST(ExecStreamsTest, RejectsWhatTheProtocolDoesNotAllow) {
  ExecStreams v4(false);
  EXPECT_FALSE(v4.feed(exec_msg(255, "\x01")));  // control messages are v5's
  ExecStreams v5(true);
  EXPECT_FALSE(v5.feed(exec_msg(255, "")));          // close without its channel
  EXPECT_FALSE(v5.feed(exec_msg(255, "\x01\x02")));  // or with two
  EXPECT_FALSE(v5.feed(exec_msg(7, "x")));           // unknown channel
  EXPECT_TRUE(v5.feed(exec_msg(0, "ignored")));      // stdin and resize are the client's: ignored
  EXPECT_TRUE(v5.feed(exec_msg(4, "{}")));
  EXPECT_TRUE(v5.out().empty());
  EXPECT_FALSE(v5.finish());  // no status came
  ExecStreams big(true);
  EXPECT_FALSE(big.feed(exec_msg(3, std::string(70 * 1024, 'x'))));
}

TEST(ExecStreamsTest, CutsOutputAtTheBound) {
  ExecStreams s(true, 10);
  ASSERT_TRUE(s.feed(exec_msg(1, "0123456789abc")));
  ASSERT_TRUE(s.feed(exec_msg(1, "more")));
  EXPECT_EQ(s.out(), "0123456789");
  EXPECT_TRUE(s.out_truncated());
  EXPECT_FALSE(s.err_truncated());
}

TEST(ExecStatusTest, FailuresWithAndWithoutAnExitCode) {
  auto st = gf::cluster::parse_exec_status(
      R"({"status":"Failure","message":"command terminated with non-zero exit code","reason":"NonZeroExitCode",)"
      R"("details":{"causes":[{"reason":"ExitCode","message":"9"}]}})");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_FALSE(st->success);
  EXPECT_EQ(st->exit_code, 9);
  EXPECT_EQ(st->reason, "NonZeroExitCode");
  st = gf::cluster::parse_exec_status(R"({"status":"Failure","reason":"InternalError","message":"no\u001b[31m"})");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->exit_code);
  EXPECT_EQ(st->message, "no\\x1b[31m");  // escaped for the terminal
  EXPECT_FALSE(gf::cluster::parse_exec_status("not json"));
  EXPECT_FALSE(gf::cluster::parse_exec_status(R"({"status":"Maybe"})"));
  EXPECT_FALSE(gf::cluster::parse_exec_status(
      R"({"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"300"}]}})"));
}

TEST(ExecTargetsTest, OneRunningGpuPodPerNvidiaNode) {
  std::vector<gf::core::KubeNode> nodes(4);
  nodes[0].name = "n0", nodes[0].gpu_resource = "nvidia.com/gpu";
  nodes[1].name = "n1", nodes[1].gpu_resource = "nvidia.com/gpu";
  nodes[2].name = "n2", nodes[2].gpu_resource = "amd.com/gpu";
  nodes[3].name = "n3", nodes[3].gpu_resource = "nvidia.com/gpu";
  auto pod = [](std::string ns, std::string name, std::string node, bool running, std::string resource) {
    gf::cluster::PodGpuRequest p;
    p.namespace_ = std::move(ns), p.name = std::move(name), p.node = std::move(node), p.phase = "Running";
    p.gpus[resource] = 1;
    p.gpu_container = "cuda";
    p.gpu_container_running = running;
    return p;
  };
  const std::vector<gf::cluster::PodGpuRequest> pods = {
      pod("z", "late", "n0", true, "nvidia.com/gpu"), pod("a", "early", "n0", true, "nvidia.com/gpu"),
      pod("a", "crashing", "n1", false, "nvidia.com/gpu"), pod("a", "amd", "n2", true, "amd.com/gpu"),
      pod("b", "ok", "n3", true, "nvidia.com/gpu")};
  const auto t = gf::cluster::choose_exec_targets(nodes, pods);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].node, "n0");
  EXPECT_EQ(t[0].namespace_ + "/" + t[0].pod, "a/early");  // first by namespace and name
  EXPECT_EQ(t[0].container, "cuda");
  EXPECT_EQ(t[1].node, "n3");
}

TEST(ExecTargetsTest, TheCommandIsTheBackendsQuery) {
  const auto cmd = gf::cluster::exec_nvidia_smi_command(nsmi::current_fields());
  ASSERT_EQ(cmd.size(), 3u);
  EXPECT_EQ(cmd[0], "nvidia-smi");
  EXPECT_EQ(cmd[1], "--query-gpu=" + nsmi::join_fields(nsmi::current_fields()));
  EXPECT_EQ(cmd[2], "--format=csv,noheader,nounits");
  // The security note in deploy/README.md names the command exactly: it must not drift from the code.
  const std::string doc = gf::test::slurp(std::string(GF_SOURCE_DIR) + "/deploy/README.md");
  EXPECT_NE(doc.find("`" + cmd[0] + " " + cmd[1] + " " + cmd[2] + "`"), std::string::npos);
}

// The client and the source against the stand-in.
struct ExecStandinTest : ::testing::Test {
  gf::fakes::KubeStandinConfig cfg;
  std::unique_ptr<gf::fakes::KubeStandin> kube;
  gf::cluster::KubeConfig config;
  std::string csv = exec_read_fixture("query-gpu-normal.csv");

  void start() {
    cfg.token = "t0ken";
    kube = std::make_unique<gf::fakes::KubeStandin>(cfg);
    config.server = kube->url();
    config.bearer_token = "t0ken";
    config.source = "test";
  }
  gf::cluster::ExecRequest request(const std::string& pod) const {
    gf::cluster::ExecRequest rq;
    rq.namespace_ = "train";
    rq.pod = pod;
    rq.container = "cuda";
    rq.command = gf::cluster::exec_nvidia_smi_command(nsmi::current_fields());
    rq.timeout = 3s;
    return rq;
  }
  gf::cluster::ExecRunner runner() const {
    return [this](const gf::cluster::ExecRequest& rq) { return gf::cluster::exec_in_pod(config, rq); };
  }
};

TEST_F(ExecStandinTest, V5IsChosenAndTheOutputComesBack) {
  ASSERT_FALSE(csv.empty());
  cfg.exec["train/job"] = {csv, "", 0, "", false, ""};
  start();
  auto r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->protocol, "v5.channel.k8s.io");
  EXPECT_EQ(r->out, csv);  // sent in 64-byte frames, reassembled
  EXPECT_TRUE(r->status.success);
  const auto calls = kube->exec_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].offered, "v5.channel.k8s.io, v4.channel.k8s.io");
  EXPECT_EQ(calls[0].container, "cuda");
  EXPECT_EQ(calls[0].command, request("job").command);  // exactly the fixed command, arguments intact
}

TEST_F(ExecStandinTest, AnOlderServerGetsV4) {
  cfg.exec["train/job"] = {csv, "", 0, "", false, ""};
  cfg.exec_protocols = {"v4.channel.k8s.io"};
  start();
  auto r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->protocol, "v4.channel.k8s.io");
  EXPECT_EQ(r->out, csv);
  // A server that speaks neither refuses the upgrade: one error line with its status.
  cfg.exec_protocols = {"v3.channel.k8s.io"};
  start();
  r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("400"), std::string::npos) << r.error().message;
}

TEST_F(ExecStandinTest, FailuresAreStatusesOrErrors) {
  cfg.exec["train/exit"] = {"", "NVIDIA-SMI has failed\n", 9, "", false, ""};
  start();
  auto r = gf::cluster::exec_in_pod(config, request("exit"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->status.success);
  EXPECT_EQ(r->status.exit_code, 9);
  EXPECT_EQ(r->err, "NVIDIA-SMI has failed\n");
  r = gf::cluster::exec_in_pod(config, request("no-smi"));  // a pod whose image has no nvidia-smi
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->status.success);
  EXPECT_NE(r->status.message.find("executable file not found"), std::string::npos);
  config.bearer_token = "wrong";
  r = gf::cluster::exec_in_pod(config, request("exit"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("401"), std::string::npos) << r.error().message;
}

TEST_F(ExecStandinTest, ForbiddenNamesThePermission) {
  cfg.forbid_exec = true;
  start();
  auto r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("403"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("pods/exec"), std::string::npos) << r.error().message;
}

TEST_F(ExecStandinTest, TlsIsSetUpFromTheKubeconfigAndItsFailuresAreOneLine) {
  start();
  // An unreadable CA file stops before any connection.
  config.server = "https://127.0.0.1:" + std::to_string(kube->port());
  config.tls.ca_file = "/nonexistent/ca.crt";
  auto r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("certificate-authority /nonexistent/ca.crt"), std::string::npos)
      << r.error().message;
  // TLS to a server that speaks plain HTTP: the handshake fails, named as TLS, within the timeout.
  config.tls = {};
  config.tls.insecure_skip_verify = true;
  r = gf::cluster::exec_in_pod(config, request("job"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("TLS with the API server"), std::string::npos) << r.error().message;
  EXPECT_TRUE(kube->exec_calls().empty());
}

// A self-signed certificate and key (PEM) for `san` ("IP:127.0.0.1"), made by the openssl tool.
struct ExecCert {
  std::string cert, key;
};
ExecCert exec_make_cert(const std::string& name, const std::string& san) {
  const gf::test::TempDir dir;
  const auto cert = (dir / (name + ".crt")).string(), key = (dir / (name + ".key")).string();
  auto r = gf::platform::run_process({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                                      "/CN=" + name, "-addext", "subjectAltName=" + san, "-keyout", key, "-out", cert},
                                     gf::platform::RunOptions{30s});
  EXPECT_TRUE(r && r->exit_code == 0) << (r ? r->err : r.error().message);
  return ExecCert{gf::test::slurp(cert), gf::test::slurp(key)};
}

TEST_F(ExecStandinTest, OverRealTlsWithTheKubeconfigsCaNameAndClientCertificate) {
  cfg.exec["train/job"] = {csv, "", 0, "", false, ""};
  start();
  const auto server = exec_make_cert("apiserver", "IP:127.0.0.1");
  const auto other = exec_make_cert("someone-else", "IP:127.0.0.1");
  const auto wrong_name = exec_make_cert("wrong-name", "DNS:api.example");
  const auto client = exec_make_cert("gpufleet", "DNS:gpufleet");
  ASSERT_FALSE(server.cert.empty() || other.cert.empty() || wrong_name.cert.empty() || client.cert.empty());
  {
    gf::fakes::TlsFront front(kube->port(), server.cert, server.key);
    config.server = front.url();
    config.tls.ca_pem = server.cert;  // certificate-authority-data
    auto r = gf::cluster::exec_in_pod(config, request("job"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->protocol, "v5.channel.k8s.io");
    EXPECT_EQ(r->out, csv);
    config.tls.ca_pem = other.cert;  // a CA that did not sign it
    r = gf::cluster::exec_in_pod(config, request("job"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("TLS with the API server"), std::string::npos) << r.error().message;
  }
  {
    gf::fakes::TlsFront front(kube->port(), wrong_name.cert, wrong_name.key);
    config.server = front.url();
    config.tls.ca_pem = wrong_name.cert;  // trusted, but for another name than 127.0.0.1
    auto r = gf::cluster::exec_in_pod(config, request("job"));
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("TLS with the API server"), std::string::npos) << r.error().message;
    config.tls.insecure_skip_verify = true;  // insecure-skip-tls-verify: accepted, as kubectl does
    r = gf::cluster::exec_in_pod(config, request("job"));
    ASSERT_TRUE(r) << r.error().message;
    config.tls.insecure_skip_verify = false;
  }
  {
    gf::fakes::TlsFront front(kube->port(), server.cert, server.key, client.cert);  // wants a client certificate
    config.server = front.url();
    config.tls.ca_pem = server.cert;
    auto r = gf::cluster::exec_in_pod(config, request("job"));
    EXPECT_FALSE(r);                           // none given
    config.tls.client_cert_pem = client.cert;  // client-certificate-data, client-key-data
    config.tls.client_key_pem = client.key;
    r = gf::cluster::exec_in_pod(config, request("job"));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->out, csv);
  }
}

TEST_F(ExecStandinTest, AHungPodCostsItsTimeoutAlone) {
  cfg.exec["train/hang"] = {"", "", 0, "", true, ""};
  start();
  auto rq = request("hang");
  rq.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = gf::cluster::exec_in_pod(config, rq);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("within 300 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // bounded, not the stand-in's forever
}

TEST_F(ExecStandinTest, TheSourceParsesEveryNodeAndKeepsGoingPastFailures) {
  const unsigned n = 12;
  for (unsigned i = 0; i < n; ++i) cfg.exec["train/" + gf::fakes::exec_pod_name(i)] = {csv, "", 0, "", false, ""};
  cfg.exec["train/" + gf::fakes::exec_pod_name(3)] = {"", "", 0, "", true, ""};  // hangs
  cfg.exec.erase("train/" + gf::fakes::exec_pod_name(5));                        // no nvidia-smi
  // An older driver: the newest field list is refused, the next one answers.
  cfg.exec["train/" + gf::fakes::exec_pod_name(7)] = {csv, "", 0, "", false, "clocks_event_reasons.active"};
  start();
  std::vector<gf::cluster::ExecTarget> targets;
  for (unsigned i = 0; i < n; ++i)
    targets.push_back({gf::fakes::exec_node_name(i), "train", gf::fakes::exec_pod_name(i), "cuda"});
  gf::cluster::ExecSourceOptions o;
  o.parallel = 3;
  o.timeout = 500ms;
  const auto at = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  const auto m = gf::cluster::exec_fleet(targets, runner(), o, [at] { return at; });
  ASSERT_EQ(m.size(), n);
  EXPECT_LE(kube->max_concurrent_execs(), 3u);  // the bound holds
  for (unsigned i = 0; i < n; ++i) {
    EXPECT_EQ(m[i].node, gf::fakes::exec_node_name(i));
    EXPECT_EQ(m[i].source, "exec");
    if (i == 3 || i == 5) continue;
    ASSERT_TRUE(m[i].error.empty()) << i << ": " << m[i].error;
    ASSERT_EQ(m[i].gpus.size(), 8u);  // the recorded H100 box
    EXPECT_EQ(m[i].gpus[0].utilization_pct, 87.0);
    EXPECT_EQ(m[i].gpus[0].memory_used_mib, 40961.0);
    EXPECT_EQ(m[i].gpus[0].memory_total_mib, 81559.0);
    EXPECT_EQ(m[i].gpus[2].utilization_pct, 100.0);
    EXPECT_EQ(m[i].gpus[1].model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(m[i].observed, at);
  }
  EXPECT_NE(m[3].error.find("within 500 ms"), std::string::npos) << m[3].error;
  EXPECT_NE(m[5].error.find("executable file not found"), std::string::npos) << m[5].error;
  // Node 7 was asked twice: the current list, then the pre-535 one.
  std::size_t asked7 = 0;
  for (const auto& c : kube->exec_calls()) asked7 += c.pod == "train/" + gf::fakes::exec_pod_name(7);
  EXPECT_EQ(asked7, 2u);
}

TEST(ExecConfigTest, KeysAndBounds) {
  auto s = gf::cluster::fleet_sources_from_json(
      R"({"kubernetes": true, "exec_nvidia_smi": true, "exec_parallel": 16, "exec_timeout_s": 2.5})", "f.json");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->exec_nvidia_smi);
  EXPECT_EQ(s->exec_parallel, 16u);
  EXPECT_EQ(s->exec_timeout, 2500ms);
  EXPECT_FALSE(gf::cluster::fleet_sources_from_json(R"({"exec_parallel": 0})", "f.json"));
  EXPECT_FALSE(gf::cluster::fleet_sources_from_json(R"({"exec_parallel": 2.5})", "f.json"));
  EXPECT_FALSE(gf::cluster::fleet_sources_from_json(R"({"exec_nvidia_smi": "yes"})", "f.json"));
  const auto off = gf::cluster::fleet_sources_from_json(R"({"kubernetes": true})", "f.json");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->exec_nvidia_smi);  // off unless asked for
}

TEST(ExecGatherTest, ExecRunsOnlyWhereNoOtherSourceHasMetrics) {
  gf::cluster::FleetSources s;
  s.kube_nodes = [] {
    std::vector<gf::core::KubeNode> nodes(3);
    for (unsigned i = 0; i < 3; ++i) nodes[i].name = "n" + std::to_string(i), nodes[i].gpu_resource = "nvidia.com/gpu";
    return gf::Result<std::vector<gf::core::KubeNode>>(nodes);
  };
  std::vector<std::string> asked;
  s.exec_metrics = [&asked](const std::vector<gf::core::KubeNode>& nodes) {
    std::vector<gf::core::NodeMetrics> out;
    for (const auto& n : nodes) {
      asked.push_back(n.name);
      gf::core::NodeMetrics m;
      m.node = n.name, m.source = "exec";
      if (n.name == "n2") m.error = "exec in pod a/b: refused";
      out.push_back(m);
    }
    return gf::Result<std::vector<gf::core::NodeMetrics>>(out);
  };
  auto f = gf::cluster::gather_fleet(s, std::chrono::system_clock::now());
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(asked, (std::vector<std::string>{"n0", "n1", "n2"}));
  ASSERT_EQ(f->metrics.size(), 3u);
  EXPECT_TRUE(f->metrics[2].error.find("refused") != std::string::npos);  // failures last
  s.exec_metrics = [](const std::vector<gf::core::KubeNode>&) -> gf::Result<std::vector<gf::core::NodeMetrics>> {
    return gf::make_error("the API server forbids GET /api/v1/pods");
  };
  f = gf::cluster::gather_fleet(s, std::chrono::system_clock::now());
  ASSERT_TRUE(f);
  ASSERT_EQ(f->source_errors.size(), 1u);
  EXPECT_EQ(f->source_errors[0].rfind("exec: ", 0), 0u);
  EXPECT_TRUE(f->kube.has_value());  // the nodes still count
}

}  // namespace
