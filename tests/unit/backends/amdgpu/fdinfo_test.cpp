// The pure parsers of the amdgpu backend: DRM fdinfo (backends/drm/) as amdgpu prints it, amdgpu's
// reading of the client tally, pp_dpm tables, RAS counts.
#include "backends/drm/fdinfo.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/amdgpu/drm_clients.hpp"
#include "backends/amdgpu/sysfs_text.hpp"

namespace gf::backends::amdgpu {
namespace {

using drm::DrmFdinfo;
using drm::parse_drm_fdinfo;
using drm::parse_drm_memory_bytes;

// The tally as the amdgpu backend makes it.
struct AmdTally {
  drm::DrmClientTally tally{{"amdgpu"}};
  void add(std::uint32_t pid, const DrmFdinfo& f) { tally.add(pid, f); }
  std::vector<core::GpuProcess> processes_on(const std::string& pdev) const {
    return amdgpu::processes_on(tally, pdev);
  }
  bool empty() const { return tally.empty(); }
};

// What a 6.8 kernel prints for a Vulkan client (tabs as the kernel writes them).
constexpr const char* kAmdgpuFdinfo =
    "pos:\t0\n"
    "flags:\t02100002\n"
    "mnt_id:\t26\n"
    "ino:\t1069\n"
    "drm-driver:\tamdgpu\n"
    "drm-client-id:\t42\n"
    "drm-pdev:\t0000:03:00.0\n"
    "pasid:\t32771\n"
    "drm-memory-vram:\t1048576 KiB\n"
    "drm-memory-gtt: \t2048 KiB\n"
    "drm-memory-cpu: \t0 KiB\n"
    "amd-memory-visible-vram:\t1048576 KiB\n"
    "drm-engine-gfx:\t123456789 ns\n"
    "drm-engine-compute:\t0 ns\n"
    "drm-engine-dma:\t1234 ns\n";

DrmFdinfo amd(std::uint64_t client, std::string pdev, std::optional<std::uint64_t> vram_bytes) {
  DrmFdinfo f;
  f.driver = "amdgpu";
  f.client_id = client;
  f.pdev = std::move(pdev);
  f.memory_vram_bytes = vram_bytes;
  return f;
}

constexpr std::uint64_t kMiB = 1024 * 1024;

// ---- parse_drm_fdinfo ---------------------------------------------------------------------------

TEST(ParseDrmFdinfo, ReadsEveryKeyOfAnAmdgpuClient) {
  const auto f = parse_drm_fdinfo(kAmdgpuFdinfo);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->driver, "amdgpu");
  EXPECT_EQ(f->pdev, "0000:03:00.0");
  EXPECT_EQ(f->client_id, 42u);
  EXPECT_EQ(f->memory_vram_bytes, 1048576ull * 1024);
  EXPECT_EQ(f->memory_gtt_bytes, 2048ull * 1024);
  EXPECT_EQ(f->memory_cpu_bytes, 0u);
  ASSERT_EQ(f->engine_busy_ns.size(), 3u);
  EXPECT_EQ(f->engine_busy_ns.at("gfx"), 123456789u);
  EXPECT_EQ(f->engine_busy_ns.at("compute"), 0u);
  EXPECT_EQ(f->engine_busy_ns.at("dma"), 1234u);
}

TEST(ParseDrmFdinfo, NonDrmFilesAreNotParsed) {
  EXPECT_FALSE(parse_drm_fdinfo(""));
  EXPECT_FALSE(parse_drm_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t3\n"));
  // The pre-5.19 amdgpu format has no drm- keys (and no client id to deduplicate with).
  EXPECT_FALSE(parse_drm_fdinfo("pdev:\t0000:03:00.0\npasid:\t32771\nvram mem:\t1024 kB\n"));
  // A client id without a driver is not a DRM file either.
  EXPECT_FALSE(parse_drm_fdinfo("drm-client-id: 4\ndrm-pdev: 0000:03:00.0\n"));
  EXPECT_FALSE(parse_drm_fdinfo("drm-driver:\t\n"));
}

TEST(ParseDrmFdinfo, OtherDriversAreParsedButKeepTheirName) {
  const auto f = parse_drm_fdinfo(
      "drm-driver:\ti915\ndrm-client-id:\t7\ndrm-pdev:\t0000:00:02.0\ndrm-total-system0:\t12 MiB\n"
      "drm-engine-render:\t2000 ns\ndrm-engine-capacity-video:\t2\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->driver, "i915");
  EXPECT_EQ(f->client_id, 7u);
  EXPECT_FALSE(f->memory_vram_bytes.has_value());
  // drm-engine-capacity-<x> is an instance count, not an engine called "capacity-video".
  ASSERT_EQ(f->engine_busy_ns.size(), 1u);
  EXPECT_EQ(f->engine_busy_ns.at("render"), 2000u);
}

TEST(ParseDrmFdinfo, MemoryUnits) {
  EXPECT_EQ(parse_drm_memory_bytes("512"), 512u);
  EXPECT_EQ(parse_drm_memory_bytes("0"), 0u);
  EXPECT_EQ(parse_drm_memory_bytes("3 KiB"), 3u * 1024);
  EXPECT_EQ(parse_drm_memory_bytes("3 MiB"), 3u * kMiB);
  EXPECT_EQ(parse_drm_memory_bytes("3 GiB"), 3u * 1024 * kMiB);
  EXPECT_EQ(parse_drm_memory_bytes("  7\tKiB  "), 7u * 1024);
  EXPECT_EQ(parse_drm_memory_bytes("7KiB"), 7u * 1024);
  EXPECT_EQ(parse_drm_memory_bytes("18446744073709551615"), UINT64_MAX);
  // 2^54 GiB = 2^84 bytes: refused, not wrapped.
  EXPECT_FALSE(parse_drm_memory_bytes("18014398509481984 GiB"));
  EXPECT_EQ(parse_drm_memory_bytes("17179869183 GiB"), 17179869183ull << 30);
  EXPECT_FALSE(parse_drm_memory_bytes("17179869184 GiB"));
  EXPECT_FALSE(parse_drm_memory_bytes("18446744073709551616"));
  EXPECT_FALSE(parse_drm_memory_bytes("1 kB"));
  EXPECT_FALSE(parse_drm_memory_bytes("1 kib"));
  EXPECT_FALSE(parse_drm_memory_bytes("1 TiB"));
  EXPECT_FALSE(parse_drm_memory_bytes("-1 KiB"));
  EXPECT_FALSE(parse_drm_memory_bytes("KiB"));
  EXPECT_FALSE(parse_drm_memory_bytes(""));
  EXPECT_FALSE(parse_drm_memory_bytes("1 KiB x"));
}

TEST(ParseDrmFdinfo, GarbledValuesDropOnlyTheirKey) {
  const auto f = parse_drm_fdinfo(
      "drm-driver: amdgpu\n"
      "drm-client-id: forty-two\n"
      "drm-pdev: 0000:03:00.0\n"
      "drm-memory-vram: 12 furlongs\n"
      "drm-memory-gtt: 1 MiB\n"
      "drm-engine-gfx: 12 ms\n"
      "drm-engine-dec: 99\n"
      "no colon here\n"
      "\x01\xff\xfe:\x80\n"
      ":\n"
      "drm-engine-:5 ns\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(f->client_id.has_value());
  EXPECT_FALSE(f->memory_vram_bytes.has_value());
  EXPECT_EQ(f->memory_gtt_bytes, kMiB);
  EXPECT_EQ(f->pdev, "0000:03:00.0");
  // "ms" is not the unit of an engine; a bare number is taken as ns; an empty name is dropped.
  ASSERT_EQ(f->engine_busy_ns.size(), 1u);
  EXPECT_EQ(f->engine_busy_ns.at("dec"), 99u);
}

TEST(ParseDrmFdinfo, FirstOccurrenceWinsAndCrlfAndCaseAreTolerated) {
  const auto f = parse_drm_fdinfo(
      "drm-driver: amdgpu\r\n"
      "drm-driver: i915\r\n"
      "drm-client-id: 5\r\n"
      "drm-client-id: 6\r\n"
      "drm-pdev: 0000:0A:00.0\r\n"
      "drm-memory-vram: 1 KiB\r\n"
      "drm-memory-vram: 2 KiB\r\n"
      "drm-engine-gfx: 1 ns\r\n"
      "drm-engine-gfx: 2 ns\r\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->driver, "amdgpu");
  EXPECT_EQ(f->client_id, 5u);
  EXPECT_EQ(f->pdev, "0000:0a:00.0");  // lower case, as sysfs names it
  EXPECT_EQ(f->memory_vram_bytes, 1024u);
  EXPECT_EQ(f->engine_busy_ns.at("gfx"), 1u);
}

TEST(ParseDrmFdinfo, OverflowingNumbersAreRefused) {
  const auto f = parse_drm_fdinfo(
      "drm-driver: amdgpu\ndrm-client-id: 18446744073709551616\ndrm-engine-gfx: 99999999999999999999999 ns\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(f->client_id.has_value());
  EXPECT_TRUE(f->engine_busy_ns.empty());
}

TEST(ParseDrmFdinfo, EngineCountAndTextLengthAreBounded) {
  std::string text = "drm-driver: amdgpu\n";
  for (int i = 0; i < 1000; ++i) text += "drm-engine-e" + std::to_string(i) + ": 1 ns\n";
  text += "drm-pdev: " + std::string(500, 'a') + "\n";
  const auto f = parse_drm_fdinfo(text);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->engine_busy_ns.size(), 64u);
  EXPECT_TRUE(f->pdev.empty());
  EXPECT_FALSE(parse_drm_fdinfo("drm-driver: " + std::string(100, 'x') + "\n"));
}

TEST(ParseDrmFdinfo, EmbeddedNulsDoNotStopTheParse) {
  using namespace std::string_literals;
  const std::string text = "drm-driver: amdgpu\n\0\0\0\ndrm-client-id: 9\n"s;
  ASSERT_EQ(text.size(), 40u);
  const auto f = parse_drm_fdinfo(text);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->client_id, 9u);
}

// ---- DrmClientTally -----------------------------------------------------------------------------

TEST(DrmClientTally, CountsAClientSharedByManyFdsOnce) {
  AmdTally t;
  t.add(100, amd(42, "0000:03:00.0", 1024 * kMiB));
  t.add(100, amd(42, "0000:03:00.0", 1024 * kMiB));  // dup()ed fd
  t.add(100, amd(42, "0000:03:00.0", 1024 * kMiB));
  const auto p = t.processes_on("0000:03:00.0");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].pid, 100u);
  EXPECT_EQ(p[0].used_memory_mib, 1024u);
  EXPECT_EQ(p[0].kind, core::ProcessKind::Compute);
  EXPECT_TRUE(p[0].name.empty());
}

TEST(DrmClientTally, SumsDistinctClientsOfAPid) {
  AmdTally t;
  t.add(100, amd(42, "0000:03:00.0", 1024 * kMiB));
  t.add(100, amd(43, "0000:03:00.0", 2 * kMiB));
  t.add(100, amd(44, "0000:0a:00.0", 512 * kMiB));
  const auto gpu0 = t.processes_on("0000:03:00.0");
  ASSERT_EQ(gpu0.size(), 1u);
  EXPECT_EQ(gpu0[0].used_memory_mib, 1026u);
  const auto gpu1 = t.processes_on("0000:0a:00.0");
  ASSERT_EQ(gpu1.size(), 1u);
  EXPECT_EQ(gpu1[0].used_memory_mib, 512u);
}

TEST(DrmClientTally, SameClientInTwoPidsCountsForEach) {
  // After fork() parent and child share the client; each holds the memory alive.
  AmdTally t;
  t.add(200, amd(7, "0000:03:00.0", 10 * kMiB));
  t.add(100, amd(7, "0000:03:00.0", 10 * kMiB));
  const auto p = t.processes_on("0000:03:00.0");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].pid, 100u);  // by pid
  EXPECT_EQ(p[1].pid, 200u);
  EXPECT_EQ(p[1].used_memory_mib, 10u);
}

TEST(DrmClientTally, IgnoresOtherDriversAndUnattributableRecords) {
  AmdTally t;
  DrmFdinfo intel = amd(1, "0000:03:00.0", kMiB);
  intel.driver = "i915";
  t.add(1, intel);
  DrmFdinfo no_id = amd(2, "0000:03:00.0", kMiB);
  no_id.client_id.reset();
  t.add(2, no_id);
  t.add(3, amd(3, "", kMiB));
  EXPECT_TRUE(t.empty());
  EXPECT_TRUE(t.processes_on("0000:03:00.0").empty());
  EXPECT_TRUE(t.processes_on("").empty());
}

TEST(DrmClientTally, MemoryRoundsDownAndMayBeUnknown) {
  AmdTally t;
  t.add(1, amd(1, "p", 1023 * 1024));  // 1023 KiB
  t.add(2, amd(2, "p", 1025 * 1024));  // 1025 KiB
  t.add(3, amd(3, "p", std::nullopt));
  t.add(4, amd(4, "p", std::nullopt));
  t.add(4, amd(5, "p", 3 * kMiB));  // one client known, one not: a lower bound
  t.add(5, amd(6, "p", UINT64_MAX));
  t.add(5, amd(7, "p", UINT64_MAX));  // saturates, does not wrap
  const auto p = t.processes_on("p");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].used_memory_mib, 0u);
  EXPECT_EQ(p[1].used_memory_mib, 1u);
  EXPECT_FALSE(p[2].used_memory_mib.has_value());
  EXPECT_EQ(p[3].used_memory_mib, 3u);
  EXPECT_EQ(p[4].used_memory_mib, UINT64_MAX >> 20);
  EXPECT_TRUE(t.processes_on("q").empty());
}

// ---- pp_dpm_* -----------------------------------------------------------------------------------

TEST(ParseDpm, TakesTheStarredLevel) {
  EXPECT_EQ(parse_dpm_current_mhz("0: 500Mhz \n1: 1800Mhz *\n2: 2250Mhz \n"), 1800u);
  EXPECT_EQ(parse_dpm_current_mhz("0: 96Mhz *\n1: 1250Mhz \n"), 96u);
  EXPECT_EQ(parse_dpm_current_mhz("S: 19Mhz *\n0: 500Mhz \n"), 19u);  // deep sleep
  EXPECT_EQ(parse_dpm_current_mhz("0: 500MHz\n1: 800MHz*"), 800u);    // no newline, no blank
  EXPECT_EQ(parse_dpm_current_mhz("0: 500Mhz *\r\n1: 900Mhz *\r\n"), 500u);
}

TEST(ParseDpm, RefusesWhatItCannotRead) {
  EXPECT_FALSE(parse_dpm_current_mhz(""));
  EXPECT_FALSE(parse_dpm_current_mhz("0: 500Mhz \n1: 1800Mhz \n"));  // nothing marked
  EXPECT_FALSE(parse_dpm_current_mhz("1: 1800 *\n"));                // no unit
  EXPECT_FALSE(parse_dpm_current_mhz("1: 1.8Ghz *\n"));
  EXPECT_FALSE(parse_dpm_current_mhz(": 1800Mhz *\n"));
  EXPECT_FALSE(parse_dpm_current_mhz("1800Mhz *\n"));
  EXPECT_FALSE(parse_dpm_current_mhz("1: 99999999999Mhz *\n"));  // past unsigned
  EXPECT_FALSE(parse_dpm_current_mhz("1: -5Mhz *\n"));
  EXPECT_FALSE(parse_dpm_current_mhz("*"));
}

// ---- ras ----------------------------------------------------------------------------------------

TEST(ParseRas, ReadsTheUncorrectableCount) {
  EXPECT_EQ(parse_ras_uncorrectable("ue: 3\nce: 17\n"), 3u);
  EXPECT_EQ(parse_ras_uncorrectable("ce: 17\nue: 0\n"), 0u);
  EXPECT_FALSE(parse_ras_uncorrectable("ce: 17\n"));
  EXPECT_FALSE(parse_ras_uncorrectable("ue: many\n"));
  EXPECT_FALSE(parse_ras_uncorrectable("ue: -1\n"));
  EXPECT_FALSE(parse_ras_uncorrectable(""));
}

}  // namespace
}  // namespace gf::backends::amdgpu
