// The NVML backend against the fake NVML library: fields, absent values, lost GPUs, processes,
// init failures and the old-driver fallbacks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "backends/nvml/nvml_device.hpp"
#include "core/fields.hpp"
#include "fake_nvml_harness.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvml_test {
namespace {

using core::Absent;
using core::Health;
using core::ProcessKind;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct ProcessView {
  std::uint32_t pid;
  std::optional<std::uint64_t> used_memory_mib;
  ProcessKind kind;
  friend bool operator==(const ProcessView&, const ProcessView&) = default;
  friend std::ostream& operator<<(std::ostream& os, const ProcessView& p) {
    return os << "{pid " << p.pid << ", mib " << (p.used_memory_mib ? std::to_string(*p.used_memory_mib) : "unknown")
              << ", " << core::to_string(p.kind) << "}";
  }
};

std::vector<ProcessView> processes_of(const core::GpuReading& g) {
  std::vector<ProcessView> out;
  for (const auto& p : g.processes) out.push_back({p.pid, p.used_memory_mib, p.kind});
  return out;
}

// Every reading the NVML backend fills (all but the derived ones) has a value.
void expect_every_field(const core::GpuReading& g) {
  SCOPED_TRACE("GPU " + std::to_string(g.index));
  EXPECT_EQ(g.health, Health::Ok);
  EXPECT_FALSE(g.uuid.empty());
  EXPECT_FALSE(g.name.empty());
  EXPECT_FALSE(g.pci_bus_id.empty());
  EXPECT_TRUE(g.memory_total_mib.has_value());
  EXPECT_TRUE(g.memory_used_mib.has_value());
  EXPECT_TRUE(g.memory_free_mib.has_value());
  EXPECT_TRUE(g.utilization_pct.has_value());
  EXPECT_TRUE(g.memory_utilization_pct.has_value());
  EXPECT_TRUE(g.temperature_c.has_value());
  EXPECT_TRUE(g.power_draw_w.has_value());
  EXPECT_TRUE(g.power_limit_w.has_value());
  EXPECT_TRUE(g.fan_pct.has_value());
  EXPECT_TRUE(g.clock_graphics_mhz.has_value());
  EXPECT_TRUE(g.clock_memory_mhz.has_value());
  EXPECT_TRUE(g.clock_event_reasons.has_value());
  EXPECT_TRUE(g.performance_state.has_value());
  EXPECT_TRUE(g.mig_enabled.has_value());
  EXPECT_TRUE(g.ecc_uncorrected_volatile.has_value());
  EXPECT_TRUE(g.persistence_mode.has_value());
  EXPECT_TRUE(g.energy_mj.has_value());
}

using NvmlBackendTest = FakeNvmlTest;

TEST_F(NvmlBackendTest, EightGpusReportEveryField) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  EXPECT_EQ((*backend)->name(), "nvml");
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;

  EXPECT_EQ(snap->backend, "nvml");
  EXPECT_FALSE(snap->simulated);
  EXPECT_EQ(snap->timestamp, clock_.wall_now());
  EXPECT_EQ(snap->driver_version, "550.54.15");
  EXPECT_EQ(snap->cuda_driver_version, "12.4");
  EXPECT_TRUE(snap->warnings.empty()) << snap->warnings.front();
  EXPECT_TRUE(snap->process_visibility.complete) << snap->process_visibility.message;
  ASSERT_EQ(snap->gpus.size(), 8u);

  std::set<std::string> uuids, buses;
  for (unsigned i = 0; i < 8; ++i) {
    EXPECT_EQ(snap->gpus[i].index, i);
    expect_every_field(snap->gpus[i]);
    uuids.insert(snap->gpus[i].uuid);
    buses.insert(snap->gpus[i].pci_bus_id);
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);

  const auto& g = snap->gpus[0];
  EXPECT_EQ(g.uuid, "GPU-6f2a0c1e-8b1d-4c55-9a3e-1b0000000000");
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.pci_bus_id, "00000000:1B:00.0");
  EXPECT_EQ(*g.memory_total_mib, 81559u);
  EXPECT_EQ(*g.memory_used_mib, 10240u);  // _v2: the driver's 529 MiB reservation is not "used"
  EXPECT_EQ(*g.memory_free_mib, 81559u - 10240u - 529u);
  EXPECT_EQ(*g.utilization_pct, 35u);
  EXPECT_EQ(*g.memory_utilization_pct, 12u);
  EXPECT_EQ(*g.temperature_c, 41);
  EXPECT_DOUBLE_EQ(*g.power_draw_w, 180.5);
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 700.0);
  EXPECT_EQ(*g.fan_pct, 30u);
  EXPECT_EQ(*g.clock_graphics_mhz, 1410u);
  EXPECT_EQ(*g.clock_memory_mhz, 2619u);
  EXPECT_EQ(*g.clock_event_reasons, 0u);
  EXPECT_EQ(*g.performance_state, 0u);
  EXPECT_FALSE(*g.mig_enabled);
  EXPECT_EQ(*g.ecc_uncorrected_volatile, 2u);
  EXPECT_TRUE(*g.persistence_mode);
  EXPECT_EQ(*g.energy_mj, 987654321u);
  EXPECT_THAT(processes_of(g), ::testing::ElementsAre(ProcessView{4101, 9700, ProcessKind::Compute}));
  EXPECT_TRUE(g.processes[0].name.empty());  // the caller resolves names from /proc
  EXPECT_TRUE(g.processes[0].command.empty());

  EXPECT_TRUE(*snap->gpus[7].mig_enabled);
  EXPECT_EQ(*snap->gpus[1].clock_graphics_mhz, 1980u);
}

TEST_F(NvmlBackendTest, ValuesChangeBetweenSnapshots) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  std::vector<core::Snapshot> snaps;
  for (int i = 0; i < 4; ++i) {
    auto s = (*backend)->snapshot();
    ASSERT_TRUE(s) << s.error().message;
    snaps.push_back(std::move(*s));
    clock_.advance(nvml::kCounterReadInterval);  // the energy counter is read once per period
  }
  auto util = [&](int s) { return *snaps[s].gpus[0].utilization_pct; };
  EXPECT_EQ(util(0), 35u);
  EXPECT_EQ(util(1), 80u);
  EXPECT_EQ(util(2), 97u);
  EXPECT_EQ(util(3), 97u);  // the scenario clamps at its last step
  EXPECT_EQ(*snaps[1].gpus[0].memory_used_mib, 20480u);
  EXPECT_EQ(*snaps[2].gpus[0].temperature_c, 63);
  EXPECT_DOUBLE_EQ(*snaps[1].gpus[0].power_draw_w, 420.25);
  EXPECT_EQ(*snaps[1].gpus[0].clock_event_reasons, 0x4u);
  EXPECT_EQ(*snaps[2].gpus[4].clock_event_reasons, 0x64u);
  EXPECT_EQ(*snaps[2].gpus[4].performance_state, 2u);
  // The energy counter climbs by 250 J per query.
  EXPECT_EQ(*snaps[1].gpus[0].energy_mj - *snaps[0].gpus[0].energy_mj, 250000u);
  EXPECT_EQ(*snaps[3].gpus[0].energy_mj - *snaps[2].gpus[0].energy_mj, 250000u);
}

TEST_F(NvmlBackendTest, ProcessListsAreMergedWithKinds) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_THAT(processes_of(snap->gpus[2]), ::testing::ElementsAre(ProcessView{4301, 512, ProcessKind::Compute},
                                                                  ProcessView{4302, 2048, ProcessKind::Mps},
                                                                  ProcessView{4303, 4096, ProcessKind::Mps}));
  EXPECT_THAT(processes_of(snap->gpus[5]), ::testing::ElementsAre(ProcessView{4601, 512, ProcessKind::Graphics}));
  EXPECT_THAT(processes_of(snap->gpus[6]),
              ::testing::ElementsAre(ProcessView{4701, 14000, ProcessKind::ComputeGraphics}));
  EXPECT_THAT(processes_of(snap->gpus[7]), ::testing::ElementsAre(ProcessView{4801, 5000, ProcessKind::Compute},
                                                                  ProcessView{4802, 5000, ProcessKind::Compute}));
  EXPECT_TRUE(snap->gpus[3].processes.empty());
}

TEST_F(NvmlBackendTest, NotSupportedAndFailingFieldsAreAbsentWithReason) {
  auto backend = open(fixture("mixed.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 4u);
  EXPECT_EQ(snap->driver_version, "535.161.08");
  EXPECT_EQ(snap->cuda_driver_version, "12.2");

  const auto& a100 = snap->gpus[0];
  EXPECT_EQ(a100.health, Health::Ok);
  EXPECT_FALSE(a100.fan_pct.has_value());
  EXPECT_EQ(a100.fan_pct.why(), Absent::NotSupported);
  EXPECT_EQ(*a100.temperature_c, 55);  // the rest of the board still reads

  const auto& t4 = snap->gpus[1];
  EXPECT_EQ(t4.health, Health::Ok);
  EXPECT_EQ(t4.fan_pct.why(), Absent::NotSupported);
  EXPECT_FALSE(t4.mig_enabled.has_value());
  EXPECT_EQ(t4.mig_enabled.why(), Absent::NotSupported);
  EXPECT_FALSE(t4.performance_state.has_value());  // NVML_PSTATE_UNKNOWN (32) is no P-state
  EXPECT_EQ(t4.performance_state.why(), Absent::Unavailable);
  EXPECT_EQ(t4.ecc_uncorrected_volatile.why(), Absent::NoPermission);
  EXPECT_FALSE(t4.temperature_c.has_value());
  EXPECT_EQ(t4.temperature_c.why(), Absent::Error);
  EXPECT_DOUBLE_EQ(*t4.power_draw_w, 27.5);
  EXPECT_EQ(*t4.clock_event_reasons, 0x1u);

  const auto& geforce = snap->gpus[3];
  EXPECT_EQ(geforce.ecc_uncorrected_volatile.why(), Absent::NotSupported);
  EXPECT_EQ(geforce.mig_enabled.why(), Absent::NotSupported);
  EXPECT_EQ(*geforce.fan_pct, 30u);
  EXPECT_DOUBLE_EQ(*geforce.power_draw_w, 61.25);
}

TEST_F(NvmlBackendTest, LostGpuIsReportedWhileOthersAreFine) {
  auto backend = open(fixture("mixed.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 4u);

  const auto& lost = snap->gpus[2];
  EXPECT_EQ(lost.index, 2u);
  EXPECT_EQ(lost.health, Health::Lost);
  EXPECT_EQ(lost.health_message, "GPU is lost");
  EXPECT_FALSE(lost.memory_total_mib.has_value());
  EXPECT_FALSE(lost.temperature_c.has_value());
  EXPECT_FALSE(lost.persistence_mode.has_value());
  EXPECT_TRUE(lost.processes.empty());

  for (unsigned i : {0u, 1u, 3u}) {
    EXPECT_EQ(snap->gpus[i].health, Health::Ok) << "GPU " << i;
    EXPECT_EQ(snap->gpus[i].index, i);
    EXPECT_TRUE(snap->gpus[i].memory_used_mib.has_value()) << "GPU " << i;
  }
  EXPECT_EQ(*snap->gpus[3].memory_used_mib, 3100u);
  // A lost GPU says nothing about persistence mode, so it is not named in the warning.
  ASSERT_EQ(snap->warnings.size(), 1u);
  EXPECT_THAT(snap->warnings[0], HasSubstr("on GPU 0, 3:"));
}

TEST_F(NvmlBackendTest, EveryFieldOfALostGpuSaysGpuLost) {
  auto backend = open(fixture("mixed.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& lost = snap->gpus.at(2);
  ASSERT_EQ(lost.health, Health::Lost);
  for (const auto& f : core::kFields) {
    const auto v = f.read(lost);
    EXPECT_FALSE(v.has_value()) << f.json_key;
    EXPECT_EQ(v.why, Absent::GpuLost) << f.json_key;
  }
}

TEST_F(NvmlBackendTest, UtilizationUnderMigSaysMigNotUnsupported) {
  const auto path = write_scenario({{"gpus",
                                     {{{"memory_total_mib", 81920},
                                       {"memory_used_mib", 100},
                                       {"mig_mode", 1},
                                       {"utilization_gpu_pct", "not_supported"},
                                       {"temperature_c", 40}},
                                      {{"memory_total_mib", 81920},
                                       {"memory_used_mib", 100},
                                       {"mig_mode", 0},
                                       {"utilization_gpu_pct", "not_supported"},
                                       {"temperature_c", 40}}}}});
  auto backend = open(path);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 2u);
  EXPECT_EQ(snap->gpus[0].utilization_pct.why(), Absent::MigEnabled);
  EXPECT_EQ(snap->gpus[0].memory_utilization_pct.why(), Absent::MigEnabled);
  EXPECT_EQ(snap->gpus[1].utilization_pct.why(), Absent::NotSupported);  // MIG off: the device lacks it
  EXPECT_EQ(*snap->gpus[0].temperature_c, 40);
}

TEST_F(NvmlBackendTest, UnknownProcessMemoryAndSharedProcesses) {
  auto backend = open(fixture("mixed.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  // 4242 is on the compute and graphics lists; 5151 on compute and MPS with memory unknown.
  EXPECT_THAT(processes_of(snap->gpus[0]), ::testing::ElementsAre(ProcessView{4242, 4096, ProcessKind::ComputeGraphics},
                                                                  ProcessView{5151, std::nullopt, ProcessKind::Compute},
                                                                  ProcessView{6006, 256, ProcessKind::Graphics},
                                                                  ProcessView{7007, 1024, ProcessKind::Mps}));
  EXPECT_THAT(processes_of(snap->gpus[3]), ::testing::ElementsAre(ProcessView{9001, std::nullopt, ProcessKind::Compute},
                                                                  ProcessView{1500, 300, ProcessKind::Graphics}));
  EXPECT_TRUE(snap->process_visibility.complete);
}

TEST_F(NvmlBackendTest, PersistenceModeOffIsOneWarningNamingTheGpus) {
  auto backend = open(fixture("mixed.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_FALSE(*snap->gpus[0].persistence_mode);
  EXPECT_TRUE(*snap->gpus[1].persistence_mode);
  ASSERT_EQ(snap->warnings.size(), 1u);
  EXPECT_THAT(snap->warnings[0], AllOf(HasSubstr("persistence mode is off on GPU 0, 3:"), HasSubstr("nvidia-smi -pm 1"),
                                       HasSubstr("nvidia-persistenced")));
}

TEST_F(NvmlBackendTest, VersionMismatchSaysToReloadTheModule) {
  auto backend = open(fixture("version_mismatch.json"));
  ASSERT_FALSE(backend);
  const std::string& message = backend.error().message;
  EXPECT_THAT(message, AllOf(HasSubstr(GF_FAKE_NVML), HasSubstr("driver was upgraded"), HasSubstr("kernel module"),
                             HasSubstr("reload"), HasSubstr("reboot")));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_EQ(fake().calls_of("nvmlInit_v2"), 1u);
  EXPECT_EQ(fake().init_refcount(), 0);
  EXPECT_EQ(fake().calls_of("nvmlShutdown"), 0u);  // a failed init is not paired with a shutdown
}

TEST_F(NvmlBackendTest, DriverNotLoadedNamesTheLibrary) {
  auto backend = open(fixture("driver_not_loaded.json"));
  ASSERT_FALSE(backend);
  EXPECT_THAT(backend.error().message, AllOf(HasSubstr(GF_FAKE_NVML), HasSubstr("kernel driver is not running"),
                                             HasSubstr("Driver Not Loaded")));
  EXPECT_EQ(backend.error().message.find('\n'), std::string::npos);
}

TEST_F(NvmlBackendTest, MissingLibraryNamesThePath) {
  const std::string path = (dir_ / "no-such-dir" / "libnvidia-ml.so.1").string();
  auto backend = open(fixture("eight_gpus.json"), path.c_str());
  ASSERT_FALSE(backend);
  EXPECT_THAT(backend.error().message, AllOf(::testing::StartsWith("nvml: "), HasSubstr(path)));
  EXPECT_EQ(backend.error().message.find('\n'), std::string::npos);
}

TEST_F(NvmlBackendTest, LibraryWithoutNvmlSymbolsListsWhatIsMissing) {
  auto backend = open(fixture("eight_gpus.json"), "libm.so.6");
  ASSERT_FALSE(backend);
  EXPECT_THAT(backend.error().message,
              AllOf(HasSubstr("libm.so.6"), HasSubstr("nvmlInit_v2|nvmlInit"), HasSubstr("nvmlShutdown"),
                    HasSubstr("nvmlDeviceGetHandleByIndex_v2|nvmlDeviceGetHandleByIndex")));
}

TEST_F(NvmlBackendTest, CurrentDriverUsesTheVersionedNames) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  ASSERT_TRUE((*backend)->snapshot());
  EXPECT_EQ(fake().calls_of("nvmlInit_v2"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlInit"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetCount_v2"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetHandleByIndex_v2"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlEventSetCreate"), 0u);  // a one-shot backend does not listen for XIDs
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetPciInfo_v3"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetPciInfo_v2"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMemoryInfo_v2"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMemoryInfo"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetComputeRunningProcesses_v3"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetComputeRunningProcesses"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetCurrentClocksEventReasons"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetCurrentClocksThrottleReasons"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlSystemGetCudaDriverVersion_v2"), 1u);
}

TEST_F(NvmlBackendTest, OldDriverFallsBackToV1Names) {
  auto backend = open(fixture("eight_gpus.json"), GF_FAKE_NVML_OLD);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 8u);
  EXPECT_EQ(fake_old().calls_of("nvmlInit"), 1u);
  EXPECT_EQ(snap->cuda_driver_version, "12.4");  // via nvmlSystemGetCudaDriverVersion

  const auto& g = snap->gpus[0];
  EXPECT_EQ(g.health, Health::Ok);
  EXPECT_EQ(g.uuid, "GPU-6f2a0c1e-8b1d-4c55-9a3e-1b0000000000");
  EXPECT_EQ(g.pci_bus_id, "00000000:1B:00.0");  // rebuilt from the legacy struct's numbers
  EXPECT_EQ(*g.memory_total_mib, 81559u);
  EXPECT_EQ(*g.memory_used_mib, 10240u + 529u);  // v1 counts the reservation as used
  EXPECT_EQ(*g.memory_free_mib, 81559u - 10240u - 529u);
  EXPECT_EQ(*g.utilization_pct, 35u);
  EXPECT_EQ(*g.clock_event_reasons, 0u);  // via …ClocksThrottleReasons
  EXPECT_EQ(fake_old().calls_of("nvmlDeviceGetCurrentClocksThrottleReasons"), 8u);
  EXPECT_EQ(*g.ecc_uncorrected_volatile, 2u);
  EXPECT_TRUE(*g.persistence_mode);
  // Symbols the old driver lacks blank their fields.
  EXPECT_EQ(g.energy_mj.why(), Absent::NotSupported);
  EXPECT_EQ(g.mig_enabled.why(), Absent::NotSupported);
  EXPECT_FALSE(snap->gpus[7].mig_enabled.has_value());

  // v1 process layout (16-byte entries): pids and memory still line up, MPS is not listed.
  EXPECT_THAT(processes_of(g), ::testing::ElementsAre(ProcessView{4101, 9700, ProcessKind::Compute}));
  EXPECT_THAT(processes_of(snap->gpus[7]), ::testing::ElementsAre(ProcessView{4801, 5000, ProcessKind::Compute},
                                                                  ProcessView{4802, 5000, ProcessKind::Compute}));
  EXPECT_THAT(processes_of(snap->gpus[2]), ::testing::ElementsAre(ProcessView{4301, 512, ProcessKind::Compute}));
  EXPECT_THAT(processes_of(snap->gpus[6]),
              ::testing::ElementsAre(ProcessView{4701, 14000, ProcessKind::ComputeGraphics}));
}

TEST_F(NvmlBackendTest, OldDriverBackendShutsDownToo) {
  {
    auto backend = open(fixture("eight_gpus.json"), GF_FAKE_NVML_OLD);
    ASSERT_TRUE(backend) << backend.error().message;
    EXPECT_EQ(fake_old().init_refcount(), 1);
  }
  EXPECT_EQ(fake_old().init_refcount(), 0);
  EXPECT_EQ(fake_old().calls_of("nvmlShutdown"), 1u);
}

}  // namespace
}  // namespace gf::backends::nvml_test
