// The intel backend on the fixture trees tests/fixtures/sysfs/intel and tests/fixtures/proc_intel, as
// they are and in changed copies: two collections for the rates, a card that goes away, files that
// cannot be read.
#include "backends/intel/intel_backend.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "backends/intel/device_names.hpp"
#include "gf_test_paths.hpp"
#include "support/fake_clock.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/unprivileged.hpp"

namespace gf::backends {
namespace {

namespace fs = std::filesystem;
using core::Absent;
using namespace std::chrono_literals;

const std::string kIntelSysfs = std::string(GF_FIXTURES_DIR) + "/sysfs/intel";
const std::string kIntelProc = std::string(GF_FIXTURES_DIR) + "/proc_intel";

using SteppedClock = test::FakeClock;

BackendOptions intel_options(const std::string& sysfs_root, const std::string& proc_root, const core::Clock* clock) {
  BackendOptions o;
  o.sysfs_root = sysfs_root;
  o.proc_root = proc_root;
  o.clock = clock;
  return o;
}

std::unique_ptr<Backend> open_or_fail(const BackendOptions& o) {
  auto b = open_intel(o);
  if (!b) {
    ADD_FAILURE() << "open_intel: " << b.error().message;
    return nullptr;
  }
  return std::move(*b);
}

core::Snapshot take(Backend& b) {
  auto s = b.snapshot();
  if (!s) {
    ADD_FAILURE() << "snapshot: " << s.error().message;
    return {};
  }
  return std::move(*s);
}

const core::GpuProcess* process_of(const core::GpuReading& g, std::uint32_t pid) {
  for (const auto& p : g.processes)
    if (p.pid == pid) return &p;
  return nullptr;
}

// ---- the fixture as it is -----------------------------------------------------------------------

TEST(IntelBackend, FindsTheXeAndI915CardsAndNothingElse) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(kIntelSysfs, kIntelProc, &clock));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->name(), "intel");
  const auto s = take(*b);
  EXPECT_EQ(s.backend, "intel");
  EXPECT_TRUE(s.driver_version.empty());
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].index, 0u);
  EXPECT_EQ(s.gpus[0].pci_bus_id, "0000:03:00.0");
  EXPECT_EQ(s.gpus[0].name, "Intel Arc B580");
  EXPECT_EQ(s.gpus[0].uuid, "INTEL-PCI-0000:03:00.0");
  EXPECT_EQ(s.gpus[1].index, 1u);
  EXPECT_EQ(s.gpus[1].pci_bus_id, "0000:00:02.0");
  EXPECT_EQ(s.gpus[1].name, "Intel UHD Graphics 770");
  EXPECT_TRUE(s.process_visibility.complete);
}

TEST(IntelBackend, XeDiscreteCardOnTheFirstCollection) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(kIntelSysfs, kIntelProc, &clock));
  ASSERT_NE(b, nullptr);
  const auto g = take(*b).gpus.at(0);
  EXPECT_EQ(g.health, core::Health::Ok);
  EXPECT_EQ(g.memory_total_mib, 12288u);
  EXPECT_EQ(g.memory_used_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.memory_free_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.clock_graphics_mhz, 2350u);  // tile0/gt0, not the media GT
  EXPECT_EQ(g.clock_graphics_max_mhz, 2850u);
  EXPECT_EQ(g.power_limit_w, 190.0);
  EXPECT_EQ(g.energy_mj, 123456789u);
  // Rates need a second collection.
  EXPECT_EQ(g.power_draw_w.why(), Absent::Unavailable);
  EXPECT_EQ(g.utilization_pct.why(), Absent::Unavailable);
  EXPECT_EQ(g.temperature_c.why(), Absent::NotSupported);
  EXPECT_EQ(g.fan_pct.why(), Absent::NotSupported);
  EXPECT_EQ(g.mig_enabled.why(), Absent::NotQueried);
}

TEST(IntelBackend, I915IntegratedCardHasNoMemoryOrPowerOfItsOwn) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(kIntelSysfs, kIntelProc, &clock));
  ASSERT_NE(b, nullptr);
  const auto g = take(*b).gpus.at(1);
  EXPECT_EQ(g.health, core::Health::Ok);
  EXPECT_EQ(g.memory_total_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.memory_used_mib.why(), Absent::NotSupported);
  EXPECT_EQ(g.clock_graphics_mhz, 1450u);
  EXPECT_EQ(g.clock_graphics_max_mhz, 1550u);
  EXPECT_EQ(g.power_draw_w.why(), Absent::NotSupported);
  EXPECT_EQ(g.power_limit_w.why(), Absent::NotSupported);
  EXPECT_EQ(g.energy_mj.why(), Absent::NotSupported);
}

TEST(IntelBackend, ProcessesCountEachClientOnceWithTheRightRegions) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(kIntelSysfs, kIntelProc, &clock));
  ASSERT_NE(b, nullptr);
  const auto s = take(*b);
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& xe = s.gpus[0];
  ASSERT_EQ(xe.processes.size(), 2u);
  const auto* ollama = process_of(xe, 1100);
  ASSERT_NE(ollama, nullptr);
  EXPECT_EQ(ollama->used_memory_mib, 2560u);  // client 3 (three fds) once + client 4; VRAM only
  EXPECT_EQ(ollama->utilization_pct.why(), Absent::Unavailable);
  const auto* trainer = process_of(xe, 1300);
  ASSERT_NE(trainer, nullptr);
  EXPECT_FALSE(trainer->used_memory_mib.has_value());
  const auto& igpu = s.gpus[1];
  ASSERT_EQ(igpu.processes.size(), 2u);
  EXPECT_EQ(process_of(igpu, 1200)->used_memory_mib, 104u);
  EXPECT_EQ(process_of(igpu, 1300)->used_memory_mib, 4u);
  EXPECT_EQ(process_of(xe, 1400), nullptr);  // amdgpu
  EXPECT_EQ(process_of(xe, 1500), nullptr);  // a PCI device that is not ours
}

// ---- copies of the fixture, changed ------------------------------------------------------------

class IntelTempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto how = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    fs::copy(kIntelSysfs, sysfs(), how);
    fs::copy(kIntelProc, proc(), how);
    ASSERT_TRUE(fs::exists(xe_dev() + "/vendor"));
  }

  std::string sysfs() const { return (root_ / "sysfs").string(); }
  std::string proc() const { return (root_ / "proc").string(); }
  std::string xe_dev() const { return sysfs() + "/sys/class/drm/card0/device"; }
  std::string igpu_card() const { return sysfs() + "/sys/class/drm/card1"; }
  std::string xe_hwmon() const { return xe_dev() + "/hwmon/hwmon2"; }

  static void write(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::trunc);
    f << text;
    ASSERT_TRUE(f.good()) << path;
  }
  // Sets key's value in an fdinfo file, as the kernel would print it a moment later.
  static void set_key(const std::string& path, const std::string& key, const std::string& value) {
    std::string text = test::slurp(path);
    const std::regex line("(^|\n)" + key + ":\t[^\n]*");
    ASSERT_TRUE(std::regex_search(text, line)) << key << " in " << path;
    write(path, std::regex_replace(text, line, "$1" + key + ":\t" + value));
  }
  // A directory where a file should be: it exists, yet reading it fails (as EIO would), even as root.
  static void make_unreadable(const std::string& path) {
    fs::remove(path);
    fs::create_directory(path);
  }

  test::TempDir tmp_;
  const fs::path root_ = tmp_.path();
};

TEST_F(IntelTempTree, UtilizationAndPowerFromTheSecondCollection) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(sysfs(), proc(), &clock));
  ASSERT_NE(b, nullptr);
  (void)take(*b);
  // 2 s later, 300 J more: 150 W.
  clock.advance(2s);
  write(xe_hwmon() + "/energy1_input", "123756789000\n");
  // xe, 10 M GPU ticks: client 3 rcs +2.5 M (25 %), ccs +20 M over 4 engines (50 %); client 4 rcs
  // +1 M (10 %), ccs +8 M (20 %); pid 1300's client 9 rcs +3 M (30 %).
  for (const char* fd : {"4", "5", "6"}) {
    const std::string f = proc() + "/1100/fdinfo/" + fd;
    set_key(f, "drm-cycles-rcs", "3500000");
    set_key(f, "drm-cycles-ccs", "20000000");
    for (const char* cls : {"rcs", "bcs", "vcs", "vecs", "ccs"})
      set_key(f, std::string("drm-total-cycles-") + cls, "60000000");
  }
  const std::string c4 = proc() + "/1100/fdinfo/7";
  set_key(c4, "drm-cycles-rcs", "1500000");
  set_key(c4, "drm-cycles-ccs", "8000000");
  for (const char* cls : {"rcs", "ccs"}) set_key(c4, std::string("drm-total-cycles-") + cls, "60000000");
  const std::string c9 = proc() + "/1300/fdinfo/3";
  set_key(c9, "drm-cycles-rcs", "3000000");
  set_key(c9, "drm-total-cycles-rcs", "60000000");
  // i915 over the 2 s of wall time: client 7 render +0.5 s (25 %), video +2.4 s over 2 engines (60 %);
  // client 8 render +0.2 s (10 %).
  for (const char* fd : {"10", "11"}) {
    set_key(proc() + "/1200/fdinfo/" + fd, "drm-engine-render", "1500000000 ns");
    set_key(proc() + "/1200/fdinfo/" + fd, "drm-engine-video", "2400000000 ns");
  }
  set_key(proc() + "/1300/fdinfo/4", "drm-engine-render", "200000000 ns");

  const auto s = take(*b);
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& xe = s.gpus[0];
  ASSERT_TRUE(xe.power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*xe.power_draw_w, 150.0);
  EXPECT_EQ(xe.energy_mj, 123756789u);
  EXPECT_EQ(process_of(xe, 1100)->utilization_pct, 70u);  // ccs 50 + 20
  EXPECT_EQ(process_of(xe, 1300)->utilization_pct, 30u);
  EXPECT_EQ(xe.utilization_pct, 70u);  // rcs 65, ccs 70
  const auto& igpu = s.gpus[1];
  EXPECT_EQ(process_of(igpu, 1200)->utilization_pct, 60u);
  EXPECT_EQ(process_of(igpu, 1300)->utilization_pct, 10u);
  EXPECT_EQ(igpu.utilization_pct, 60u);  // render 35, video 60
  EXPECT_EQ(igpu.power_draw_w.why(), Absent::NotSupported);
}

TEST_F(IntelTempTree, AnEnergyCounterThatGoesBackIsNoReading) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(sysfs(), proc(), &clock));
  ASSERT_NE(b, nullptr);
  (void)take(*b);
  clock.advance(1s);
  write(xe_hwmon() + "/energy1_input", "5\n");  // the driver was reloaded
  auto s = take(*b);
  EXPECT_EQ(s.gpus.at(0).power_draw_w.why(), Absent::Unavailable);
  clock.advance(1s);
  write(xe_hwmon() + "/energy1_input", "20000005\n");  // and counts from there
  s = take(*b);
  ASSERT_TRUE(s.gpus.at(0).power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*s.gpus.at(0).power_draw_w, 20.0);
}

TEST_F(IntelTempTree, ACardThatDisappearsIsAnErrorOnThatCardOnly) {
  SteppedClock clock;
  auto b = open_or_fail(intel_options(sysfs(), proc(), &clock));
  ASSERT_NE(b, nullptr);
  (void)take(*b);
  ASSERT_GT(fs::remove_all(sysfs() + "/sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0"), 0u);
  clock.advance(1s);
  const auto s = take(*b);
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& gone = s.gpus[0];
  EXPECT_EQ(gone.health, core::Health::Error);
  EXPECT_NE(gone.health_message.find("card0"), std::string::npos) << gone.health_message;
  EXPECT_NE(gone.health_message.find("0000:03:00.0"), std::string::npos) << gone.health_message;
  EXPECT_EQ(gone.pci_bus_id, "0000:03:00.0");
  EXPECT_EQ(gone.memory_total_mib.why(), Absent::Error);
  EXPECT_EQ(gone.clock_graphics_mhz.why(), Absent::Error);
  EXPECT_EQ(gone.power_draw_w.why(), Absent::Error);
  EXPECT_EQ(gone.utilization_pct.why(), Absent::Error);
  EXPECT_EQ(gone.processes.size(), 2u);  // fdinfo still says who holds it open
  const auto& fine = s.gpus[1];
  EXPECT_EQ(fine.health, core::Health::Ok);
  EXPECT_EQ(fine.clock_graphics_mhz, 1450u);
  EXPECT_EQ(fine.utilization_pct, 0u);  // nothing moved in the second
}

TEST_F(IntelTempTree, UnreadableAndGarbledFilesAreErrorsAndMissingOnesNotSupported) {
  make_unreadable(xe_dev() + "/tile0/gt0/freq0/act_freq");
  write(xe_dev() + "/tile0/gt0/freq0/max_freq", "fast\n");
  make_unreadable(xe_hwmon() + "/energy1_input");
  fs::remove(xe_hwmon() + "/power1_max");
  write(xe_dev() + "/tile0/physical_vram_size_bytes", "-1\n");
  fs::remove(igpu_card() + "/gt_max_freq_mhz");
  SteppedClock clock;
  auto b = open_or_fail(intel_options(sysfs(), proc(), &clock));
  ASSERT_NE(b, nullptr);
  const auto s = take(*b);
  ASSERT_EQ(s.gpus.size(), 2u);
  const auto& xe = s.gpus[0];
  EXPECT_EQ(xe.health, core::Health::Ok);
  EXPECT_EQ(xe.clock_graphics_mhz.why(), Absent::Error);
  EXPECT_EQ(xe.clock_graphics_max_mhz.why(), Absent::Error);
  EXPECT_EQ(xe.energy_mj.why(), Absent::Error);
  EXPECT_EQ(xe.power_draw_w.why(), Absent::Error);
  EXPECT_EQ(xe.power_limit_w.why(), Absent::NotSupported);
  EXPECT_EQ(xe.memory_total_mib.why(), Absent::Error);
  EXPECT_EQ(s.gpus[1].clock_graphics_mhz, 1450u);
  EXPECT_EQ(s.gpus[1].clock_graphics_max_mhz.why(), Absent::NotSupported);
}

TEST_F(IntelTempTree, I915PerGtFilesAndATreeWithoutDriverLinks) {
  // A kernel with only the per-GT files (or a tree whose card-level ones are gone).
  for (const char* f : {"gt_act_freq_mhz", "gt_cur_freq_mhz", "gt_max_freq_mhz"}) fs::remove(igpu_card() + "/" + f);
  write(igpu_card() + "/gt/gt0/rps_act_freq_mhz", "900\n");
  // Without driver links, a device with tile directories is read as xe, others as i915.
  fs::remove(xe_dev() + "/driver");
  fs::remove(igpu_card() + "/device/driver");
  fs::remove(sysfs() + "/sys/class/drm/card2/device/driver");  // the vfio card is then taken on its vendor
  SteppedClock clock;
  auto b = open_or_fail(intel_options(sysfs(), proc(), &clock));
  ASSERT_NE(b, nullptr);
  const auto s = take(*b);
  ASSERT_EQ(s.gpus.size(), 3u);
  EXPECT_EQ(s.gpus[0].memory_total_mib, 12288u);
  EXPECT_EQ(s.gpus[0].clock_graphics_mhz, 2350u);
  EXPECT_EQ(s.gpus[1].clock_graphics_mhz, 900u);
  EXPECT_EQ(s.gpus[1].clock_graphics_max_mhz, 1550u);
  EXPECT_EQ(s.gpus[2].name, "Intel Arc A770");
  EXPECT_EQ(s.gpus[2].clock_graphics_mhz.why(), Absent::NotSupported);
}

TEST_F(IntelTempTree, NoIntelCardMeansNoBackend) {
  for (const char* c : {"card0", "card1", "card2"}) fs::remove(sysfs() + "/sys/class/drm/" + c);
  const auto b = open_intel(intel_options(sysfs(), proc(), nullptr));
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().message, "intel: no Intel GPU on i915 or xe under " + sysfs() + "/sys/class/drm");
}

TEST_F(IntelTempTree, UnreadableProcessesHideTheGpuFigureButNotTheRest) {
  // Returns which expectation failed (0: none), so it can run in a child without privileges.
  auto check = [&]() -> int {
    SteppedClock clock;
    auto b = open_intel(intel_options(sysfs(), proc(), &clock));
    if (!b) return 1;
    (void)(*b)->snapshot();
    clock.advance(1s);
    const auto s = (*b)->snapshot();
    if (!s || s->gpus.size() != 2u) return 2;
    if (s->process_visibility.complete) return 3;
    if (s->gpus[1].utilization_pct.why() != Absent::NoPermission) return 4;
    if (process_of(s->gpus[1], 1300) == nullptr) return 5;
    if (process_of(s->gpus[1], 1200) != nullptr) return 6;
    return 0;
  };
  fs::permissions(proc() + "/1200/fdinfo", fs::perms::none);
  const int failed = test::run_unprivileged(check);
  fs::permissions(proc() + "/1200/fdinfo", fs::perms::owner_all);
  EXPECT_EQ(failed, 0) << "expectation " << failed << " failed (90: could not drop privileges)";
}

TEST(IntelDeviceNames, KnownIdsByNameOthersByNumber) {
  EXPECT_EQ(intel::device_name(0x56a0), "Intel Arc A770");
  EXPECT_EQ(intel::device_name(0x0bd5), "Intel Data Center GPU Max 1550");
  EXPECT_EQ(intel::device_name(0x1234), "Intel GPU 0x1234");
}

}  // namespace
}  // namespace gf::backends
