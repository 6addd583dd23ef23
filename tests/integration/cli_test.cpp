// The real binary, run as a user would run it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "platform/subprocess.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace std::chrono_literals;
using gf::platform::ProcessOutput;

struct Cli : ::testing::Test {
  void SetUp() override {
    // No real GPU stack is consulted unless a test points at a fake.
    setenv("GPUFLEET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("GPUFLEET_NVIDIA_SMI", "/nonexistent/nvidia-smi", 1);
    setenv("GPUFLEET_SYSFS_ROOT", "/nonexistent-sysfs", 1);
    unsetenv("NO_COLOR");
  }
  static ProcessOutput run(std::vector<std::string> args, std::chrono::milliseconds timeout = 20s) {
    args.insert(args.begin(), GF_BINARY);
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{timeout});
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : ProcessOutput{};
  }
  static nlohmann::json parse(const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << text;
    return j;
  }
};

TEST_F(Cli, HelpListsVerbsAndExitCodes) {
  auto r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : {"status", "ps", "watch", "monitor", "backends", "Exit codes"})
    EXPECT_NE(r.out.find(verb), std::string::npos) << verb;
  for (const char* verb : {"status", "ps", "watch", "monitor", "backends"}) {
    auto h = run({verb, "--help"});
    EXPECT_EQ(h.exit_code, 0) << verb;
  }
}

TEST_F(Cli, BadCommandLineIsOneLineAndExit2) {
  auto r = run({"status", "--frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("gpufleet: ", 0), 0u) << r.err;
  EXPECT_EQ(run({"--backend", "cuda", "status"}).exit_code, 2);
  EXPECT_EQ(run({}).exit_code, 2);
  EXPECT_EQ(run({"watch", "--interval", "0"}).exit_code, 2);
}

TEST_F(Cli, SimStatusJsonHasTheSeedShape) {
  auto r = run({"status", "--json", "--backend", "sim"});  // global option after the verb
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse(r.out);
  EXPECT_EQ(j["backend"], "sim");
  EXPECT_EQ(j["simulated"], true);
  ASSERT_EQ(j["gpus"].size(), 4u);
  for (const auto& g : j["gpus"]) {
    for (const char* k :
         {"id", "index", "name", "uuid", "pci_bus_id", "utilization", "memory_utilization", "memory", "temperature",
          "power_usage", "power_limit", "fan_speed", "clock_speeds", "health", "availability_score", "processes"})
      EXPECT_TRUE(g.contains(k)) << k;
    for (const char* k : {"total", "used", "free"}) EXPECT_TRUE(g["memory"][k].is_number()) << k;
  }
}

TEST_F(Cli, SimTableIsLabelledSimulated) {
  auto r = run({"--backend", "sim", "status"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos);  // not a terminal: no colour codes
  EXPECT_NE(r.out.find("[3] Simulated H100"), std::string::npos);
}

TEST_F(Cli, PsJsonBiggestFirst) {
  auto r = run({"--backend", "sim", "ps", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  auto j = parse(r.out);
  ASSERT_EQ(j["processes"].size(), 2u);
  EXPECT_GE(j["processes"][0]["used_memory_mb"].get<int>(), j["processes"][1]["used_memory_mb"].get<int>());
  EXPECT_EQ(j["processes"][0]["user"], "alice");
  auto t = run({"--backend", "sim", "ps"});
  EXPECT_NE(t.out.find("COMMAND"), std::string::npos);
}

TEST_F(Cli, NoBackendKeepsWorkingAndSaysWhy) {
  auto b = run({"backends"});
  EXPECT_EQ(b.exit_code, 3);
  EXPECT_NE(b.out.find("No GPU backend"), std::string::npos);
  auto s = run({"status", "--json"});
  EXPECT_EQ(s.exit_code, 0);
  auto j = parse(s.out);
  EXPECT_EQ(j["backend"], "none");
  EXPECT_TRUE(j["gpus"].empty());
  EXPECT_GE(j["warnings"].size(), 3u);
  auto t = run({"status"});
  EXPECT_NE(t.out.find("No GPU found"), std::string::npos);
  EXPECT_NE(t.out.find("nvidia-smi"), std::string::npos);
}

TEST_F(Cli, ExplicitBackendThatCannotOpenExits3WithReason) {
  auto r = run({"--backend", "nvml", "status"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << r.err;
}

TEST_F(Cli, MonitorRunsTheCommandAndPassesItsExitStatus) {
  auto r = run({"--backend", "sim", "monitor", "--interval", "0.05", "--json", "--", "sh", "-c", "sleep 0.4; exit 5"});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  auto j = parse(r.out);
  EXPECT_GE(j["sample_count"].get<int>(), 4);
  EXPECT_EQ(j["exit_code"], 5);
  EXPECT_EQ(j["gpu_stats"].size(), 4u);
  EXPECT_TRUE(j["gpu_stats"]["0"]["utilization"]["mean"].is_number());
  EXPECT_TRUE(j["series"]["0"]["t"].is_array());
}

TEST_F(Cli, MonitorTableGoesToStderrAndGpuFilter) {
  auto r =
      run({"--backend", "sim", "monitor", "-n", "0.05", "--gpus", "1,3", "--", "sh", "-c", "echo from-cmd; sleep 0.2"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "from-cmd\n");
  EXPECT_NE(r.err.find("GPU monitoring"), std::string::npos);
  EXPECT_NE(r.err.find("[3]"), std::string::npos);
  EXPECT_EQ(r.err.find("[0]"), std::string::npos);
}

TEST_F(Cli, MonitorErrors) {
  EXPECT_EQ(run({"--backend", "sim", "monitor", "--", "gpufleet-no-such-command"}).exit_code, 127);
  EXPECT_EQ(run({"--backend", "sim", "monitor"}).exit_code, 2);
  EXPECT_EQ(run({"--backend", "sim", "monitor", "--interval", "0.001", "--", "true"}).exit_code, 2);
  // Without any GPU backend the command still runs, and its status is kept.
  EXPECT_EQ(run({"monitor", "--", "sh", "-c", "exit 4"}).exit_code, 4);
}

TEST_F(Cli, MonitorWritesOutputFile) {
  const gf::test::TempDir dir;
  const std::string path = (dir / "monitor.json").string();
  // No "--" is needed when the command has no options of its own. The command runs for 20 intervals, so
  // two samples arrive even on a loaded machine.
  auto r = run({"--backend", "sim", "monitor", "-n", "0.05", "-o", path, "--no-series", "sleep", "1"});
  EXPECT_EQ(r.exit_code, 0);
  auto text = gf::platform::run_process({"cat", path});
  ASSERT_TRUE(text);
  auto j = parse(text->out);
  EXPECT_FALSE(j.contains("series"));
  EXPECT_GE(j["sample_count"].get<int>(), 2);
}

TEST_F(Cli, WatchPrintsFramesWhenNotATerminal) {
  auto r = run({"--backend", "sim", "watch", "--interval", "0.05", "--count", "3"});
  EXPECT_EQ(r.exit_code, 0);
  std::size_t frames = 0;
  for (std::size_t p = 0; (p = r.out.find("[0] Simulated", p)) != std::string::npos; ++p) ++frames;
  EXPECT_EQ(frames, 3u);
  EXPECT_EQ(r.out.find("\x1b[?1049h"), std::string::npos);  // no terminal control codes into a pipe
}

}  // namespace
