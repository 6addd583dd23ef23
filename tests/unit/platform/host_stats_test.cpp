// platform::host_stats: the /proc/stat and /proc/meminfo parsers on real and hostile text, and the
// reader's CPU interval over a fake /proc tree on a fake clock.
#include "platform/host_stats.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

namespace gf::platform {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char* const kStat =
    "cpu  100 20 30 800 50 0 10 0 7 0\n"
    "cpu0 50 10 15 400 25 0 5 0 0 0\n"
    "cpu1 50 10 15 400 25 0 5 0 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

TEST(ProcStat, SumsBusyAndIdleColumnsLeavingGuestOut) {
  const auto t = parse_proc_stat(kStat);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->busy, 100u + 20 + 30 + 0 + 10 + 0);  // user nice system irq softirq steal
  EXPECT_EQ(t->idle, 800u + 50);                    // idle iowait
  EXPECT_EQ(parse_cpu_count(kStat), 2u);
}

TEST(ProcStat, OldKernelsWithFourColumns) {
  const auto t = parse_proc_stat("cpu 1 2 3 4\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->busy, 6u);
  EXPECT_EQ(t->idle, 4u);
}

TEST(ProcStat, RejectsMalformedText) {
  for (const char* bad : {"", "cpu0 1 2 3 4\n", "cpu 1 2 3\n", "cpu a b c d\n", "cpu -1 2 3 4\n",
                          "cpu 99999999999999999999999 1 1 1\n", "cpu 18446744073709551615 1 1 1\n", "intr 1 2 3\n"})
    EXPECT_FALSE(parse_proc_stat(bad)) << bad;
  EXPECT_EQ(parse_cpu_count("cpu 1 2 3 4\ncpux 1\n"), 0u);
}

TEST(ProcStat, PercentBetweenTwoSamples) {
  EXPECT_EQ(cpu_percent({100, 900}, {175, 925}), 75.0);
  EXPECT_EQ(cpu_percent({0, 0}, {1, 2}), 33.3);
  EXPECT_FALSE(cpu_percent({100, 900}, {100, 900}));  // no tick passed
  EXPECT_FALSE(cpu_percent({100, 900}, {99, 950}));   // counters went back (a reset)
}

TEST(MemInfo, BytesFromKibAndAvailable) {
  const auto m = parse_meminfo(
      "MemTotal:       16000000 kB\nMemFree:         2000000 kB\nMemAvailable:    9000000 kB\n"
      "Buffers:          100000 kB\nCached:          5000000 kB\nHugePages_Total:       0\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->total, 16000000ull * 1024);
  EXPECT_EQ(m->free, 2000000ull * 1024);
  EXPECT_EQ(m->available, 9000000ull * 1024);
}

TEST(MemInfo, OldKernelsEstimateAvailable) {
  const auto m = parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 200 kB\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->available, 350u * 1024);
}

TEST(MemInfo, RejectsMalformedAndCapsNonsense) {
  for (const char* bad : {"", "MemFree: 5 kB\n", "MemTotal: x kB\nMemFree: 1 kB\n", "MemTotal: 10 MB\nMemFree: 1 kB\n",
                          "MemTotal: 99999999999999999999 kB\nMemFree: 1 kB\n"})
    EXPECT_FALSE(parse_meminfo(bad)) << bad;
  // Available above the total (a lying kernel or a hand-made tree) is capped at the total.
  const auto m = parse_meminfo("MemTotal: 10 kB\nMemFree: 20 kB\nMemAvailable: 30 kB");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->free, 10u * 1024);
  EXPECT_EQ(m->available, 10u * 1024);
}

TEST(DiskUsage, RootAndAMissingPath) {
  const auto d = disk_usage("/");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_GT(d->total, 0u);
  EXPECT_LE(d->used, d->total);
  EXPECT_LE(d->free, d->total - d->used);
  const auto missing = disk_usage("/no/such/dir/here");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/no/such/dir/here"), std::string::npos);
}

struct FakeProc : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path root = tmp.path();
  test::FakeClock clock;
  void SetUp() override { write_mem("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 400 kB\n"); }
  void write_stat(std::uint64_t busy, std::uint64_t idle) {
    std::ofstream(root / "stat") << "cpu  " << busy << " 0 0 " << idle << " 0 0 0 0 0 0\ncpu0 0 0 0 0\n";
  }
  void write_mem(const std::string& text) { std::ofstream(root / "meminfo") << text; }
};

// The percentage is measured from a sample at least min_interval old, never from one taken an instant
// before: a burst of requests still sees a real interval.
TEST_F(FakeProc, CpuPercentOverAKeptSampleNeverAnInstant) {
  write_stat(0, 1000);
  HostStats h(root.string(), root.string(), clock, 1s);  // baseline: busy 0, idle 1000
  clock.advance(2s);
  write_stat(50, 1050);
  auto r = h.read();  // over [0 s, 2 s]: 50 busy of 100
  ASSERT_TRUE(r.cpu_percent);
  EXPECT_EQ(*r.cpu_percent, 50.0);
  EXPECT_DOUBLE_EQ(r.cpu_interval_s, 2.0);
  EXPECT_EQ(r.cpu_count, 1u);

  clock.advance(100ms);
  write_stat(60, 1050);
  r = h.read();  // the 2 s sample is too recent: still from the 0 s one, 60 busy of 110
  ASSERT_TRUE(r.cpu_percent);
  EXPECT_EQ(*r.cpu_percent, 54.5);
  EXPECT_DOUBLE_EQ(r.cpu_interval_s, 2.1);

  clock.advance(1s);
  write_stat(160, 1050);
  r = h.read();  // now from the 2 s sample: 110 busy of 110
  ASSERT_TRUE(r.cpu_percent);
  EXPECT_EQ(*r.cpu_percent, 100.0);
  EXPECT_DOUBLE_EQ(r.cpu_interval_s, 1.1);

  ASSERT_TRUE(r.memory);
  EXPECT_EQ(r.memory->total, 1000u * 1024);
  EXPECT_EQ(r.memory->available, 400u * 1024);
  ASSERT_TRUE(r.disk);
}

TEST_F(FakeProc, UnreadableFilesAreAbsentNotFatal) {
  HostStats h(root.string(), (root / "missing").string(), clock, 1s);  // no stat file at all
  write_mem("garbage");
  const auto r = h.read();
  EXPECT_FALSE(r.cpu_percent);
  EXPECT_EQ(r.cpu_count, 0u);
  EXPECT_FALSE(r.memory);
  EXPECT_FALSE(r.disk);
  // The stat file appears: the first readable sample becomes the baseline.
  write_stat(10, 10);
  clock.advance(1s);
  EXPECT_FALSE(h.read().cpu_percent);
  clock.advance(1s);
  write_stat(20, 20);
  const auto later = h.read();
  ASSERT_TRUE(later.cpu_percent);
  EXPECT_EQ(*later.cpu_percent, 50.0);
}

}  // namespace
}  // namespace gf::platform
