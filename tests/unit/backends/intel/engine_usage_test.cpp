// EngineUsage and process_memory_mib: the intel backend's arithmetic on DRM fdinfo, on hand-made
// records over two or three collections.
#include "backends/intel/engine_usage.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace gf::backends::intel {
namespace {

using core::Absent;
using namespace std::chrono_literals;
using drm::CounterMap;
using drm::DrmFdinfo;

const std::chrono::steady_clock::time_point kT0{std::chrono::seconds(100)};
constexpr const char* kGpu = "0000:03:00.0";

DrmFdinfo i915_client(std::uint64_t id, CounterMap busy_ns, CounterMap capacity = {}) {
  DrmFdinfo f;
  f.driver = "i915";
  f.pdev = kGpu;
  f.client_id = id;
  f.engine_busy_ns = std::move(busy_ns);
  f.engine_capacity = std::move(capacity);
  return f;
}

DrmFdinfo xe_client(std::uint64_t id, CounterMap cycles, std::uint64_t gpu_time, CounterMap capacity = {}) {
  DrmFdinfo f;
  f.driver = "xe";
  f.pdev = kGpu;
  f.client_id = id;
  f.engine_cycles = cycles;
  for (const auto& [cls, v] : cycles) f.engine_total_cycles[cls] = gpu_time;
  f.engine_capacity = std::move(capacity);
  return f;
}

drm::DrmClientTally tally_of(std::initializer_list<std::pair<std::uint32_t, DrmFdinfo>> records) {
  drm::DrmClientTally t({"i915", "xe"});
  for (const auto& [pid, f] : records) t.add(pid, f);
  return t;
}

TEST(IntelEngineUsage, FirstCollectionHasNoInterval) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(7, {{"render", 5'000'000}})}}), kT0, true);
  EXPECT_EQ(u.gpu_utilization(kGpu).why(), Absent::Unavailable);
  EXPECT_EQ(u.process_utilization(kGpu, 1).why(), Absent::Unavailable);
  EXPECT_EQ(u.gpu_utilization("0000:00:02.0").why(), Absent::Unavailable);
}

TEST(IntelEngineUsage, I915BusyNanosecondsOverWallTimeAndCapacity) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(7, {{"render", 1'000'000'000}, {"video", 0}}, {{"video", 2}})}}), kT0, true);
  // One second later: render busy 250 ms (25 %); video 1.2 s over two engines (60 %).
  u.update(tally_of({{1, i915_client(7, {{"render", 1'250'000'000}, {"video", 1'200'000'000}}, {{"video", 2}})}}),
           kT0 + 1s, true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 60u);
  EXPECT_EQ(u.gpu_utilization(kGpu), 60u);
}

TEST(IntelEngineUsage, XeCyclesOverGpuTicksIgnoreWallTime) {
  EngineUsage u;
  u.update(tally_of({{1, xe_client(3, {{"rcs", 1'000'000}, {"ccs", 0}}, 50'000'000, {{"ccs", 4}})}}), kT0, true);
  // 10 M GPU ticks later (the wall clock says 5 s: it does not enter): rcs 25 %, ccs 20 M / (10 M × 4) = 50 %.
  u.update(tally_of({{1, xe_client(3, {{"rcs", 3'500'000}, {"ccs", 20'000'000}}, 60'000'000, {{"ccs", 4}})}}), kT0 + 5s,
           true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 50u);
  EXPECT_EQ(u.gpu_utilization(kGpu), 50u);
}

TEST(IntelEngineUsage, ClientsOfAProcessAddUpAndTheGpuCountsASharedClientOnce) {
  EngineUsage u;
  u.update(tally_of({{1, xe_client(3, {{"rcs", 0}}, 0)},
                     {1, xe_client(4, {{"rcs", 0}}, 0)},
                     {2, xe_client(3, {{"rcs", 0}}, 0)},  // pid 2 holds client 3 too (fork)
                     {5, xe_client(9, {{"rcs", 0}}, 0)}}),
           kT0, true);
  u.update(tally_of({{1, xe_client(3, {{"rcs", 300}}, 1000)},
                     {1, xe_client(4, {{"rcs", 100}}, 1000)},
                     {2, xe_client(3, {{"rcs", 300}}, 1000)},
                     {5, xe_client(9, {{"rcs", 200}}, 1000)}}),
           kT0 + 1s, true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 40u);
  EXPECT_EQ(u.process_utilization(kGpu, 2), 30u);
  EXPECT_EQ(u.process_utilization(kGpu, 5), 20u);
  EXPECT_EQ(u.gpu_utilization(kGpu), 60u);  // 30 + 10 + 20: client 3 once
}

TEST(IntelEngineUsage, SumsAreCappedAndBackwardsCountersAreHeld) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(1, {{"render", 0}})}, {2, i915_client(2, {{"render", 0}})}}), kT0, true);
  // Rounding between the kernel's counters and our clock: 0.7 s + 0.6 s in 1 s is held at 100 %.
  u.update(tally_of({{1, i915_client(1, {{"render", 700'000'000}})}, {2, i915_client(2, {{"render", 600'000'000}})}}),
           kT0 + 1s, true);
  EXPECT_EQ(u.gpu_utilization(kGpu), 100u);
  // Client 1's counter dips (allowed briefly by the spec): held at 0.7 s, so no busy time, and no wrap.
  u.update(tally_of({{1, i915_client(1, {{"render", 100}})}, {2, i915_client(2, {{"render", 600'000'000}})}}), kT0 + 2s,
           true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 0u);
  // When it catches up past the held value, only the part above it counts.
  u.update(tally_of({{1, i915_client(1, {{"render", 800'000'000}})}, {2, i915_client(2, {{"render", 600'000'000}})}}),
           kT0 + 3s, true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 10u);
}

TEST(IntelEngineUsage, NewClientsWaitNoEngineKeysAreNotSupported) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(1, {{"render", 0}})}}), kT0, true);
  DrmFdinfo bare = i915_client(2, {});  // a kernel without engine stats
  u.update(tally_of({{1, i915_client(1, {{"render", 0}})}, {2, bare}, {3, i915_client(3, {{"render", 5}})}}), kT0 + 1s,
           true);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 0u);
  EXPECT_EQ(u.process_utilization(kGpu, 2).why(), Absent::NotSupported);
  EXPECT_EQ(u.process_utilization(kGpu, 3).why(), Absent::Unavailable);  // first seen now
  EXPECT_EQ(u.process_utilization(kGpu, 4).why(), Absent::Unavailable);  // not there at all

  EngineUsage only_bare;
  only_bare.update(tally_of({{2, bare}}), kT0, true);
  only_bare.update(tally_of({{2, bare}}), kT0 + 1s, true);
  EXPECT_EQ(only_bare.gpu_utilization(kGpu).why(), Absent::NotSupported);
}

TEST(IntelEngineUsage, AnIncompleteScanGivesNoGpuFigureAndNoClientsMeansIdle) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(1, {{"render", 0}})}}), kT0, true);
  u.update(tally_of({{1, i915_client(1, {{"render", 500'000'000}})}}), kT0 + 1s, false);
  EXPECT_EQ(u.gpu_utilization(kGpu).why(), Absent::NoPermission);
  EXPECT_EQ(u.process_utilization(kGpu, 1), 50u);  // what we can see of a process is still right
  u.update(tally_of({}), kT0 + 2s, true);
  EXPECT_EQ(u.gpu_utilization(kGpu), 0u);
  EXPECT_EQ(u.gpu_utilization("0000:00:02.0"), 0u);
}

TEST(IntelEngineUsage, ASecondUpdateAtTheSameInstantHasNoInterval) {
  EngineUsage u;
  u.update(tally_of({{1, i915_client(1, {{"render", 0}})}}), kT0, true);
  u.update(tally_of({{1, i915_client(1, {{"render", 9}})}}), kT0, true);
  EXPECT_EQ(u.gpu_utilization(kGpu).why(), Absent::Unavailable);
  EXPECT_EQ(u.process_utilization(kGpu, 1).why(), Absent::Unavailable);
}

drm::ProcessClients holding(const std::vector<const DrmFdinfo*>& clients) { return {1, clients}; }

TEST(IntelProcessMemory, DeviceMemoryOnDiscreteEveryRegionOnIntegrated) {
  DrmFdinfo xe_a = xe_client(1, {}, 0), xe_b = xe_client(2, {}, 0);
  xe_a.total_bytes = {{"system", 5 << 20}, {"gtt", 1 << 20}, {"vram0", 2048ull << 20}, {"stolen", 0}};
  xe_b.total_bytes = {{"system", 0}, {"vram0", 512ull << 20}, {"vram1", 1ull << 20}};
  EXPECT_EQ(process_memory_mib(holding({&xe_a, &xe_b})), 2561u);

  DrmFdinfo i915_dg2 = i915_client(3, {});
  i915_dg2.total_bytes = {{"system0", 100 << 20}, {"local0", 300 << 20}};
  EXPECT_EQ(process_memory_mib(holding({&i915_dg2})), 300u);

  DrmFdinfo igpu = i915_client(4, {});
  igpu.total_bytes = {{"system0", 96 << 20}, {"stolen-system0", (8 << 20) + 1023}};
  EXPECT_EQ(process_memory_mib(holding({&igpu})), 104u);  // rounded down

  DrmFdinfo old_kernel = i915_client(5, {});
  EXPECT_FALSE(process_memory_mib(holding({&old_kernel})).has_value());

  DrmFdinfo huge = i915_client(6, {});
  huge.total_bytes = {{"system0", UINT64_MAX}, {"stolen-system0", UINT64_MAX}};
  EXPECT_EQ(process_memory_mib(holding({&huge})), UINT64_MAX >> 20);  // saturates, does not wrap
}

}  // namespace
}  // namespace gf::backends::intel
