// POST /api/v1/gpus/{gpu}/health/clear and `gpufleet health clear` on the fake NVML (issue 21): an XID
// the event thread recorded keeps the GPU unhealthy until an operator clears it (the write token only,
// logged), or until the GPU answers again after being lost (taken as a reset).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "integration/serve_fixture.hpp"
#include "platform/subprocess.hpp"
#include "support/eventually.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {
namespace {

// GPU 0 gets XID 79 (fallen off the bus), GPU 1 XID 13 (an application fault) as soon as registered.
constexpr const char* kXidScenario = R"({
  "gpus": [
    {"uuid": "GPU-c1ea0000-0000-4000-8000-000000000000", "name": "Fake H100 80GB HBM3", "memory_total_mib": 81559,
     "memory_used_mib": 10, "utilization_gpu_pct": 0, "supported_event_types": 65439,
     "xid_events": [{"xid": 79, "after_ms": 0}]},
    {"uuid": "GPU-c1ea0001-0000-4000-8000-000000000000", "name": "Fake H100 80GB HBM3", "memory_total_mib": 81559,
     "memory_used_mib": 10, "utilization_gpu_pct": 0, "supported_event_types": 65439,
     "xid_events": [{"xid": 13, "after_ms": 0}]}
  ]
})";

// GPU 0 gets XID 48, is lost for a few handle lookups (registration, probe and first readings come
// first), then answers again.
constexpr const char* kLostScenario = R"({
  "gpus": [
    {"uuid": "GPU-c1ea0002-0000-4000-8000-000000000000", "name": "Fake H100 80GB HBM3", "memory_total_mib": 81559,
     "memory_used_mib": 10, "utilization_gpu_pct": 0, "supported_event_types": 65439,
     "xid_events": [{"xid": 48, "after_ms": 0}],
     "lost": [false, false, false, false, true, true, true, true, false]}
  ]
})";

struct HealthClear : Serve {
  bool start_on(const char* scenario) {
    const auto path = write_file("nvml.json", scenario);
    return start("nvml", {"--interval", "0.2"},
                 {std::string("GPUFLEET_NVML_LIBRARY=") + GF_FAKE_NVML, "FAKE_NVML_SCENARIO=" + path});
  }
  json gpu(unsigned i) { return get_json(port(), "/api/v1/gpus/" + std::to_string(i)); }
  std::string auth() const { return "Authorization: Bearer " + token(); }
};

TEST_F(HealthClear, TheRouteClearsTheRecordedXidsForTheTokenHolderOnly) {
  ASSERT_TRUE(start_on(kXidScenario));
  ASSERT_TRUE(test::eventually([&] { return gpu(0)["healthy"] == false; })) << gpu(0).dump();
  ASSERT_EQ(gpu(0)["health_problems"][0]["code"], "xid_79");
  const auto xid_alert_firing = [&] {
    const auto alerts = get_json(port(), "/api/v1/alerts?gpu=0");
    for (const auto& f : alerts["firing"])
      if (f["rule"] == "xid_errors") return true;
    return false;
  };
  ASSERT_TRUE(test::eventually(xid_alert_firing)) << get_json(port(), "/api/v1/alerts?gpu=0").dump();

  EXPECT_EQ(http(port(), "POST", "/api/v1/gpus/0/health/clear").status, 401);
  EXPECT_EQ(gpu(0)["healthy"], false);  // refused: nothing cleared
  auto unknown = http(port(), "POST", "/api/v1/gpus/7/health/clear", "", {auth()});
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(http(port(), "POST", "/api/v1/gpus/GPU-nope/health/clear", "", {auth()}).status, 404);
  EXPECT_EQ(http(port(), "POST", "/api/v1/gpus/0/health/clear", R"({"who": 1})", {auth()}).status, 400);
  EXPECT_EQ(http(port(), "POST", "/api/v1/gpus/0/health/clear", "[1]", {auth()}).status, 400);

  auto r = http(port(), "POST", "/api/v1/gpus/GPU-c1ea0000-0000-4000-8000-000000000000/health/clear",
                R"({"note": "reset with nvidia-smi -r"})", {auth()});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto a = r.body_json();
  EXPECT_EQ(a["gpu"], 0);
  ASSERT_EQ(a["cleared_xids"].size(), 1u) << a.dump();
  EXPECT_EQ(a["cleared_xids"][0]["xid"], 79);
  EXPECT_EQ(a["cleared_xids"][0]["description"], "GPU has fallen off the bus");
  EXPECT_EQ(a["last_xid_cleared"], 79);
  EXPECT_EQ(a["healthy_before"], false);
  EXPECT_EQ(a["healthy"], true);
  EXPECT_EQ(a["note"], "reset with nvidia-smi -r");

  // At once in the documents and on /metrics, not at the next collection.
  const auto g0 = gpu(0);
  EXPECT_EQ(g0["healthy"], true) << g0.dump();
  EXPECT_EQ(g0["last_xid"], 0) << g0.dump();
  EXPECT_TRUE(g0["recent_xids"].empty()) << g0.dump();
  const auto metrics = get(port(), "/metrics").body;
  EXPECT_NE(metrics.find("gpufleet_gpu_health{gpu=\"0\""), std::string::npos);
  EXPECT_EQ(metrics.find("state=\"unhealthy\""), std::string::npos) << "GPU 0 is still unhealthy on /metrics";
  // The xid_errors alert resolves at the next collection (the event /ws and Socket.IO send).
  EXPECT_TRUE(test::eventually([&] { return !xid_alert_firing(); })) << get_json(port(), "/api/v1/alerts?gpu=0").dump();
  // Logged with who and when.
  EXPECT_NE(agent.stderr_text().find("XIDs cleared at "), std::string::npos) << agent.stderr_text();
  EXPECT_NE(agent.stderr_text().find("by the write token's holder (REST), note: \"reset with nvidia-smi -r\": 79 at"),
            std::string::npos)
      << agent.stderr_text();
  expect_clean_stop();
}

TEST_F(HealthClear, TheCliClearsThroughTheAgent) {
  ASSERT_TRUE(start_on(kXidScenario));
  ASSERT_TRUE(test::eventually([&] { return gpu(1)["last_xid"] == 13; })) << gpu(1).dump();
  const std::string url = "http://127.0.0.1:" + std::to_string(port());
  const std::string token_file = (dir / "agent.token").string();
  const auto gf = [&](std::vector<std::string> args) {
    args.insert(args.begin(), GF_BINARY);
    auto r = platform::run_process(args, platform::RunOptions{30s});
    EXPECT_TRUE(r);
    return r ? *r : platform::ProcessOutput{};
  };
  auto help = gf({"health", "clear", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("dcgmi health --clear"), std::string::npos) << help.out;

  auto one = gf({"health", "clear", "1", "--agent", url, "--token-file", token_file, "--json"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j = json::parse(one.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << one.out;
  EXPECT_EQ(j["cleared_xids"][0]["xid"], 13);
  EXPECT_EQ(j["healthy_before"], true);  // an application fault: healthy all along
  EXPECT_EQ(gpu(1)["last_xid"], 0);

  auto zero = gf({"health", "clear", "0", "--agent", url, "--token-file", token_file, "--note", "after a reset"});
  ASSERT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_NE(zero.out.find("XID 79 (GPU has fallen off the bus) at "), std::string::npos) << zero.out;
  EXPECT_NE(zero.out.find("GPU 0 is healthy"), std::string::npos) << zero.out;
  auto nothing = gf({"health", "clear", "0", "--agent", url, "--token-file", token_file});
  EXPECT_EQ(nothing.exit_code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("nothing to clear"), std::string::npos) << nothing.out;
  EXPECT_NE(agent.stderr_text().find(": after a reset\": 79 at"), std::string::npos) << agent.stderr_text();

  auto missing = gf({"health", "clear", "9", "--agent", url, "--token-file", token_file});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no GPU '9' on this node"), std::string::npos) << missing.err;
  const std::string wrong = write_file("wrong.token", "not-the-token\n");
  auto refused = gf({"health", "clear", "0", "--agent", url, "--token-file", wrong});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("not the agent's write token"), std::string::npos) << refused.err;
  EXPECT_EQ(gf({"health", "clear", "0", "--agent", "ftp://x"}).exit_code, 2);
  expect_clean_stop();
}

TEST_F(HealthClear, AGpuBackFromLostHasItsXidsCleared) {
  ASSERT_TRUE(start_on(kLostScenario));
  ASSERT_TRUE(test::eventually(
      [&] { return agent.stderr_text().find("answers again after being lost") != std::string::npos; }, 30s))
      << agent.stderr_text();
  EXPECT_NE(agent.stderr_text().find("its recorded XIDs (48) are cleared"), std::string::npos) << agent.stderr_text();
  ASSERT_TRUE(test::eventually([&] { return gpu(0)["healthy"] == true; })) << gpu(0).dump();
  EXPECT_EQ(gpu(0)["last_xid"], 0);
  expect_clean_stop();
}

}  // namespace
}  // namespace gf::serve_test
