// The amdgpu backend on the fixture trees tests/fixtures/sysfs/two_gpus and tests/fixtures/proc_amd.
// Tests that change files work on a copy in a per-test temp dir.
#include "backends/amdgpu/amdgpu_backend.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/ports/clock.hpp"

#include "gf_test_paths.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/unprivileged.hpp"

namespace gf::backends {
namespace {

namespace fs = std::filesystem;
using core::Absent;

const std::string kFixtures = GF_FIXTURES_DIR;
const std::string kSysfs = kFixtures + "/sysfs/two_gpus";
const std::string kProc = kFixtures + "/proc_amd";

class FixedClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return {}; }
  std::chrono::system_clock::time_point wall_now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  }
};

BackendOptions options(const std::string& sysfs_root, const std::string& proc_root,
                       const core::Clock* clock = nullptr) {
  BackendOptions o;
  o.sysfs_root = sysfs_root;
  o.proc_root = proc_root;
  o.clock = clock;
  return o;
}

core::Snapshot snapshot_of(const BackendOptions& o) {
  auto b = open_amdgpu(o);
  if (!b) {
    ADD_FAILURE() << "open_amdgpu: " << b.error().message;
    return {};
  }
  auto s = (*b)->snapshot();
  if (!s) {
    ADD_FAILURE() << "snapshot: " << s.error().message;
    return {};
  }
  return std::move(*s);
}

const core::GpuProcess* find_pid(const core::GpuReading& g, std::uint32_t pid) {
  for (const auto& p : g.processes)
    if (p.pid == pid) return &p;
  return nullptr;
}

// ---- the fixture as it is -----------------------------------------------------------------------

TEST(AmdgpuBackend, FindsTheTwoAmdgpuCardsInCardOrder) {
  FixedClock clock;
  const auto s = snapshot_of(options(kSysfs, kProc, &clock));
  EXPECT_EQ(s.backend, "amdgpu");
  EXPECT_FALSE(s.simulated);
  EXPECT_EQ(s.timestamp, clock.wall_now());
  EXPECT_EQ(s.driver_version, "6.8.5");
  EXPECT_TRUE(s.cuda_driver_version.empty());
  // card2 (Intel), card3 (bound to radeon), card0-DP-1 and renderD128/129 are not GPUs of ours.
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].index, 0u);
  EXPECT_EQ(s.gpus[0].pci_bus_id, "0000:03:00.0");
  EXPECT_EQ(s.gpus[1].index, 1u);
  EXPECT_EQ(s.gpus[1].pci_bus_id, "0000:0a:00.0");
}

TEST(AmdgpuBackend, ReadsAFullyPopulatedCard) {
  const auto s = snapshot_of(options(kSysfs, kProc));
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& g = s.gpus[0];
  EXPECT_EQ(g.name, "AMD Radeon RX 6800 XT");
  EXPECT_EQ(g.uuid, "AMD-a1b2c3d4e5f60718");
  EXPECT_EQ(g.health, core::Health::Ok);
  EXPECT_TRUE(g.health_message.empty());
  EXPECT_EQ(g.utilization_pct, 37u);
  EXPECT_EQ(g.memory_utilization_pct, 12u);
  EXPECT_EQ(g.memory_total_mib, 16368u);
  EXPECT_EQ(g.memory_used_mib, 1024u);  // 1024.5 MiB, rounded down
  EXPECT_EQ(g.memory_free_mib, 15344u);
  EXPECT_EQ(g.temperature_c, 45);
  ASSERT_TRUE(g.power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_draw_w, 123.456789);  // power1_average wins over power1_input
  ASSERT_TRUE(g.power_limit_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 255.0);
  EXPECT_EQ(g.fan_pct, 50u);  // 128 / 255
  EXPECT_EQ(g.clock_graphics_mhz, 1800u);
  EXPECT_EQ(g.clock_memory_mhz, 1000u);
  EXPECT_EQ(g.ecc_uncorrected_volatile, 3u);
  // power_dpm_force_performance_level "auto" is not a P-state; NVIDIA-only fields stay unqueried.
  EXPECT_FALSE(g.performance_state.has_value());
  EXPECT_FALSE(g.mig_enabled.has_value());
  EXPECT_FALSE(g.persistence_mode.has_value());
}

TEST(AmdgpuBackend, SparseCardHasAbsentFieldsAndFallbacks) {
  const auto s = snapshot_of(options(kSysfs, kProc));
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& g = s.gpus[1];
  EXPECT_EQ(g.health, core::Health::Ok);
  EXPECT_EQ(g.name, "AMD GPU [1002:744c]");   // no product_name
  EXPECT_EQ(g.uuid, "AMD-PCI-0000:0a:00.0");  // no unique_id
  EXPECT_EQ(g.utilization_pct, 0u);           // a real zero, not an absent value
  EXPECT_FALSE(g.memory_utilization_pct.has_value());
  EXPECT_EQ(g.memory_utilization_pct.why(), Absent::NotSupported);
  EXPECT_EQ(g.memory_total_mib, 24560u);
  EXPECT_EQ(g.memory_used_mib, 256u);
  EXPECT_EQ(g.memory_free_mib, 24304u);
  EXPECT_EQ(g.temperature_c, 38);
  ASSERT_TRUE(g.power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_draw_w, 15.0);  // power1_input only
  ASSERT_TRUE(g.power_limit_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 303.0);
  EXPECT_FALSE(g.fan_pct.has_value());
  EXPECT_EQ(g.fan_pct.why(), Absent::NotSupported);
  EXPECT_EQ(g.clock_graphics_mhz, 19u);  // the deep-sleep level "S:" is current
  EXPECT_EQ(g.clock_memory_mhz, 96u);
  EXPECT_FALSE(g.ecc_uncorrected_volatile.has_value());
  EXPECT_EQ(g.ecc_uncorrected_volatile.why(), Absent::NotSupported);
}

TEST(AmdgpuBackend, AttributesProcessesByPciAddressCountingEachClientOnce) {
  const auto s = snapshot_of(options(kSysfs, kProc));
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_TRUE(s.process_visibility.complete);
  const auto& g0 = s.gpus[0];
  ASSERT_EQ(g0.processes.size(), 2u);
  // blender: client 42 on fds 4 and 5 (1 GiB, counted once) + client 43 (2 MiB).
  const auto* blender0 = find_pid(g0, 1234);
  ASSERT_NE(blender0, nullptr);
  EXPECT_EQ(blender0->used_memory_mib, 1026u);
  EXPECT_EQ(blender0->kind, core::ProcessKind::Compute);
  EXPECT_TRUE(blender0->name.empty());  // the caller resolves names
  EXPECT_TRUE(blender0->user.empty());
  // Xorg's client has no drm-memory-vram: unknown, not zero.
  const auto* xorg = find_pid(g0, 3456);
  ASSERT_NE(xorg, nullptr);
  EXPECT_FALSE(xorg->used_memory_mib.has_value());

  const auto& g1 = s.gpus[1];
  ASSERT_EQ(g1.processes.size(), 2u);
  const auto* blender1 = find_pid(g1, 1234);
  ASSERT_NE(blender1, nullptr);
  EXPECT_EQ(blender1->used_memory_mib, 512u);
  const auto* trainer = find_pid(g1, 2345);
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->used_memory_mib, 3072u);
  // firefox (i915 only) and the client of an unknown GPU (0000:99:00.0) are nowhere.
  for (const auto& g : s.gpus) {
    EXPECT_EQ(find_pid(g, 4567), nullptr);
    EXPECT_EQ(find_pid(g, 5678), nullptr);
  }
}

TEST(AmdgpuBackend, MissingRootFailsToOpenWithAClearReason) {
  const auto b = open_amdgpu(options("/nonexistent-gpufleet-root", kProc));
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message, "amdgpu: no AMD GPU under /nonexistent-gpufleet-root/sys/class/drm");
}

TEST(AmdgpuBackend, MissingProcRootMeansNoProcessesNotAnError) {
  const auto s = snapshot_of(options(kSysfs, "/nonexistent-gpufleet-proc"));
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_TRUE(s.gpus[0].processes.empty());
  EXPECT_TRUE(s.gpus[1].processes.empty());
  EXPECT_EQ(s.gpus[0].utilization_pct, 37u);
}

TEST(AmdgpuBackend, DefaultClockIsTheSystemClock) {
  const auto before = std::chrono::system_clock::now();
  const auto s = snapshot_of(options(kSysfs, kProc));
  EXPECT_GE(s.timestamp, before);
  EXPECT_LE(s.timestamp, std::chrono::system_clock::now());
}

// ---- copies of the fixture, changed ------------------------------------------------------------

class AmdgpuTempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    // copy_symlinks keeps the relative links, so the copy resolves inside itself.
    const auto how = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    fs::copy(kSysfs, sysfs(), how);
    fs::copy(kProc, proc(), how);
    ASSERT_TRUE(fs::exists(card_dev(0) + "/vendor"));
  }

  std::string sysfs() const { return (root_ / "sysfs").string(); }
  std::string proc() const { return (root_ / "proc").string(); }
  std::string card_dev(int n) const { return sysfs() + "/sys/class/drm/card" + std::to_string(n) + "/device"; }
  std::string hwmon(int n) const { return card_dev(n) + (n == 0 ? "/hwmon/hwmon3" : "/hwmon/hwmon5"); }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    ASSERT_TRUE(f.good()) << path;
  }
  static void remove(const std::string& path) { ASSERT_TRUE(fs::remove(path)) << path; }

  test::TempDir tmp_;
  const fs::path root_ = tmp_.path();
};

TEST_F(AmdgpuTempTree, CardVanishingAfterOpenIsAnErrorOnThatCardOnly) {
  auto b = open_amdgpu(options(sysfs(), proc()));
  ASSERT_TRUE(b.has_value()) << b.error().message;
  ASSERT_GT(fs::remove_all(sysfs() + "/sys/devices/pci0000:00/0000:0a:00.0"), 0u);
  const auto s = (*b)->snapshot();
  ASSERT_TRUE(s.has_value()) << s.error().message;
  ASSERT_EQ(s->gpus.size(), 2u);
  const auto& gone = s->gpus[1];
  EXPECT_EQ(gone.health, core::Health::Error);
  EXPECT_NE(gone.health_message.find("card1"), std::string::npos) << gone.health_message;
  EXPECT_NE(gone.health_message.find("0000:0a:00.0"), std::string::npos) << gone.health_message;
  EXPECT_EQ(gone.pci_bus_id, "0000:0a:00.0");  // identity kept from discovery
  EXPECT_EQ(gone.utilization_pct.why(), Absent::Error);
  EXPECT_EQ(gone.memory_used_mib.why(), Absent::Error);
  const auto& fine = s->gpus[0];
  EXPECT_EQ(fine.health, core::Health::Ok);
  EXPECT_EQ(fine.utilization_pct, 37u);
}

TEST_F(AmdgpuTempTree, GarbageIsAnErrorAndMissingIsNotSupported) {
  write(card_dev(0) + "/gpu_busy_percent", "abc\n");
  write(card_dev(0) + "/mem_busy_percent", "101\n");               // not a percentage
  write(card_dev(0) + "/pp_dpm_sclk", "0: 500Mhz\n1: 1800Mhz\n");  // nothing marked current
  write(card_dev(0) + "/ras/umc_err_count", "ce: 1\n");
  write(hwmon(0) + "/temp1_input", "\n");
  write(hwmon(0) + "/pwm1_max", "0\n");
  remove(card_dev(0) + "/mem_info_vram_used");
  remove(card_dev(0) + "/pp_dpm_mclk");
  remove(hwmon(0) + "/power1_cap");
  const auto s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& g = s.gpus[0];
  EXPECT_EQ(g.health, core::Health::Ok);
  EXPECT_EQ(g.utilization_pct.why(), Absent::Error);
  EXPECT_FALSE(g.utilization_pct.has_value());
  EXPECT_EQ(g.memory_utilization_pct.why(), Absent::Error);
  EXPECT_FALSE(g.clock_graphics_mhz.has_value());
  EXPECT_EQ(g.clock_graphics_mhz.why(), Absent::Error);
  EXPECT_EQ(g.ecc_uncorrected_volatile.why(), Absent::Error);
  EXPECT_EQ(g.temperature_c.why(), Absent::Error);
  EXPECT_EQ(g.fan_pct.why(), Absent::Error);
  EXPECT_EQ(g.memory_total_mib, 16368u);
  EXPECT_EQ(g.memory_used_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.memory_free_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.clock_memory_mhz.why(), Absent::NotSupported);
  EXPECT_EQ(g.power_limit_w.why(), Absent::NotSupported);
  EXPECT_TRUE(g.power_draw_w.has_value());
}

TEST_F(AmdgpuTempTree, UsedAboveTotalIsAnErrorForFree) {
  write(card_dev(1) + "/mem_info_vram_used", "99999999999999\n");
  const auto s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[1].memory_used_mib, 99999999999999ull >> 20);
  EXPECT_EQ(s.gpus[1].memory_free_mib.why(), Absent::Error);
}

TEST_F(AmdgpuTempTree, PowerFallsBackToInputAndFanRespectsEnable) {
  remove(hwmon(0) + "/power1_average");
  write(hwmon(0) + "/fan1_enable", "0\n");
  auto s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 2u);
  ASSERT_TRUE(s.gpus[0].power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*s.gpus[0].power_draw_w, 130.0);
  EXPECT_EQ(s.gpus[0].fan_pct.why(), Absent::Unavailable);

  // Without pwm1_max the hwmon default of 255 applies; a full pwm is 100 %.
  remove(hwmon(0) + "/fan1_enable");
  remove(hwmon(0) + "/pwm1_max");
  write(hwmon(0) + "/pwm1", "255\n");
  remove(hwmon(0) + "/power1_input");
  s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].fan_pct, 100u);
  EXPECT_EQ(s.gpus[0].power_draw_w.why(), Absent::NotSupported);
}

TEST_F(AmdgpuTempTree, NoModuleVersionMeansEmptyDriverVersion) {
  remove(sysfs() + "/sys/module/amdgpu/version");
  const auto s = snapshot_of(options(sysfs(), proc()));
  EXPECT_EQ(s.gpus.size(), 2u);
  EXPECT_TRUE(s.driver_version.empty());
}

TEST_F(AmdgpuTempTree, OnlyNonAmdgpuCardsMeansNoBackend) {
  remove(sysfs() + "/sys/class/drm/card0");
  remove(sysfs() + "/sys/class/drm/card1");
  const auto b = open_amdgpu(options(sysfs(), proc()));
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message, "amdgpu: no AMD GPU under " + sysfs() + "/sys/class/drm");
}

TEST_F(AmdgpuTempTree, CardsAreOrderedByNumberNotByName) {
  // card9 and card10 as extra names for the two devices: by name card10 would sort before card9.
  const std::string drm = sysfs() + "/sys/class/drm/";
  fs::create_symlink(fs::read_symlink(drm + "card1"), drm + "card9");
  fs::create_symlink(fs::read_symlink(drm + "card0"), drm + "card10");
  const auto s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 4u);
  EXPECT_EQ(s.gpus[0].pci_bus_id, "0000:03:00.0");
  EXPECT_EQ(s.gpus[1].pci_bus_id, "0000:0a:00.0");
  EXPECT_EQ(s.gpus[2].pci_bus_id, "0000:0a:00.0");  // card9
  EXPECT_EQ(s.gpus[3].pci_bus_id, "0000:03:00.0");  // card10
  EXPECT_EQ(s.gpus[3].index, 3u);
}

TEST_F(AmdgpuTempTree, NonDeviceFdsAreNotReadAndMissingFdLinksAreTolerated) {
  // fd 3 of blender is a socket: even if its fdinfo looked like a DRM client it must be skipped
  // (in a real /proc that cannot happen; here it proves the link is consulted).
  std::string client43 = test::slurp(proc() + "/1234/fdinfo/6");
  const auto at = client43.find("drm-client-id:\t43");
  ASSERT_NE(at, std::string::npos);
  client43.replace(at, 17, "drm-client-id:\t99");
  write(proc() + "/1234/fdinfo/3", client43);
  // The trainer's fd links are gone (as in a hand-made tree): its fdinfo is read anyway.
  ASSERT_GT(fs::remove_all(proc() + "/2345/fd"), 0u);
  const auto s = snapshot_of(options(sysfs(), proc()));
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto* blender = find_pid(s.gpus[0], 1234);
  ASSERT_NE(blender, nullptr);
  EXPECT_EQ(blender->used_memory_mib, 1026u);  // not 1028: client 99 was not counted
  const auto* trainer = find_pid(s.gpus[1], 2345);
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->used_memory_mib, 3072u);
}

TEST_F(AmdgpuTempTree, UnreadableProcessesAreSkippedAndReportedAsInvisible) {
  fs::permissions(proc() + "/2345/fdinfo", fs::perms::none);
  // Returns which expectation failed (0: none), so it can run in a child without privileges.
  auto check = [&]() -> int {
    const auto s = snapshot_of(options(sysfs(), proc()));
    if (s.gpus.size() != 2u) return 1;
    if (find_pid(s.gpus[1], 2345) != nullptr) return 2;
    if (find_pid(s.gpus[1], 1234) == nullptr) return 3;
    if (s.process_visibility.complete) return 4;
    if (s.process_visibility.message.find("1 processes") == std::string::npos) return 5;
    return 0;
  };
  // Root reads any directory: the check runs as nobody in a child process.
  const int failed = test::run_unprivileged(check);
  fs::permissions(proc() + "/2345/fdinfo", fs::perms::owner_all);
  EXPECT_EQ(failed, 0) << "expectation " << failed << " failed (90: could not drop privileges)";
}

}  // namespace
}  // namespace gf::backends
