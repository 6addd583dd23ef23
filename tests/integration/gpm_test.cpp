// NVML GPM through the binary on the fake NVML, with the real H100's numbers: the JSON document, the
// backends verb, /api's field list, and what a job record says its "utilization" was made of.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "platform/subprocess.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Gpm : ::testing::Test {
  gf::test::TempDir dir;
  void SetUp() override {
    setenv("GPUFLEET_NVML_LIBRARY", GF_FAKE_NVML, 1);
    setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/h100_gpm.json", 1);
    setenv("GPUFLEET_DB", (dir / "gf.db").c_str(), 1);
    unsetenv("GPUFLEET_GPM_INTERVAL");
    unsetenv("GPUFLEET_PROC_ROOT");
  }
  void TearDown() override { unsetenv("GPUFLEET_DB"); }
  static gf::platform::ProcessOutput gf_run(std::vector<std::string> args) {
    args.insert(args.begin(), {GF_BINARY, "--backend", "nvml"});
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{30s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  }
  static nlohmann::json json_in(const std::string& text) {
    auto j = nlohmann::json::parse(text.substr(std::min(text.find('{'), text.size())), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << text;
    return j;
  }
};

TEST_F(Gpm, OneReadingSaysWhyThereIsNoProfilingYet) {
  auto r = gf_run({"status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json_in(r.out);
  ASSERT_EQ(j["gpus"].size(), 2u);
  // One collection: the H100 has its first sample, nothing to average yet; the A100 has no GPM.
  EXPECT_TRUE(j["gpus"][0]["profiling"]["tensor_active"].is_null());
  EXPECT_EQ(j["gpus"][0]["missing_reasons"]["profiling.tensor_active"], "unavailable");
  EXPECT_NE(j["gpus"][0]["profiling_note"].get<std::string>().find("first GPM sample"), std::string::npos);
  EXPECT_EQ(j["gpus"][1]["missing_reasons"]["profiling.sm_active"], "not_supported");
  EXPECT_NE(j["gpus"][1]["profiling_note"].get<std::string>().find("Hopper"), std::string::npos);

  auto b = gf_run({"backends", "--json"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto bj = json_in(b.out);
  ASSERT_EQ(bj["gpus"].size(), 2u);
  EXPECT_EQ(bj["gpus"][1]["profiling"], false);
  EXPECT_NE(bj["gpus"][1]["profiling_note"].get<std::string>().find("Hopper"), std::string::npos);
  auto text = gf_run({"backends"});
  EXPECT_NE(text.out.find("GPU 1 profiling: no GPM on this GPU"), std::string::npos) << text.out;
}

TEST_F(Gpm, TheIntervalIsCheckedAndZeroTurnsGpmOff) {
  auto bad = gf_run({"--gpm-interval", "0.05", "status"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--gpm-interval"), std::string::npos) << bad.err;
  setenv("GPUFLEET_GPM_INTERVAL", "0", 1);
  auto off = gf_run({"status", "--json"});
  unsetenv("GPUFLEET_GPM_INTERVAL");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  auto j = json_in(off.out);
  EXPECT_EQ(j["gpus"][0]["missing_reasons"]["profiling.tensor_active"], "not_queried");
  EXPECT_NE(j["gpus"][0]["profiling_note"].get<std::string>().find("off"), std::string::npos);
}

TEST_F(Gpm, AJobRecordSaysHowMuchOfItsUtilizationWasTensorWork) {
  auto r = gf_run({"--gpm-interval", "0.2", "run", "--gpus", "2", "--max-utilization", "100", "--allow-busy", "-n",
                   "0.1", "--json", "--", "sleep", "1.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rec = json_in(r.out);
  const auto& stats = rec["metrics"]["gpu_monitoring"]["gpu_stats"];
  ASSERT_TRUE(stats.contains("0")) << rec.dump(2);
  const auto& h100 = stats["0"];
  EXPECT_DOUBLE_EQ(h100["utilization"]["mean"].get<double>(), 100.0);
  EXPECT_NEAR(h100["profiling"]["tensor_active"]["mean"].get<double>(), 0.94, 0.005);
  EXPECT_NEAR(h100["profiling"]["sm_occupancy"]["mean"].get<double>(), 0.14, 0.005);
  EXPECT_NEAR(h100["profiling"]["sm_active"]["mean"].get<double>(), 0.97, 0.005);
  EXPECT_EQ(h100["profiling"]["fp16_active"]["max"].get<double>(), 0.0);
  EXPECT_GE(h100["profiling"]["tensor_active"]["samples"].get<int>(), 3);
  EXPECT_FALSE(h100["profiling"].contains("note"));
  const auto& a100 = stats["1"];
  EXPECT_FALSE(a100["profiling"].contains("tensor_active"));
  EXPECT_NE(a100["profiling"]["note"].get<std::string>().find("Hopper"), std::string::npos);

  // The same record, shown for people.
  auto shown = gf_run({"show", rec["id"].get<std::string>()});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("tensor_active 93.7 %"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("activity: n/a (no GPM on this GPU"), std::string::npos) << shown.out;
}

TEST_F(Gpm, MonitorPrintsTheActivityBesideTheUtilization) {
  auto r = gf_run({"--gpm-interval", "0.2", "monitor", "-n", "0.1", "--", "sleep", "0.8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("tensor active 93.7 %"), std::string::npos) << all;
  EXPECT_NE(all.find("SM occupancy 14.3 %"), std::string::npos) << all;
}

}  // namespace
