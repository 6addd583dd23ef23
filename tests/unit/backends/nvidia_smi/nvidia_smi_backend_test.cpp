// The nvidia-smi backend end to end: the real process runner against tests/fakes/fake-nvidia-smi,
// whose behaviour each test picks with FAKE_NVIDIA_SMI_MODE.
#include "backends/nvidia_smi/nvidia_smi_backend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/ports/clock.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

const std::string kFake = std::string(GF_FAKES_DIR) + "/fake-nvidia-smi";

class FixedClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return std::chrono::steady_clock::time_point{}; }
  std::chrono::system_clock::time_point wall_now() const override {
    return std::chrono::system_clock::time_point{std::chrono::seconds{1700000000}};
  }
};

// Sets an environment variable for the life of the object and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class NvidiaSmiBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::access(kFake.c_str(), X_OK), 0) << kFake << " must exist and be executable"; }

  BackendOptions options(std::chrono::milliseconds timeout = std::chrono::milliseconds{5000}) const {
    BackendOptions o;
    o.nvidia_smi = kFake;
    o.nvidia_smi_timeout = timeout;
    o.clock = &clock_;
    return o;
  }

  std::vector<std::string> log_lines() const {
    std::ifstream in(log_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }

  FixedClock clock_;
  test::TempDir tmp_;
  const fs::path dir_ = tmp_.path();
  const fs::path log_ = dir_ / "invocations.log";
};

const core::GpuReading* gpu_by_index(const core::Snapshot& s, unsigned index) {
  for (const auto& g : s.gpus)
    if (g.index == index) return &g;
  return nullptr;
}

TEST_F(NvidiaSmiBackendTest, NormalModeGivesEightGpusWithTheirComputeProcesses) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  ScopedEnv log("FAKE_NVIDIA_SMI_LOG", log_.string());
  auto b = open_nvidia_smi(options());
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ((*b)->name(), "nvidia-smi");

  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->backend, "nvidia-smi");
  EXPECT_FALSE(s->simulated);
  EXPECT_EQ(s->driver_version, "550.54.15");
  EXPECT_EQ(s->timestamp, clock_.wall_now());
  ASSERT_EQ(s->gpus.size(), 8u);
  EXPECT_TRUE(s->warnings.empty()) << s->warnings.front();

  const auto* g0 = gpu_by_index(*s, 0);
  ASSERT_NE(g0, nullptr);
  EXPECT_EQ(g0->memory_used_mib, core::Reading<std::uint64_t>(40961));
  EXPECT_DOUBLE_EQ(g0->power_draw_w.value_or(0), 512.34);
  ASSERT_EQ(g0->processes.size(), 2u);
  EXPECT_EQ(g0->processes[0].pid, 41235u);
  EXPECT_EQ(g0->processes[0].name, "python3");
  EXPECT_EQ(g0->processes[0].used_memory_mib, std::optional<std::uint64_t>(40448));
  EXPECT_EQ(g0->processes[0].kind, core::ProcessKind::Compute);
  EXPECT_EQ(g0->processes[1].name, "python");
  EXPECT_TRUE(gpu_by_index(*s, 1)->processes.empty());
  ASSERT_EQ(gpu_by_index(*s, 5)->processes.size(), 1u);
  EXPECT_EQ(gpu_by_index(*s, 5)->processes[0].used_memory_mib, std::nullopt);
  ASSERT_EQ(gpu_by_index(*s, 7)->processes.size(), 1u);
  EXPECT_EQ(gpu_by_index(*s, 7)->processes[0].name, "worker");

  // Graphics processes are invisible to nvidia-smi's CSV queries, and the snapshot says so.
  EXPECT_FALSE(s->process_visibility.complete);
  EXPECT_THAT(s->process_visibility.message, HasSubstr("compute processes only"));

  // The exact command lines: no shell, name last, the formats asked for.
  const auto lines = log_lines();
  // open's probe, then the snapshot's two queries, and -L because GPU 6 is in MIG mode (it lists no MIG
  // device, so the query interface is not asked), then the remapped rows (the first is due at once).
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[1], HasSubstr("--query-gpu=index,uuid,pci.bus_id,"));
  EXPECT_THAT(lines[1], HasSubstr(",driver_version,name --format=csv,noheader,nounits"));
  EXPECT_EQ(lines[2], "--query-compute-apps=gpu_uuid,pid,used_memory,process_name --format=csv,noheader,nounits");
  EXPECT_EQ(lines[3], "-L");
  EXPECT_EQ(lines[4],
            "--query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,"
            "remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits");
  EXPECT_EQ(g0->remapped_rows_failure, core::Reading<bool>(false));
  // A one-shot reader (no xid_events): no -q -x for the counters, no kernel log.
  EXPECT_EQ(g0->pcie_replay_count.why(), core::Absent::NotQueried);
  EXPECT_EQ(g0->last_xid.why(), core::Absent::NotQueried);
  EXPECT_TRUE(gpu_by_index(*s, 6)->mig_instances.empty());
  EXPECT_EQ(gpu_by_index(*s, 6)->utilization_pct, core::Reading<unsigned>(0));  // it reports one: kept
}

// MIG on the fallback path: -L names the devices, -q -x (the recorded answer of a real A100 in MIG mode)
// gives their ids and memory; one run of each per snapshot, whatever the number of GPUs.
TEST_F(NvidiaSmiBackendTest, MigDevicesComeFromTheListAndTheQueryInterface) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "mig");
  ScopedEnv log("FAKE_NVIDIA_SMI_LOG", log_.string());
  auto b = open_nvidia_smi(options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 1u);
  const auto& g = s->gpus[0];
  EXPECT_EQ(g.utilization_pct.why(), core::Absent::MigEnabled);
  ASSERT_EQ(g.mig_instances.size(), 2u);
  EXPECT_EQ(g.mig_instances[1].uuid, "MIG-2b8d4f63-a1c5-5e2f-9037-4d5e6f7a8b91");
  EXPECT_EQ(g.mig_instances[1].profile, "3g.20gb");
  EXPECT_EQ(g.mig_instances[1].name, "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  EXPECT_EQ(g.mig_instances[1].gpu_instance_id, 2u);
  EXPECT_EQ(g.mig_instances[1].memory_total_mib, core::Reading<std::uint64_t>(19968));
  EXPECT_EQ(g.mig_instances[1].memory_used_mib, core::Reading<std::uint64_t>(19));
  EXPECT_EQ(g.memory_total_mib, core::Reading<std::uint64_t>(40960));  // the GPU's own, not the sum
  const auto lines = log_lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[3], "-L");
  EXPECT_EQ(lines[4], "-q -x");
  EXPECT_THAT(lines[5], HasSubstr("--query-remapped-rows="));
  EXPECT_EQ(g.remapped_rows_correctable.why(), core::Absent::Unavailable);  // [N/A] in MIG mode

  ScopedEnv fail("FAKE_NVIDIA_SMI_MODE", "migxmlfail");
  auto t = (*b)->snapshot();
  ASSERT_TRUE(t) << t.error().message;  // the GPU readings stand
  EXPECT_TRUE(t->gpus[0].mig_instances.empty());
  EXPECT_THAT(t->warnings,
              ::testing::Contains(HasSubstr("MIG devices are not shown: nvidia-smi exited with status 255")));
}

TEST_F(NvidiaSmiBackendTest, MissingValuesAreAbsentAndPersistenceOffIsWarnedAbout) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "na");
  auto b = open_nvidia_smi(options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 2u);
  const auto& g0 = s->gpus[0];
  EXPECT_EQ(g0.utilization_pct.why(), core::Absent::Unavailable);
  EXPECT_EQ(g0.power_limit_w.why(), core::Absent::NotSupported);
  EXPECT_EQ(s->gpus[1].memory_used_mib.why(), core::Absent::NoPermission);
  EXPECT_EQ(s->gpus[1].name, "NVIDIA RTX A5000, Rev. B");
  EXPECT_EQ(s->driver_version, "535.104.05");

  ASSERT_EQ(g0.processes.size(), 1u);  // the [N/A] row cannot be attributed and is dropped
  EXPECT_EQ(g0.processes[0].pid, 4321u);
  EXPECT_EQ(g0.processes[0].used_memory_mib, std::nullopt);

  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_THAT(s->warnings[0], HasSubstr("Persistence mode is off on GPU 0"));
  EXPECT_THAT(s->warnings[0], Not(HasSubstr("GPU 1")));
  EXPECT_THAT(s->warnings[0], HasSubstr("nvidia-smi -pm 1"));
}

TEST_F(NvidiaSmiBackendTest, GpuRequiringResetIsReportedInItsHealth) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "reset");
  auto b = open_nvidia_smi(options());
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->gpus[0].health, core::Health::Ok);
  EXPECT_EQ(s->gpus[1].health, core::Health::Error);
  EXPECT_THAT(s->gpus[1].health_message, HasSubstr("GPU requires reset"));
  EXPECT_TRUE(s->gpus[0].processes.empty());  // "No running processes found"
}

TEST_F(NvidiaSmiBackendTest, HungNvidiaSmiIsKilledWithinTheTimeout) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "hang");
  const auto start = std::chrono::steady_clock::now();
  auto b = open_nvidia_smi(options(std::chrono::milliseconds{300}));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, "nvidia-smi did not answer within 300 ms; killed it");
  // A bound on the hang, with room for a loaded CI machine; the fake sleeps 1000 s.
  EXPECT_LT(took, std::chrono::milliseconds{5000});
}

TEST_F(NvidiaSmiBackendTest, HungProcessQueryCostsOnlyTheProcessList) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "appshang");
  // 2 s, not 300 ms: the GPU query (a bash script here) must answer within it even on a loaded 2-core CI
  // machine; only the process query hangs.
  auto b = open_nvidia_smi(options(std::chrono::milliseconds{2000}));
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus.size(), 8u);
  for (const auto& g : s->gpus) EXPECT_TRUE(g.processes.empty());
  EXPECT_FALSE(s->process_visibility.complete);
  EXPECT_THAT(s->process_visibility.message, HasSubstr("did not answer within 2 s"));
}

TEST_F(NvidiaSmiBackendTest, FailingNvidiaSmiGivesItsFirstLine) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "fail");
  auto b = open_nvidia_smi(options());
  ASSERT_FALSE(b);
  EXPECT_THAT(b.error().message, HasSubstr("status 9"));
  EXPECT_THAT(b.error().message,
              HasSubstr("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"));
  EXPECT_EQ(b.error().message.find('\n'), std::string::npos);  // one line
}

TEST_F(NvidiaSmiBackendTest, FailureAfterOpeningFailsTheSnapshot) {
  auto b = [&] {
    ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
    return open_nvidia_smi(options());
  }();
  ASSERT_TRUE(b) << b.error().message;
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "fail");
  auto s = (*b)->snapshot();
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, HasSubstr("NVIDIA-SMI has failed"));
}

TEST_F(NvidiaSmiBackendTest, GarbageOutputIsAnErrorNamingTheLine) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "garbage");
  auto b = open_nvidia_smi(options());
  ASSERT_FALSE(b);
  EXPECT_THAT(b.error().message, HasSubstr("line 1"));
  EXPECT_THAT(b.error().message, HasSubstr("unexpected"));
}

TEST_F(NvidiaSmiBackendTest, RejectedFieldFallsBackToTheOlderListAndRemembersIt) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "oldfields");
  ScopedEnv log("FAKE_NVIDIA_SMI_LOG", log_.string());
  auto b = open_nvidia_smi(options());
  ASSERT_TRUE(b) << b.error().message;
  auto first = (*b)->snapshot();
  ASSERT_TRUE(first) << first.error().message;
  auto second = (*b)->snapshot();
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ(second->gpus.size(), 8u);
  // The older name still fills the mask.
  EXPECT_EQ(second->gpus[2].clock_event_reasons, core::Reading<std::uint64_t>(0x4));

  std::vector<std::string> gpu_queries;
  for (const auto& l : log_lines())
    if (l.rfind("--query-gpu=", 0) == 0) gpu_queries.push_back(l);
  // open: the current list (refused), then the older one; each snapshot: the older one only.
  ASSERT_EQ(gpu_queries.size(), 4u);
  EXPECT_THAT(gpu_queries[0], HasSubstr("clocks_event_reasons.active"));
  for (std::size_t i = 1; i < gpu_queries.size(); ++i) {
    EXPECT_THAT(gpu_queries[i], HasSubstr("clocks_throttle_reasons.active")) << i;
    EXPECT_THAT(gpu_queries[i], Not(HasSubstr("clocks_event_reasons"))) << i;
  }
}

TEST_F(NvidiaSmiBackendTest, MissingExecutableIsAOneLineReason) {
  ScopedEnv path("PATH", dir_.string());  // an empty directory: no nvidia-smi anywhere
  BackendOptions o;
  ASSERT_EQ(o.nvidia_smi, "nvidia-smi");
  auto b = open_nvidia_smi(o);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message, "nvidia-smi: not found in PATH");

  o.nvidia_smi = (dir_ / "no-such-nvidia-smi").string();
  auto by_path = open_nvidia_smi(o);
  ASSERT_FALSE(by_path);
  EXPECT_THAT(by_path.error().message, HasSubstr("no-such-nvidia-smi: not found or not executable"));

  const auto plain = dir_ / "not-executable";
  std::ofstream(plain) << "#!/bin/sh\n";
  o.nvidia_smi = plain.string();
  auto not_exec = open_nvidia_smi(o);
  ASSERT_FALSE(not_exec);
  EXPECT_THAT(not_exec.error().message, HasSubstr("not found or not executable"));
}

TEST_F(NvidiaSmiBackendTest, NvidiaSmiIsFoundThroughPath) {
  fs::create_symlink(kFake, dir_ / "nvidia-smi");
  const char* old_path = std::getenv("PATH");
  ScopedEnv path("PATH", dir_.string() + ":" + (old_path ? old_path : "/usr/bin:/bin"));
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  BackendOptions o;
  o.clock = &clock_;
  auto b = open_nvidia_smi(o);
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->gpus.size(), 8u);
}

TEST_F(NvidiaSmiBackendTest, NullClockUsesTheSystemClock) {
  ScopedEnv mode("FAKE_NVIDIA_SMI_MODE", "normal");
  BackendOptions o = options();
  o.clock = nullptr;
  auto b = open_nvidia_smi(o);
  ASSERT_TRUE(b) << b.error().message;
  const auto before = std::chrono::system_clock::now();
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_GE(s->timestamp, before);
  EXPECT_LE(s->timestamp, std::chrono::system_clock::now());
}

}  // namespace
}  // namespace gf::backends
