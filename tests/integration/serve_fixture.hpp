#pragma once
// The fixture of the `gpufleet serve` tests (serve_*_test.cpp): the real binary as a child process
// (tests/support/agent_process.hpp) in the test's own directory, on the simulator unless a test names
// another backend, with no real GPU stack and no token from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "integration/serve_client.hpp"
#include "support/agent_process.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {

namespace fs = std::filesystem;

constexpr const char* kNvmlScenario = R"({
  "driver_version": "550.54.15",
  "gpus": [
    {"uuid": "GPU-fa4e0000-0000-4000-8000-00000000aaaa", "name": "Fake A100-SXM4-80GB", "pci_bus_id": "00000000:1B:00.0",
     "memory_total_mib": 81920, "memory_used_mib": 2048, "utilization_gpu_pct": 37, "utilization_memory_pct": 12,
     "temperature_c": 44, "power_draw_w": 123.5, "power_limit_w": 400, "fan_pct": 30,
     "clock_graphics_mhz": 1410, "clock_sm_mhz": 1410, "clock_memory_mhz": 1593, "performance_state": 0,
     "energy_mj": {"start": 1000, "increment": 10}},
    {"uuid": "GPU-fa4e0001-0000-4000-8000-00000000bbbb", "name": "Fake H100 80GB HBM3", "pci_bus_id": "00000000:2B:00.0",
     "memory_total_mib": 81559, "memory_used_mib": 512, "utilization_gpu_pct": 3, "utilization_memory_pct": 1,
     "temperature_c": 38, "power_draw_w": 70, "power_limit_w": 700, "fan_pct": 20,
     "clock_graphics_mhz": 345, "clock_sm_mhz": 345, "clock_memory_mhz": 2619, "performance_state": 8}
  ]
})";

struct Serve : ::testing::Test {
  test::TempDir dir;
  std::string db = (dir / "gf.db").string();
  test::AgentProcess agent;

  void SetUp() override {
    // No real GPU stack, no token from the environment (the agent creates agent.token next to the db).
    setenv("GPUFLEET_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("GPUFLEET_NVIDIA_SMI", "/nonexistent/nvidia-smi", 1);
    setenv("GPUFLEET_SYSFS_ROOT", "/nonexistent-sysfs", 1);
    setenv("GPUFLEET_DB", db.c_str(), 1);
    setenv("GPUFLEET_SIM_SCENARIO", GF_FIXTURES_DIR "/sim/two_idle.json", 1);
    unsetenv("GPUFLEET_TOKEN");
  }
  void TearDown() override {
    if (HasFailure() && !agent.stderr_text().empty()) std::cerr << "agent stderr:\n" << agent.stderr_text();
    if (agent.pid() > 0) agent.stop(10s);
  }

  // Writes a file into the test's directory; its path.
  std::string write_file(const std::string& name, const std::string& text) {
    return test::write_file(dir / name, text);
  }
  // `gpufleet --backend B serve --listen 127.0.0.1:0 --db DB <extra>`.
  bool start(const std::string& backend, std::vector<std::string> extra = {},
             const std::vector<std::string>& env = {}) {
    std::vector<std::string> args{"--backend", backend, "serve", "--listen", "127.0.0.1:0", "--db", db};
    args.insert(args.end(), extra.begin(), extra.end());
    return agent.start(dir.path(), args, env);
  }
  unsigned short port() const { return agent.port(); }
  std::string token() const {
    std::ifstream f(dir / "agent.token");
    std::string t;
    std::getline(f, t);
    return t;
  }
  void expect_clean_stop() {
    double secs = 0;
    EXPECT_EQ(agent.stop(10s, &secs), 0) << agent.stderr_text();
    EXPECT_LT(secs, 8.0);
  }
};

}  // namespace gf::serve_test
