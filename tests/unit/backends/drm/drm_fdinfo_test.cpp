// The vendor-neutral DRM pieces: the fdinfo parser on i915's and xe's keys, the client tally, and
// what a scan says about its own visibility.
#include "backends/drm/fdinfo.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backends/drm/drm_clients.hpp"
#include "backends/drm/proc_scan.hpp"

namespace gf::backends::drm {
namespace {

// xe's documented example (Documentation/gpu/xe/xe-drm-usage-stats.rst), shortened.
constexpr const char* kXeFdinfo =
    "pos:\t0\n"
    "flags:\t0100002\n"
    "drm-driver:\txe\n"
    "drm-client-id:\t3\n"
    "drm-pdev:\t0000:03:00.0\n"
    "drm-total-system:\t0\n"
    "drm-total-gtt:\t192 KiB\n"
    "drm-resident-gtt:\t192 KiB\n"
    "drm-total-vram0:\t23992 KiB\n"
    "drm-shared-vram0:\t16 MiB\n"
    "drm-total-stolen:\t0\n"
    "drm-cycles-rcs:\t28257900\n"
    "drm-total-cycles-rcs:\t7655183225\n"
    "drm-cycles-vcs:\t0\n"
    "drm-total-cycles-vcs:\t7655183225\n"
    "drm-engine-capacity-vcs:\t2\n"
    "drm-cycles-ccs:\t0\n"
    "drm-total-cycles-ccs:\t7655183225\n"
    "drm-engine-capacity-ccs:\t4\n";

// i915's, as an integrated GPU prints it.
constexpr const char* kI915Fdinfo =
    "drm-driver:\ti915\n"
    "drm-client-id:\t7\n"
    "drm-pdev:\t0000:00:02.0\n"
    "drm-total-system0:\t4 KiB\n"
    "drm-resident-system0:\t4 KiB\n"
    "drm-total-stolen-system0:\t0\n"
    "drm-engine-render:\t9288864723 ns\n"
    "drm-engine-copy:\t2035071108 ns\n"
    "drm-engine-video:\t0 ns\n"
    "drm-engine-capacity-video:\t2\n"
    "drm-engine-video-enhance:\t0 ns\n";

TEST(DrmFdinfoParse, ReadsXeCyclesCapacityAndRegions) {
  const auto f = parse_drm_fdinfo(kXeFdinfo);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->driver, "xe");
  EXPECT_EQ(f->client_id, 3u);
  EXPECT_EQ(f->pdev, "0000:03:00.0");
  EXPECT_EQ(f->total_bytes,
            (CounterMap{{"system", 0}, {"gtt", 192 * 1024}, {"vram0", 23992ull * 1024}, {"stolen", 0}}));
  EXPECT_EQ(f->engine_cycles, (CounterMap{{"rcs", 28257900}, {"vcs", 0}, {"ccs", 0}}));
  EXPECT_EQ(f->engine_total_cycles.at("rcs"), 7655183225u);
  EXPECT_EQ(f->engine_total_cycles.size(), 3u);
  EXPECT_EQ(f->engine_capacity, (CounterMap{{"vcs", 2}, {"ccs", 4}}));
  EXPECT_TRUE(f->engine_busy_ns.empty());  // drm-engine-capacity-* is not an engine
}

TEST(DrmFdinfoParse, ReadsI915EngineTimeAndRegions) {
  const auto f = parse_drm_fdinfo(kI915Fdinfo);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->driver, "i915");
  EXPECT_EQ(f->engine_busy_ns,
            (CounterMap{{"render", 9288864723}, {"copy", 2035071108}, {"video", 0}, {"video-enhance", 0}}));
  EXPECT_EQ(f->engine_capacity, (CounterMap{{"video", 2}}));
  EXPECT_EQ(f->total_bytes, (CounterMap{{"system0", 4096}, {"stolen-system0", 0}}));
  EXPECT_TRUE(f->engine_cycles.empty());
}

TEST(DrmFdinfoParse, RefusesZeroCapacityBadValuesAndKeepsTheFirstOccurrence) {
  const auto f = parse_drm_fdinfo(
      "drm-driver: xe\n"
      "drm-engine-capacity-ccs: 0\n"  // would divide by nothing
      "drm-engine-capacity-vcs: -2\n"
      "drm-cycles-rcs: 12 ns\n"  // cycles carry no unit
      "drm-cycles-bcs: 5\n"
      "drm-cycles-bcs: 9\n"       // first wins
      "drm-total-vram0: 3 TiB\n"  // unknown unit
      "drm-total-: 5\n"           // no region name
      "drm-total-cycles-: 5\n");
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(f->engine_capacity.empty());
  EXPECT_EQ(f->engine_cycles, (CounterMap{{"bcs", 5}}));
  EXPECT_TRUE(f->total_bytes.empty());
  EXPECT_TRUE(f->engine_total_cycles.empty());
}

TEST(DrmFdinfoParse, EveryFamilyIsBounded) {
  std::string text = "drm-driver: xe\n";
  for (int i = 0; i < 500; ++i) {
    const std::string n = std::to_string(i);
    text += "drm-total-r" + n + ": 1\ndrm-cycles-e" + n + ": 1\ndrm-total-cycles-e" + n + ": 1\ndrm-engine-capacity-e" +
            n + ": 1\n";
  }
  text += "drm-cycles-" + std::string(200, 'x') + ": 1\n";
  const auto f = parse_drm_fdinfo(text);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->total_bytes.size(), kMaxKeysPerMap);
  EXPECT_EQ(f->engine_cycles.size(), kMaxKeysPerMap);
  EXPECT_EQ(f->engine_total_cycles.size(), kMaxKeysPerMap);
  EXPECT_EQ(f->engine_capacity.size(), kMaxKeysPerMap);
  EXPECT_FALSE(f->engine_cycles.contains(std::string(200, 'x')));
}

DrmFdinfo client(std::string driver, std::uint64_t id, std::string pdev) {
  DrmFdinfo f;
  f.driver = std::move(driver);
  f.client_id = id;
  f.pdev = std::move(pdev);
  return f;
}

TEST(DrmTally, KeepsTheDriversAskedForEachClientOncePerPid) {
  DrmClientTally t({"i915", "xe"});
  t.add(10, client("xe", 3, "0000:03:00.0"));
  t.add(10, client("xe", 3, "0000:03:00.0"));  // a dup()ed fd
  t.add(10, client("xe", 4, "0000:03:00.0"));
  t.add(20, client("xe", 3, "0000:03:00.0"));  // after fork(): both hold it
  t.add(20, client("i915", 7, "0000:00:02.0"));
  t.add(30, client("amdgpu", 1, "0000:03:00.0"));
  t.add(40, client("xe", 5, ""));  // no drm-pdev
  DrmFdinfo no_id = client("xe", 6, "0000:03:00.0");
  no_id.client_id.reset();
  t.add(50, no_id);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.pdevs(), (std::vector<std::string>{"0000:00:02.0", "0000:03:00.0"}));
  const auto on = t.processes_on("0000:03:00.0");
  ASSERT_EQ(on.size(), 2u);
  EXPECT_EQ(on[0].pid, 10u);
  ASSERT_EQ(on[0].clients.size(), 2u);
  EXPECT_EQ(on[0].clients[0]->client_id, 3u);
  EXPECT_EQ(on[0].clients[1]->client_id, 4u);
  EXPECT_EQ(on[1].pid, 20u);
  EXPECT_EQ(on[1].clients.size(), 1u);
  EXPECT_TRUE(t.processes_on("0000:99:00.0").empty());
}

TEST(DrmTally, StopsAtItsBoundAndCountsTheRest) {
  DrmClientTally t({"xe"}, 3);
  for (std::uint64_t id = 0; id < 10; ++id) t.add(1, client("xe", id, "p"));
  t.add(1, client("xe", 0, "p"));  // one it already has: not dropped
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.dropped(), 7u);
}

TEST(DrmVisibility, SaysWhatTheScanMissed) {
  core::Snapshot s;
  DrmScan clean{DrmClientTally({"xe"}), 0};
  note_visibility(clean, s);
  EXPECT_TRUE(s.process_visibility.complete);
  EXPECT_TRUE(s.process_visibility.message.empty());

  DrmScan partial{DrmClientTally({"xe"}, 1), 2};
  partial.tally.add(1, client("xe", 1, "p"));
  partial.tally.add(1, client("xe", 2, "p"));
  note_visibility(partial, s);
  EXPECT_FALSE(s.process_visibility.complete);
  EXPECT_NE(s.process_visibility.message.find("2 processes"), std::string::npos) << s.process_visibility.message;
  EXPECT_NE(s.process_visibility.message.find("1 DRM clients"), std::string::npos) << s.process_visibility.message;
}

}  // namespace
}  // namespace gf::backends::drm
