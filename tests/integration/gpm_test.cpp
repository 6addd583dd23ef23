// NVML GPM through the binary on the fake NVML, with the real H100's numbers: the JSON document, the
// backends verb, /api's field list, and what a job record says its "utilization" was made of; and GPM per
// MIG GPU instance through the agent: each instance's own values in its JSON object and on /metrics.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "integration/serve_fixture.hpp"
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

// The agent on an H100 in MIG mode (tests/fixtures/nvml/h100_mig_gpm.json): every GPU instance's
// profiling reaches its MIG instance objects and /metrics with dcgm-exporter's GPU_I_PROFILE / GPU_I_ID,
// each with its own counters (the fake rejects a metrics call on samples of two instances).
struct GpmMig : gf::serve_test::Serve {
  // The value of `family`'s sample whose labels contain `labels`; NaN when there is none.
  static double sample_value(const std::string& prom, const std::string& family, const std::string& labels) {
    std::istringstream lines(prom);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(family + "{", 0) != 0 || line.find(labels) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return std::nan("");
  }
};

TEST_F(GpmMig, EachGpuInstanceReportsItsOwnProfiling) {
  ASSERT_TRUE(start(
      "nvml", {"--interval", "0.2"},
      {std::string("GPUFLEET_NVML_LIBRARY=") + GF_FAKE_NVML,
       std::string("FAKE_NVML_SCENARIO=") + GF_FIXTURES_DIR + "/nvml/h100_mig_gpm.json", "GPUFLEET_GPM_INTERVAL=0.2"}));
  nlohmann::json g0;
  for (auto until = std::chrono::steady_clock::now() + 15s; std::chrono::steady_clock::now() < until;) {
    g0 = gf::serve_test::get_json(port(), "/api/v1/gpus/0");
    if (g0["mig_instances"].size() == 5 && g0["mig_instances"][2]["profiling"]["tensor_active"].is_number()) break;
    std::this_thread::sleep_for(100ms);
  }
  auto mig = g0["mig_instances"];  // a copy: operator[] on it never asserts
  ASSERT_EQ(mig.size(), 5u) << g0.dump();
  // GPU instance 2's two compute instances: its values; instance 3 and 9: theirs.
  for (int i : {0, 1}) {
    EXPECT_EQ(mig[i]["gpu_instance_id"], 2);
    EXPECT_EQ(mig[i]["profiling"]["tensor_active"], 0.6) << mig[i].dump();
    EXPECT_EQ(mig[i]["profiling"]["sm_active"], 0.75);
    EXPECT_EQ(mig[i]["profiling"]["pcie_rx_bytes"], 200.0 * 1024 * 1024);
    EXPECT_TRUE(mig[i]["profiling_note"].is_null());
  }
  EXPECT_EQ(mig[2]["gpu_instance_id"], 3);
  EXPECT_EQ(mig[2]["profiling"]["tensor_active"], 0.02) << mig[2].dump();
  EXPECT_EQ(mig[2]["profiling"]["fp32_active"], 0.07);
  EXPECT_EQ(mig[2]["memory"]["used"], 5000);  // the instance's memory, as before, beside its profiling
  EXPECT_EQ(mig[3]["profiling"]["sm_active"], 0.0);
  // GPU instance 10: absent with the reason, not 0.
  EXPECT_TRUE(mig[4]["profiling"]["tensor_active"].is_null());
  EXPECT_EQ(mig[4]["missing_reasons"]["profiling.tensor_active"], "not_supported");
  EXPECT_NE(mig[4]["profiling_note"].get<std::string>().find("GPU instance 10"), std::string::npos);
  // The whole GPU says where its profiling went.
  EXPECT_EQ(g0["missing_reasons"]["profiling.tensor_active"], "mig_enabled");
  // The A100's instance has none (no GPM before Hopper).
  auto g1 = gf::serve_test::get_json(port(), "/api/v1/gpus/1");
  EXPECT_EQ(g1["mig_instances"][0]["missing_reasons"]["profiling.sm_active"], "not_supported") << g1.dump();

  const std::string prom = gf::serve_test::get(port(), "/metrics").body;
  const std::string h100 =
      R"(gpu="0",UUID="GPU-a7c70913-7752-3821-b707-c7ff1a4a3ce5",pci_bus_id="00000000:00:05.0",device="nvidia0",)"
      R"(modelName="NVIDIA H100 80GB HBM3",)";
  EXPECT_EQ(sample_value(prom, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", h100 + R"(GPU_I_PROFILE="1c.3g.40gb",GPU_I_ID="2")"),
            0.6)
      << prom;
  EXPECT_EQ(sample_value(prom, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", h100 + R"(GPU_I_PROFILE="2g.20gb",GPU_I_ID="3")"),
            0.02);
  EXPECT_EQ(sample_value(prom, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", h100 + R"(GPU_I_PROFILE="2g.20gb",GPU_I_ID="3")"),
            0.07);
  EXPECT_EQ(sample_value(prom, "DCGM_FI_PROF_PCIE_RX_BYTES", h100 + R"(GPU_I_PROFILE="1c.3g.40gb",GPU_I_ID="2")"),
            200.0 * 1024 * 1024);
  EXPECT_EQ(sample_value(prom, "DCGM_FI_DEV_FB_USED", h100 + R"(GPU_I_PROFILE="2g.20gb",GPU_I_ID="3")"), 5000);
  // No sample for what is absent: GPU instance 10, the whole MIG-mode GPU, the A100's instance.
  EXPECT_TRUE(std::isnan(sample_value(prom, "DCGM_FI_PROF_SM_ACTIVE", R"(GPU_I_ID="10")")));
  EXPECT_EQ(sample_value(prom, "DCGM_FI_DEV_FB_USED", R"(GPU_I_ID="10")"), 13);  // its memory is there
  EXPECT_TRUE(std::isnan(sample_value(prom, "DCGM_FI_PROF_SM_ACTIVE", h100 + "Hostname")));
  EXPECT_TRUE(std::isnan(sample_value(prom, "DCGM_FI_PROF_SM_ACTIVE", R"(gpu="1")")));
  expect_clean_stop();
}

}  // namespace
