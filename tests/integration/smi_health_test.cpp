// The nvidia-smi path's XIDs end to end: the real binary serving from the fake nvidia-smi, with a file
// standing in for /dev/kmsg (GPUFLEET_KMSG). An XID 79 line the "kernel" logs for one GPU's bus makes
// that GPU unhealthy in /api/health, and `alloc` through the agent refuses it naming the XID — as on
// the NVML path.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/serve_fixture.hpp"
#include "platform/subprocess.hpp"

namespace gf::serve_test {
namespace {

TEST_F(Serve, AnXidInTheKernelLogMakesAnNvidiaSmiGpuUnhealthy) {
  const std::string kmsg = write_file("kmsg", "NVRM: Xid (PCI:0000:18:00): 79, logged before the agent started\n");
  const std::string fake = std::string(GF_FAKES_DIR) + "/fake-nvidia-smi";
  setenv("GPUFLEET_NVIDIA_SMI", fake.c_str(), 1);  // for the CLI process below too
  setenv("FAKE_NVIDIA_SMI_MODE", "normal", 1);
  setenv("GPUFLEET_KMSG", kmsg.c_str(), 1);
  const std::string sock = (dir / "agent.sock").string();
  ASSERT_TRUE(start("nvidia-smi", {"--interval", "0.2", "--socket", sock}));

  // Healthy at first: the line from before the start is not read.
  auto first = get_json(port(), "/api/health");
  ASSERT_TRUE(first["gpus"]["unhealthy"].is_array()) << first.dump();
  EXPECT_TRUE(first["gpus"]["unhealthy"].empty()) << first.dump();

  {
    std::ofstream out(kmsg, std::ios::app);
    out << "NVRM: Xid (PCI:0000:3a:00): 79, pid=0, name=\x1b]0;evil\x07, GPU has fallen off the bus.\n";
  }
  json health;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    health = get_json(port(), "/api/health");
    if (!health["gpus"]["unhealthy"].empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(health["gpus"]["unhealthy"].size(), 1u) << health.dump();
  const auto& bad = health["gpus"]["unhealthy"][0];
  EXPECT_EQ(bad["index"], 2);
  EXPECT_EQ(bad["uuid"], "GPU-5b2c1a3e-7f4d-4e21-9c3a-0d1e2f3a4b52");
  EXPECT_EQ(bad["reason"], "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(bad["problems"][0]["code"], "xid_79");
  // The agent's log names it, with the process-chosen text made printable.
  EXPECT_NE(agent.stderr_text().find("the kernel logged XID 79 for GPU 2 (00000000:3A:00.0)"), std::string::npos)
      << agent.stderr_text();
  EXPECT_EQ(agent.stderr_text().find('\x1b'), std::string::npos);

  // /metrics under dcgm-exporter's names: the XID, and the -q -x counters (the fake's 3 × index replays).
  const auto metrics = get(port(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const auto value_of = [&](const std::string& name, const std::string& gpu) -> std::string {
    std::size_t at = 0;
    while ((at = metrics.body.find(name + "{", at)) != std::string::npos) {
      const auto end = metrics.body.find('\n', at);
      const std::string line = metrics.body.substr(at, end - at);
      at = end;
      if (line.find("gpu=\"" + gpu + "\"") != std::string::npos) return line.substr(line.rfind(' ') + 1);
    }
    return "(none)";
  };
  EXPECT_EQ(value_of("DCGM_FI_DEV_XID_ERRORS", "2"), "79");
  EXPECT_EQ(value_of("DCGM_FI_DEV_XID_ERRORS", "0"), "0");
  EXPECT_EQ(value_of("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "1"), "3");
  EXPECT_EQ(value_of("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1"), "0");

  // Allocation through the agent skips it and says why.
  auto r = gf::platform::run_process({GF_BINARY, "--backend", "nvidia-smi", "--socket", sock, "alloc", "--gpus", "8",
                                      "--allow-busy", "--min-memory-mb", "0"},
                                     gf::platform::RunOptions{30s});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 75) << r->out << r->err;
  EXPECT_NE(r->err.find("GPU 2: unhealthy: XID 79 (GPU has fallen off the bus)"), std::string::npos) << r->err;
  expect_clean_stop();
}

}  // namespace
}  // namespace gf::serve_test
