// The nvidia-smi backend's health beyond --query-gpu, end to end through tests/fakes/fake-nvidia-smi:
// remapped rows (paced), the PCIe replay and clock-event counters from -q -x (paced, long-running
// readers only) and XIDs from a kernel log file standing in for /dev/kmsg.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "backends/nvidia_smi/nvidia_smi_backend.hpp"
#include "core/gpu_health.hpp"
#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::HasSubstr;

// Sets an environment variable for the life of the object and puts the old value back.
class HealthEnv {
 public:
  HealthEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~HealthEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  HealthEnv(const HealthEnv&) = delete;
  HealthEnv& operator=(const HealthEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class NvidiaSmiHealth : public ::testing::Test {
 protected:
  // A long-running reader (the agent): XIDs from `kmsg_`, the counters from -q -x.
  BackendOptions agent_options() const {
    BackendOptions o;
    o.nvidia_smi = std::string(GF_FAKES_DIR) + "/fake-nvidia-smi";
    o.clock = &clock_;
    o.xid_events = true;
    o.kernel_log = kmsg_;
    return o;
  }
  void log_kernel(const std::string& line) const {
    std::ofstream out(kmsg_, std::ios::app);
    out << line << '\n';
  }
  // How many runs of nvidia-smi started with `prefix`.
  std::size_t runs(const std::string& prefix) const {
    std::ifstream in(log_);
    std::size_t n = 0;
    for (std::string l; std::getline(in, l);) n += l.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
  void SetUp() override { std::ofstream(kmsg_) << "NVRM: Xid (PCI:0000:2a:00): 79, pid=1, logged before the agent\n"; }

  test::FakeClock clock_;
  test::TempDir tmp_;
  const std::string kmsg_ = (tmp_.path() / "kmsg").string();
  const std::string log_ = (tmp_.path() / "invocations.log").string();
};

TEST_F(NvidiaSmiHealth, CountersAndRemappedRowsArePacedAndKeptInBetween) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  HealthEnv log("FAKE_NVIDIA_SMI_LOG", log_);
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->warnings.empty()) << s->warnings.front();
  const auto& g1 = s->gpus[1];
  // The fake gives GPU i a replay counter of 3i and 1000i µs of power capping: joined by UUID.
  EXPECT_EQ(g1.pcie_replay_count, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(g1.power_violation_us, core::Reading<std::uint64_t>(1000));
  EXPECT_EQ(g1.thermal_violation_us, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(s->gpus[7].pcie_replay_count, core::Reading<std::uint64_t>(21));
  EXPECT_EQ(g1.remapped_rows_uncorrectable, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(runs("--query-remapped-rows"), 1u);
  EXPECT_EQ(runs("-q -x"), 1u);

  // One second later: no new runs, the same values.
  clock_.advance(1s);
  auto t = (*b)->snapshot();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->gpus[1].pcie_replay_count, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(t->gpus[1].remapped_rows_failure, core::Reading<bool>(false));
  EXPECT_EQ(runs("--query-remapped-rows"), 1u);
  EXPECT_EQ(runs("-q -x"), 1u);
  EXPECT_EQ(runs("--query-gpu"), 3u);  // open's probe and two snapshots

  // 30 s: the remapped rows again; 60 s: the counters too.
  clock_.advance(29s);
  ASSERT_TRUE((*b)->snapshot());
  EXPECT_EQ(runs("--query-remapped-rows"), 2u);
  EXPECT_EQ(runs("-q -x"), 1u);
  clock_.advance(30s);
  ASSERT_TRUE((*b)->snapshot());
  EXPECT_EQ(runs("--query-remapped-rows"), 3u);
  EXPECT_EQ(runs("-q -x"), 2u);
}

TEST_F(NvidiaSmiHealth, ARowRemapFailureMakesTheGpuUnhealthy) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "reset");
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  const auto& g0 = s->gpus[0];
  EXPECT_EQ(g0.remapped_rows_correctable, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(g0.remapped_rows_pending, core::Reading<bool>(true));
  const auto v = core::judge_health(g0);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.summary, "unhealthy: row remap failure");
  // The GPU that prints "[GPU requires reset]" has no UUID to join its row on.
  EXPECT_EQ(s->gpus[1].remapped_rows_failure.why(), core::Absent::NotSupported);
}

TEST_F(NvidiaSmiHealth, NotAvailableIsAbsentNeverZero) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "na");
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus[0].remapped_rows_failure.why(), core::Absent::Unavailable);
  EXPECT_EQ(s->gpus[1].remapped_rows_correctable.why(), core::Absent::NotSupported);
}

TEST_F(NvidiaSmiHealth, ADriverWithoutTheQueryIsAskedOnce) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "noremap");
  HealthEnv log("FAKE_NVIDIA_SMI_LOG", log_);
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  for (int i = 0; i < 3; ++i) {
    auto s = (*b)->snapshot();
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->gpus[0].remapped_rows_failure.why(), core::Absent::NotSupported);
    EXPECT_TRUE(s->warnings.empty()) << s->warnings.front();
    clock_.advance(31s);
  }
  EXPECT_EQ(runs("--query-remapped-rows"), 1u);
}

TEST_F(NvidiaSmiHealth, Driver510HasReplaysButNoClockEventTimes) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "oldfields");
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus[2].pcie_replay_count, core::Reading<std::uint64_t>(6));
  EXPECT_EQ(s->gpus[2].power_violation_us.why(), core::Absent::NotSupported);
  EXPECT_EQ(s->gpus[2].thermal_violation_us.why(), core::Absent::NotSupported);
}

TEST_F(NvidiaSmiHealth, MigRoundsReadTheQueryInterfaceOnce) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "mig");
  HealthEnv log("FAKE_NVIDIA_SMI_LOG", log_);
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(s->gpus[0].pcie_replay_count, core::Reading<std::uint64_t>(0));  // the recorded A100's
  EXPECT_EQ(runs("-q -x"), 1u);
}

TEST_F(NvidiaSmiHealth, AnXidInTheKernelLogReachesItsGpuOnly) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  auto b = open_nvidia_smi(agent_options());
  ASSERT_TRUE(b) << b.error().message;
  auto before = (*b)->snapshot();
  ASSERT_TRUE(before);
  // GPU 1's XID was logged before the backend opened: not counted.
  for (const auto& g : before->gpus) EXPECT_EQ(g.last_xid, core::Reading<unsigned>(0)) << g.index;

  log_kernel("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15");
  log_kernel("NVRM: Xid (PCI:0000:3a:00): 79, pid=0, name=\x1b[2Jevil, GPU has fallen off the bus.");
  log_kernel("NVRM: Xid (PCI:0000:5d:00): 13, pid=4242, name=python3, Graphics Exception");
  clock_.advance(1s);
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  const auto& g2 = s->gpus[2];  // bus 3A
  EXPECT_EQ(g2.last_xid, core::Reading<unsigned>(79));
  ASSERT_EQ(g2.recent_xids.size(), 1u);
  EXPECT_EQ(g2.recent_xids[0].time, clock_.wall_now());
  EXPECT_EQ(core::judge_health(g2).summary, "unhealthy: XID 79 (GPU has fallen off the bus)");
  const auto& g3 = s->gpus[3];  // bus 5D: an application fault keeps it healthy
  EXPECT_EQ(g3.last_xid, core::Reading<unsigned>(13));
  EXPECT_TRUE(core::judge_health(g3).healthy);
  EXPECT_EQ(s->gpus[0].last_xid, core::Reading<unsigned>(0));

  // Later snapshots keep it (it needs a reset), without reading it twice.
  clock_.advance(1s);
  auto again = (*b)->snapshot();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->gpus[2].recent_xids.size(), 1u);
}

TEST_F(NvidiaSmiHealth, AnUnreadableKernelLogSaysWhy) {
  HealthEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  auto o = agent_options();
  o.kernel_log = (tmp_.path() / "no-kmsg").string();
  auto b = open_nvidia_smi(o);
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus[0].last_xid.why(), core::Absent::NotSupported);
  EXPECT_THAT(s->warnings, Contains(HasSubstr("XIDs are not reported: cannot read the kernel log")));
}

}  // namespace
}  // namespace gf::backends
