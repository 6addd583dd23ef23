// The real binary against the fake vendor stacks: auto-detection order, fallback, and attribution of a
// real process on this machine.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "platform/subprocess.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace std::chrono_literals;

struct Fakes : ::testing::Test {
  void SetUp() override {
    setenv("GPUFLEET_NVML_LIBRARY", GF_FAKE_NVML, 1);
    setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/eight_gpus.json", 1);
    setenv("GPUFLEET_NVIDIA_SMI", GF_FAKES_DIR "/fake-nvidia-smi", 1);
    setenv("GPUFLEET_SYSFS_ROOT", "/nonexistent-sysfs", 1);
    unsetenv("FAKE_NVIDIA_SMI_MODE");
    unsetenv("GPUFLEET_PROC_ROOT");
  }
  static gf::platform::ProcessOutput run(std::vector<std::string> args) {
    args.insert(args.begin(), GF_BINARY);
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{20s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  }
  static nlohmann::json json_of(const gf::platform::ProcessOutput& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }
};

TEST_F(Fakes, AutoPrefersNvml) {
  auto j = json_of(run({"status", "--json"}));
  EXPECT_EQ(j["backend"], "nvml");
  EXPECT_EQ(j["gpus"].size(), 8u);
  EXPECT_FALSE(j["cuda_driver_version"].is_null());
  auto b = run({"backends"});
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_NE(b.out.find("chosen"), std::string::npos);
}

TEST_F(Fakes, AutoFallsBackToNvidiaSmiWhenNvmlIsMissing) {
  setenv("GPUFLEET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  auto j = json_of(run({"status", "--json"}));
  EXPECT_EQ(j["backend"], "nvidia-smi");
  EXPECT_EQ(j["gpus"].size(), 8u);
  auto b = json_of(run({"backends", "--json"}));
  EXPECT_EQ(b["chosen"], "nvidia-smi");
  EXPECT_EQ(b["steps"][0]["backend"], "nvml");
  EXPECT_EQ(b["steps"][0]["chosen"], false);
}

TEST_F(Fakes, NvmlVersionMismatchIsActionable) {
  setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/version_mismatch.json", 1);
  auto r = run({"--backend", "nvml", "status"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("reboot"), std::string::npos) << r.err;
}

TEST_F(Fakes, MigInstancesShowInStatusAndPs) {
  setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/mig.json", 1);
  auto st = run({"--backend", "nvml", "--socket", "none", "status", "--no-color"});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(
      st.out.find("    MIG 3g.40gb    |  14013 /  40192 MiB | GI 2 CI 0 | MIG-feb88891-0321-5fef-9c87-d4af3b54259e"),
      std::string::npos)
      << st.out;
  EXPECT_NE(st.out.find("utilization not reported under MIG on GPU 0,2"), std::string::npos) << st.out;
  auto ps = run({"--backend", "nvml", "--socket", "none", "ps", "--no-color"});
  ASSERT_EQ(ps.exit_code, 0) << ps.err;
  EXPECT_NE(ps.out.find("0 1g.10gb      5002"), std::string::npos) << ps.out;
  auto j = json_of(run({"--backend", "nvml", "--socket", "none", "status", "--json"}));
  EXPECT_EQ(j["gpus"][0]["mig_instances"].size(), 4u);
  EXPECT_EQ(j["gpus"][1]["mig_instances"].size(), 0u);
}

TEST_F(Fakes, HungNvidiaSmiIsKilledAndReported) {
  setenv("FAKE_NVIDIA_SMI_MODE", "hang", 1);
  auto r = run({"--backend", "nvidia-smi", "--nvidia-smi-timeout", "0.3", "status"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("did not answer"), std::string::npos) << r.err;
}

TEST_F(Fakes, LostGpuIsReportedWhileOthersRead) {
  setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/mixed.json", 1);
  auto j = json_of(run({"status", "--json"}));
  int lost = 0, ok = 0;
  for (const auto& g : j["gpus"]) {
    if (g["health"] == "lost") {
      ++lost;
      EXPECT_TRUE(g["availability_score"].is_null());
      EXPECT_TRUE(g["utilization"].is_null());
    } else if (g["health"] == "ok") {
      ++ok;
    }
  }
  EXPECT_EQ(lost, 1);
  EXPECT_GE(ok, 2);
  EXPECT_FALSE(j["warnings"].empty());  // persistence mode off
}

TEST_F(Fakes, WhyAValueIsMissingReachesTheJsonAndTheTable) {
  // mixed.json: GPU 0 and 1 have no fan (NOT_SUPPORTED), GPU 1's temperature fails (UNKNOWN) and its ECC
  // count needs permission, GPU 2 is lost, GPU 3 reports everything the table shows.
  setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/mixed.json", 1);
  auto j = json_of(run({"status", "--json"}));
  ASSERT_EQ(j["gpus"].size(), 4u);
  const auto& g0 = j["gpus"][0];
  EXPECT_TRUE(g0["fan_speed"].is_null());  // the null stays
  EXPECT_EQ(g0["missing_reasons"]["fan_speed"], "not_supported");
  EXPECT_FALSE(g0["missing_reasons"].contains("temperature"));
  const auto& g1 = j["gpus"][1];
  EXPECT_EQ(g1["missing_reasons"]["temperature"], "error");
  EXPECT_EQ(g1["missing_reasons"]["ecc_errors_uncorrected_volatile"], "no_permission");
  const auto& g2 = j["gpus"][2];
  EXPECT_EQ(g2["health"], "lost");
  EXPECT_EQ(g2["missing_reasons"]["memory.used"], "gpu_lost");
  EXPECT_EQ(g2["missing_reasons"]["temperature"], "gpu_lost");
  EXPECT_FALSE(j["gpus"][3]["missing_reasons"].contains("fan_speed"));

  auto t = run({"status"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  // One legend line for the whole table, in the order of the line's columns; the lost GPU has its own line.
  EXPECT_NE(t.out.find("\nn/a: temperature error on GPU 1; fan not supported on GPU 0,1\n"), std::string::npos)
      << t.out;
  EXPECT_EQ(t.out.find("n/a:"), t.out.rfind("n/a:")) << t.out;
  EXPECT_NE(t.out.find("LOST"), std::string::npos) << t.out;
}

TEST_F(Fakes, FieldsVerbPrintsTheTable) {
  auto j = json_of(run({"fields", "--json"}));
  ASSERT_TRUE(j["fields"].is_array());
  bool found = false;
  for (const auto& f : j["fields"])
    if (f["key"] == "fan_speed") {
      found = true;
      EXPECT_EQ(f["unit"], "%");
      EXPECT_EQ(f["history_metric"], "fan");
      EXPECT_EQ(f["prometheus"]["name"], "DCGM_FI_DEV_FAN_SPEED");
    }
  EXPECT_TRUE(found);
  auto t = run({"fields"});
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("DCGM_FI_DEV_GPU_UTIL"), std::string::npos);
}

TEST_F(Fakes, AttributesARealProcessOfThisMachine) {
  // The fake driver reports this very test process on GPU 0: gpufleet must name it from /proc.
  const gf::test::TempDir dir;
  const std::string path = (dir / "attrib.json").string();
  std::ofstream(path) << R"({"driver_version": "550.54.15", "gpus": [{"name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-00000000-0000-4000-8000-000000000001", "pci_bus_id": "00000000:1B:00.0",
    "memory_total_mib": 81559, "memory_used_mib": 5000, "utilization_gpu_pct": 30,
    "compute_processes": [{"pid": )"
                      << ::getpid() << R"(, "used_memory_mib": 4000}]}]})";
  setenv("FAKE_NVML_SCENARIO", path.c_str(), 1);
  auto j = json_of(run({"ps", "--json"}));
  ASSERT_EQ(j["processes"].size(), 1u);
  const auto& p = j["processes"][0];
  EXPECT_EQ(p["pid"], ::getpid());
  EXPECT_EQ(p["name"], "gf_integration_");  // comm is cut at 15 characters
  EXPECT_EQ(p["user"], ::getuid() == 0 ? "root" : p["user"]);
  EXPECT_NE(p["command"].get<std::string>().find("gf_integration_tests"), std::string::npos);
  EXPECT_EQ(p["used_memory_mb"], 4000);
  ASSERT_EQ(j["unattributed"].size(), 1u);
  EXPECT_EQ(j["unattributed"][0]["memory_mb"], 1000);
}

TEST_F(Fakes, MonitorWithNvmlUsesTheEnergyCounter) {
  auto r = run({"monitor", "-n", "0.05", "--json", "--no-series", "--", "sleep", "0.3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json_of(r);
  EXPECT_EQ(j["backend"], "nvml");
  EXPECT_EQ(j["gpu_stats"].size(), 8u);
  EXPECT_EQ(j["gpu_stats"]["0"]["energy_source"], "energy_counter");
  EXPECT_GT(j["gpu_stats"]["0"]["energy_joules"].get<double>(), 0.0);
}

}  // namespace
