// `gpufleet serve`, the real binary, over real HTTP: every endpoint against the simulator and the fake
// NVML, MIG instances in the documents and in leases, HEAD and keep-alive, leases end to end,
// malformed and hostile requests, and the errors of a bad configuration or command line.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "integration/serve_fixture.hpp"
#include "platform/subprocess.hpp"
#include "support/eventually.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {
namespace {

// Every endpoint through real HTTP. uuids: the GPUs' expected UUIDs in index order (empty: not checked).
void check_every_endpoint(unsigned short port, std::size_t gpus, const std::vector<std::string>& names,
                          const std::vector<std::string>& uuids) {
  auto m = get_json(port, "/api/v1/monitoring/gpu-metrics");
  ASSERT_TRUE(m.contains("gpus")) << m.dump();
  ASSERT_EQ(m["gpus"].size(), gpus) << m.dump();
  for (std::size_t i = 0; i < gpus; ++i) {
    if (i < names.size()) {
      EXPECT_EQ(m["gpus"][i]["name"], names[i]);
    }
    if (i < uuids.size()) {
      EXPECT_EQ(m["gpus"][i]["uuid"], uuids[i]);
    }
  }
  const std::string uuid0 = m["gpus"][0]["uuid"].get<std::string>();

  auto summary = get_json(port, "/api/gpu/summary");
  EXPECT_TRUE(summary.is_object() && !summary.empty()) << summary.dump();
  auto metrics = get_json(port, "/api/gpu/metrics");
  ASSERT_TRUE(metrics.contains("gpus"));
  EXPECT_EQ(metrics["gpus"].size(), gpus);
  EXPECT_TRUE(metrics.contains("processes") && metrics.contains("alerts"));
  auto health = get_json(port, "/api/health");
  EXPECT_EQ(health["status"], "ok") << health.dump();
  EXPECT_EQ(health["backend"]["gpus"], gpus);
  EXPECT_EQ(health["gpu_monitoring"], "available") << health.dump();
  EXPECT_EQ(health["monitoring"]["available"], true) << health.dump();
  EXPECT_EQ(health["monitoring"]["gpu_count"], gpus);
  EXPECT_EQ(summary["monitoring_available"], true) << summary.dump();

  // The seeds' remaining routes, on the real /proc and root filesystem.
  auto mh = get_json(port, "/api/v1/monitoring/health");
  EXPECT_EQ(mh["status"], "healthy") << mh.dump();
  auto host = get_json(port, "/api/v1/monitoring/metrics");
  EXPECT_GT(host["system"]["cpu_count"].get<unsigned>(), 0u) << host.dump();
  EXPECT_GT(host["system"]["memory"]["total"].get<std::uint64_t>(), 0u) << host.dump();
  EXPECT_GT(host["system"]["disk"]["total"].get<std::uint64_t>(), 0u) << host.dump();
  EXPECT_GE(host["system"]["memory"]["percent"].get<double>(), 0.0) << host.dump();
  auto fan = get_json(port, "/api/gpu/processes");
  EXPECT_FALSE(fan["explanation"].get<std::string>().empty()) << fan.dump();
  EXPECT_EQ(fan["gpu_count"], gpus);
  auto all = get_json(port, "/api/v1/gpus");
  EXPECT_EQ(all["stale"], false) << all.dump();
  EXPECT_EQ(all["gpus"].size(), gpus);

  auto g0 = get_json(port, "/api/v1/gpus/0");
  EXPECT_EQ(g0["uuid"], uuid0);
  EXPECT_EQ(g0["index"], 0);
  get_json(port, "/api/v1/gpus/" + std::to_string(gpus), 404);
  get_json(port, "/api/v1/gpus/zero", 400);
  auto procs = get_json(port, "/api/v1/processes");
  EXPECT_TRUE(procs.contains("processes")) << procs.dump();

  // History: the collection loop writes in batches; wait for points of GPU 0.
  const bool points = test::eventually(
      [&] {
        auto h = get_json(port, "/api/v1/history?gpu=0&since=10m");
        if (::testing::Test::HasFailure()) return true;
        return h.contains("series") && h["series"].size() == 1 && !h["series"][0]["points"].empty() &&
               h["series"][0]["points"][0]["samples"].get<int>() > 0;
      },
      20s, 100ms);
  if (::testing::Test::HasFailure()) return;
  EXPECT_TRUE(points) << "no history points within 20 s";
  get_json(port, "/api/v1/history?metric=nonsense", 400);

  auto alerts = get_json(port, "/api/v1/alerts");
  EXPECT_TRUE(alerts["rules"].is_array() && !alerts["rules"].empty()) << alerts.dump();
  EXPECT_TRUE(alerts["firing"].is_array());
  auto avail = get_json(port, "/api/v1/availability?gpus=1&min_memory_mb=0&max_utilization=100");
  EXPECT_EQ(avail["gpus"].size(), gpus);
  EXPECT_EQ(avail["available"], true) << avail.dump();
  auto leases = get_json(port, "/api/v1/leases");
  EXPECT_TRUE(leases["leases"].is_array() && leases["leases"].empty()) << leases.dump();
  auto jobs = get_json(port, "/api/v1/jobs");
  EXPECT_TRUE(jobs["jobs"].is_array()) << jobs.dump();
  auto missing = get_json(port, "/api/v1/experiments/no-such-run", 404);
  EXPECT_TRUE(missing.contains("error")) << missing.dump();

  auto est = http(port, "POST", "/api/v1/estimate",
                  R"({"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [4]}})");
  EXPECT_EQ(est.status, 200) << est.body;
  auto ej = est.body_json();
  EXPECT_TRUE(ej.contains("gpus") && ej["gpus"].is_number() && ej["gpus"].get<int>() >= 1) << est.body;

  auto prom = get(port, "/metrics");
  EXPECT_EQ(prom.status, 200);
  EXPECT_EQ(prom.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u) << prom.header("content-type");
  bool util_line = false;
  std::istringstream lines(prom.body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("DCGM_FI_DEV_GPU_UTIL{", 0) == 0 && line.find("UUID=\"" + uuid0 + "\"") != std::string::npos)
      util_line = true;
  EXPECT_TRUE(util_line) << prom.body.substr(0, 2000);

  auto api = get_json(port, "/api/openapi.json");
  EXPECT_EQ(api["openapi"].get<std::string>().rfind("3.", 0), 0u);
  EXPECT_TRUE(api["paths"].contains("/api/v1/allocations"));
}

TEST_F(Serve, EveryEndpointAnswersOnTheSimulator) {
  ASSERT_TRUE(start("sim", {"--interval", "0.2"}));
  check_every_endpoint(port(), 2, {"Sim H100", "Sim H100"}, {});
  auto h = get_json(port(), "/api/health");
  EXPECT_EQ(h["backend"]["simulated"], true);
  expect_clean_stop();
}

TEST_F(Serve, EveryEndpointAnswersOnTheFakeNvml) {
  const auto scenario = write_file("nvml.json", kNvmlScenario);
  ASSERT_TRUE(start("nvml", {"--interval", "0.2"},
                    {std::string("GPUFLEET_NVML_LIBRARY=") + GF_FAKE_NVML, "FAKE_NVML_SCENARIO=" + scenario}));
  check_every_endpoint(port(), 2, {"Fake A100-SXM4-80GB", "Fake H100 80GB HBM3"},
                       {"GPU-fa4e0000-0000-4000-8000-00000000aaaa", "GPU-fa4e0001-0000-4000-8000-00000000bbbb"});
  auto g0 = get_json(port(), "/api/v1/gpus/0");
  EXPECT_EQ(g0["utilization"], 37) << g0.dump();
  EXPECT_EQ(g0["memory"]["total"], 81920) << g0.dump();
  auto h = get_json(port(), "/api/health");
  EXPECT_EQ(h["backend"]["name"], "nvml");
  EXPECT_EQ(h["backend"]["simulated"], false);
  expect_clean_stop();
}

// MIG on the fake NVML: the instances reach the GPU documents, the process lists and /metrics (with
// dcgm-exporter's GPU_I_PROFILE / GPU_I_ID), and the node's memory totals count each MiB once.
TEST_F(Serve, MigInstancesReachTheDocumentsAndMetrics) {
  ASSERT_TRUE(start("nvml", {"--interval", "0.2"},
                    {std::string("GPUFLEET_NVML_LIBRARY=") + GF_FAKE_NVML,
                     std::string("FAKE_NVML_SCENARIO=") + GF_FIXTURES_DIR + "/nvml/mig.json"}));
  auto g0 = get_json(port(), "/api/v1/gpus/0");
  ASSERT_EQ(g0["mig_instances"].size(), 4u) << g0.dump();
  EXPECT_EQ(g0["mig_instances"][2]["uuid"], "MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01");
  EXPECT_EQ(g0["mig_instances"][2]["profile"], "1g.10gb");
  EXPECT_EQ(g0["mig_instances"][2]["memory"]["used"], 2013);
  EXPECT_TRUE(g0["utilization"].is_null());
  EXPECT_EQ(g0["missing_reasons"]["utilization"], "mig_enabled");
  auto procs = get_json(port(), "/api/v1/processes");
  bool seen = false;
  for (const auto& p : procs["processes"])
    if (p["pid"] == 5002) {
      seen = true;
      EXPECT_EQ(p["mig_uuid"], "MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01");
      EXPECT_EQ(p["gpu_instance_id"], 9);
    }
  EXPECT_TRUE(seen) << procs.dump();
  auto all = get_json(port(), "/api/gpu/metrics");
  EXPECT_EQ(all["gpus"][0]["mig_instances"].size(), 4u);
  // 81920 × 3 GPUs, whatever the instances hold.
  EXPECT_EQ(all["summary"]["memory"]["total"], 3 * 81920) << all["summary"].dump();
  EXPECT_EQ(all["summary"]["memory"]["used"], 16100 + 4000) << all["summary"].dump();
  const std::string prom = get(port(), "/metrics").body;
  EXPECT_NE(prom.find(R"(,GPU_I_PROFILE="3g.40gb",GPU_I_ID="2")"), std::string::npos) << prom;
  EXPECT_NE(prom.find(R"(UUID="GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",pci_bus_id="00000000:07:00.0",)"
                      R"(device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="1g.10gb",GPU_I_ID="10")"),
            std::string::npos);
  expect_clean_stop();
}

TEST_F(Serve, HeadHasHeadersOnlyAndKeepAliveServesTwoRequests) {
  ASSERT_TRUE(start("sim"));
  Sock s(port());
  ASSERT_TRUE(s.ok());
  // Two requests, one connection: HEAD first (its Content-Length but no body), then GET.
  ASSERT_TRUE(s.send_all(request_text("HEAD", "/api/health", {}, {}, false)));
  auto head = read_response(s, in(20s), true);
  ASSERT_EQ(head.status, 200) << head.raw_head;
  EXPECT_GT(std::stoul(head.header("content-length").empty() ? "0" : head.header("content-length")), 0u);
  EXPECT_EQ(head.header("content-type"), "application/json");
  ASSERT_TRUE(s.send_all(request_text("GET", "/api/openapi.json", {}, {}, false)));
  auto second = read_response(s, in(20s));
  ASSERT_EQ(second.status, 200) << "a HEAD body would have come first: " << second.raw_head;
  EXPECT_FALSE(second.body_json().is_discarded());
  // And a third on the same connection, pipelined with a fourth.
  ASSERT_TRUE(
      s.send_all(request_text("GET", "/api/health", {}, {}, false) + request_text("GET", "/metrics", {}, {}, true)));
  auto third = read_response(s, in(20s));
  auto fourth = read_response(s, in(20s));
  EXPECT_EQ(third.status, 200);
  EXPECT_EQ(fourth.status, 200);
  EXPECT_NE(fourth.body.find("DCGM_FI_DEV_GPU_UTIL"), std::string::npos);
  EXPECT_TRUE(s.closed_by(in(10s))) << "Connection: close was not honoured";
  expect_clean_stop();
}

// More than the socket takes at once (a client with a small window that reads late): the server
// writes what fits, then the rest as the client reads. 150 pipelined answers (5 MB, beyond the
// kernel's 4 MiB send buffer) arrive whole and in order, and the connection goes on.
TEST_F(Serve, AnswersBeyondWhatTheSocketTakesArriveWhole) {
  ASSERT_TRUE(start("sim"));
  const auto whole = get(port(), "/api/openapi.json");
  ASSERT_EQ(whole.status, 200);
  ASSERT_GT(whole.body.size(), 30000u) << "the test needs large answers";
  Sock s(port(), 2048);
  ASSERT_TRUE(s.ok());
  constexpr int kAnswers = 150;
  std::string pipelined;
  for (int i = 0; i < kAnswers; ++i) pipelined += request_text("GET", "/api/openapi.json", {}, {}, false);
  ASSERT_TRUE(s.send_all(pipelined));
  std::this_thread::sleep_for(500ms);  // the server meets a full socket
  for (int i = 0; i < kAnswers; ++i) {
    auto r = read_response(s, in(20s));
    ASSERT_EQ(r.status, 200) << "answer " << i << ": " << r.raw_head;
    ASSERT_EQ(r.body, whole.body) << "answer " << i;
  }
  ASSERT_TRUE(s.send_all(request_text("GET", "/api/health", {}, {}, true)));
  EXPECT_EQ(read_response(s, in(20s)).status, 200);
  expect_clean_stop();
}

TEST_F(Serve, AllocationsEndToEnd) {
  ASSERT_TRUE(start("sim"));
  const std::string tok = token();
  ASSERT_EQ(tok.size(), 64u) << "agent.token";
  const std::string auth = "Authorization: Bearer " + tok;

  auto anon = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "min_memory_mb": 0})");
  EXPECT_EQ(anon.status, 401) << anon.body;
  auto wrong = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1})", {"Authorization: Bearer nope"});
  EXPECT_EQ(wrong.status, 401) << wrong.body;

  auto made =
      http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "min_memory_mb": 0, "name": "it-test"})", {auth});
  ASSERT_EQ(made.status, 201) << made.body;
  const auto lease = made.body_json();
  ASSERT_TRUE(lease.contains("id")) << made.body;
  const std::string id = lease["id"].get<std::string>();
  EXPECT_EQ(made.header("location"), "/api/v1/allocations/" + id);

  auto listed = get_json(port(), "/api/v1/leases");
  ASSERT_EQ(listed["leases"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["leases"][0]["id"], id);

  // The CLI, a separate process on the same store, sees the same lease.
  auto cli = gf::platform::run_process({GF_BINARY, "--backend", "sim", "leases", "--json", "--db", db},
                                       gf::platform::RunOptions{30s});
  ASSERT_TRUE(cli);
  EXPECT_EQ(cli->exit_code, 0) << cli->err;
  auto cj = json::parse(cli->out, nullptr, false);
  ASSERT_FALSE(cj.is_discarded()) << cli->out;
  ASSERT_EQ(cj["leases"].size(), 1u) << cli->out;
  EXPECT_EQ(cj["leases"][0]["id"], id);

  // Two GPUs, one leased: asking for two more than are free.
  auto more = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 2, "min_memory_mb": 0})", {auth});
  EXPECT_EQ(more.status, 409) << more.body;

  auto del_anon = http(port(), "DELETE", "/api/v1/allocations/" + id);
  EXPECT_EQ(del_anon.status, 401);
  auto del = http(port(), "DELETE", "/api/v1/allocations/" + id, {}, {auth});
  EXPECT_EQ(del.status, 200) << del.body;
  auto again = http(port(), "DELETE", "/api/v1/allocations/" + id, {}, {auth});
  EXPECT_EQ(again.status, 404) << again.body;
  EXPECT_TRUE(get_json(port(), "/api/v1/leases")["leases"].empty());
  // With the lease gone both GPUs are free again.
  auto both = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 2, "min_memory_mb": 0})", {auth});
  EXPECT_EQ(both.status, 201) << both.body;
  expect_clean_stop();
}

// MIG leases through the agent on the fake NVML (mig.json: GPU 0 cut into 3g.40gb, 2g.20gb and two
// 1g.10gb, one of which runs pid 5002): the CLI over the agent socket (alloc, run, leases) and the REST
// route hand out one instance by its MIG UUID; refusals name the profile; whole GPUs in MIG mode are not
// handed out.
TEST_F(Serve, MigInstancesAreLeasedThroughTheSocketAndTheApi) {
  const std::string scenario = std::string(GF_FIXTURES_DIR) + "/nvml/mig.json";
  setenv("GPUFLEET_NVML_LIBRARY", GF_FAKE_NVML, 1);  // for the CLI processes below
  setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  const std::string sock = (dir / "agent.sock").string();
  ASSERT_TRUE(start("nvml", {"--interval", "0.2", "--socket", sock}));
  const auto gf = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {GF_BINARY, "--backend", "nvml", "--socket", sock});
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{30s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  };

  auto a = gf({"alloc", "--mig", "1g.10gb"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("export CUDA_VISIBLE_DEVICES=MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6\n"), std::string::npos)
      << a.out;
  auto busy = gf({"alloc", "--mig", "1g.10gb"});
  EXPECT_EQ(busy.exit_code, 75) << busy.out << busy.err;
  EXPECT_NE(busy.err.find("no free MIG instance of profile 1g.10gb: GPU 0 MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01 "
                          "(GI 9): busy: pid 5002; GPU 0 MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6 (GI 10): leased"),
            std::string::npos)
      << busy.err;
  auto missing = gf({"alloc", "--mig", "7g.80gb"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no MIG instance of profile 7g.80gb on this node (its MIG instances: 1g.10gb ×2, "
                             "2g.20gb, 3g.40gb)"),
            std::string::npos)
      << missing.err;
  auto whole = gf({"alloc", "--gpus", "3", "--allow-busy", "--min-memory-mb", "0"});
  EXPECT_EQ(whole.exit_code, 75) << whole.out;
  EXPECT_NE(whole.err.find("GPU 2: in MIG mode"), std::string::npos) << whole.err;

  // The REST route: one instance of another profile.
  const std::string auth = "Authorization: Bearer " + token();
  auto made =
      http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "mig": "2g.20gb", "name": "api-mig"})", {auth});
  ASSERT_EQ(made.status, 201) << made.body;
  const auto lease = made.body_json();
  EXPECT_EQ(lease["cuda_visible_devices"], "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973") << made.body;
  EXPECT_EQ(lease["gpus"][0]["mig"], true);
  EXPECT_EQ(lease["gpus"][0]["index"], 0);
  auto again = http(port(), "POST", "/api/v1/allocations", R"({"mig": "2g.20gb"})", {auth});
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.body.find("no free MIG instance of profile 2g.20gb"), std::string::npos) << again.body;
  auto bad = http(port(), "POST", "/api/v1/allocations", R"({"mig": "1g.10gb; rm"})", {auth});
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto two = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 2, "mig": "1g.10gb"})", {auth});
  EXPECT_EQ(two.status, 400) << two.body;

  // `leases` shows each instance as <GPU>:<MIG UUID>.
  auto l = gf({"leases"});
  EXPECT_EQ(l.exit_code, 0) << l.err;
  EXPECT_NE(l.out.find("0:MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("0:MIG-a25704ba-3a06-5299-a795-fd7cf4d13973"), std::string::npos) << l.out;

  // run --mig: the command sees the instance's MIG UUID.
  auto run =
      gf({"run", "--mig", "3g.40gb", "--allow-busy", "--", "sh", "-c", "echo \"visible=$CUDA_VISIBLE_DEVICES\""});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("visible=MIG-feb88891-0321-5fef-9c87-d4af3b54259e"), std::string::npos) << run.out << run.err;
  unsetenv("GPUFLEET_NVML_LIBRARY");
  unsetenv("FAKE_NVML_SCENARIO");
  expect_clean_stop();
}

TEST_F(Serve, MalformedRequestsAreRefusedAndTheServerStaysUp) {
  // A dashboard directory next to a file that must never be served.
  fs::create_directories(dir / "static");
  write_file("static/index.html", "<html>dashboard</html>");
  write_file("secret.txt", "TOP-SECRET-CONTENT");
  ASSERT_TRUE(start("sim", {"--static", (dir / "static").string()}));
  const std::string auth = "Authorization: Bearer " + token();

  auto raw = [&](const std::string& bytes) {
    Sock s(port());
    EXPECT_TRUE(s.ok() && s.send_all(bytes));
    return read_response(s, in(20s));
  };

  auto garbage = raw("BL\x01\x02H nonsense\r\n\r\n");
  EXPECT_EQ(garbage.status, 400) << garbage.raw_head;
  expect_healthy(port(), "a garbage request line");
  auto garbage2 = raw("GET /api/health HTTP/9.9 extra\r\n\r\n");
  EXPECT_EQ(garbage2.status, 400) << garbage2.raw_head;
  expect_healthy(port(), "a bad version");

  auto bad_json = http(port(), "POST", "/api/v1/allocations", R"({"gpus": )", {auth});
  EXPECT_EQ(bad_json.status, 400) << bad_json.body;
  EXPECT_TRUE(bad_json.body_json().contains("error")) << bad_json.body;
  auto bad_json2 = http(port(), "POST", "/api/v1/estimate", "not json at all");
  EXPECT_EQ(bad_json2.status, 400) << bad_json2.body;
  auto wrong_type = http(port(), "POST", "/api/v1/allocations", R"({"gpus": "two"})", {auth});
  EXPECT_EQ(wrong_type.status, 400) << wrong_type.body;
  auto wrong_type2 = http(port(), "POST", "/api/v1/allocations", R"([1, 2])", {auth});
  EXPECT_EQ(wrong_type2.status, 400) << wrong_type2.body;
  auto unknown_field = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "colour": "red"})", {auth});
  EXPECT_EQ(unknown_field.status, 400) << unknown_field.body;
  expect_healthy(port(), "bad bodies");

  // Body over 1 MiB: refused from its Content-Length, before the body is read.
  auto big = raw("POST /api/v1/estimate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(1024 * 1024 + 1) + "\r\n\r\n");
  EXPECT_EQ(big.status, 413) << big.raw_head;
  expect_healthy(port(), "413");
  // The same with the body actually streaming in (the server may reset the connection after its answer).
  {
    Sock s(port());
    ASSERT_TRUE(s.ok());
    s.send_all("POST /api/v1/estimate HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n");
    s.send_all(std::string(256 * 1024, 'x'));
    auto r = read_response(s, in(20s));
    if (r.status != 0) {
      EXPECT_EQ(r.status, 413);
    }
  }
  expect_healthy(port(), "a streamed 2 MB body");

  auto huge_header = raw("GET /api/health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
  EXPECT_EQ(huge_header.status, 431) << huge_header.raw_head;
  expect_healthy(port(), "431");

  auto unknown = get(port(), "/api/v1/nothing-here");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.header("content-type").rfind("application/json", 0), 0u);
  EXPECT_TRUE(unknown.body_json().contains("error")) << unknown.body;

  auto wrong_method = http(port(), "DELETE", "/api/health");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_NE(wrong_method.header("allow").find("GET"), std::string::npos) << wrong_method.raw_head;
  auto wrong_method2 = http(port(), "PUT", "/api/v1/allocations", "{}");
  EXPECT_EQ(wrong_method2.status, 405);
  EXPECT_NE(wrong_method2.header("allow").find("POST"), std::string::npos) << wrong_method2.raw_head;

  // Static files: the dashboard is served, nothing outside it ever is.
  auto index = get(port(), "/index.html");
  EXPECT_EQ(index.status, 200);
  EXPECT_NE(index.body.find("dashboard"), std::string::npos);
  for (const std::string target :
       {"/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/../secret.txt", "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt", "/..%2fsecret.txt", "/static/../../secret.txt", "/.%2e/secret.txt"}) {
    auto r = get(port(), target);
    EXPECT_TRUE(r.status == 404 || r.status == 400) << target << " → " << r.status;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << target;
    EXPECT_EQ(r.body.find("TOP-SECRET"), std::string::npos) << target;
  }
  EXPECT_EQ(get(port(), "/../../etc/passwd").status, 404);
  EXPECT_EQ(get(port(), "/%2e%2e/%2e%2e/etc/passwd").status, 404);
  expect_healthy(port(), "everything");
  expect_clean_stop();
}

TEST_F(Serve, ConfigAndCommandLineErrors) {
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), GF_BINARY);
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{30s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  };
  auto one_line = [](const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return !t.empty() && t.find('\n') == std::string::npos;
  };

  const auto bad_key = write_file("bad.json", R"({"limits": {"request_timeout_s": 2}, "colour": "blue"})");
  auto r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--config", bad_key});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("colour"), std::string::npos) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;

  const auto bad_nested = write_file("nested.json", R"({"limits": {"request_timeout": 2}})");
  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--config", bad_nested});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("request_timeout"), std::string::npos) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;

  const auto bad_alert = write_file("alert.json", R"({"alerts": {"high_gpu_usage": {"treshold": 50}}})");
  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--config", bad_alert});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("treshold"), std::string::npos) << r.err;

  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--read-token-file",
           (dir / "reader.token").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--auth-read"), std::string::npos) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;

  for (const std::string listen : {"garbage", "127.0.0.1:99999", "127.0.0.1:", "1.2.3.4.5:80:1"}) {
    r = run({"--backend", "sim", "serve", "--listen", listen, "--db", db});
    EXPECT_EQ(r.exit_code, 2) << listen << ": " << r.err;
    EXPECT_NE(r.err.find("--listen"), std::string::npos) << listen << ": " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
  }

  // A port somebody else listens on.
  const int other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(other, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(other, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(other, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string taken = std::to_string(ntohs(a.sin_port));
  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:" + taken, "--db", db});
  ::close(other);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.err.find("127.0.0.1:" + taken), std::string::npos) << r.err;
  EXPECT_NE(core::lower(r.err).find("in use"), std::string::npos) << r.err;

  // A config file that does not exist.
  r = run({"--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--config",
           (dir / "missing.json").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gf::serve_test
