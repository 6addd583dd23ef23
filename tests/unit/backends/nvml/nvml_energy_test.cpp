// The NVML backend's costly reads against the fake NVML (issue 24, goal 5): the energy counter (~4 ms of
// CPU a call on an H100 with driver 580) and the violation times (0.8 and 0.7 ms) are asked once per
// kCounterReadInterval and carried, never going backwards, in between; Backend::fresh_counters() brings it at the next
// snapshot; a failed read is asked again at once; several GPUs' reads are spread over the period. MIG mode (~0.14 ms)
// is a slow field; a fan that answered NOT_SUPPORTED is not asked again.
#include <gtest/gtest.h>

#include <chrono>

#include "backends/nvml/nvml_device.hpp"
#include "fake_nvml_harness.hpp"

namespace gf::backends::nvml_test {
namespace {

using json = nlohmann::json;
using std::chrono::seconds;

// One GPU whose energy counter climbs by 1 J at each call, and whose MIG mode turns on at its second query.
json counting_gpu() {
  return json{{"uuid", "GPU-energy-0"},
              {"memory_total_mib", 1000},
              {"memory_used_mib", 10},
              {"power_draw_w", 100},
              {"energy_mj", json::array({1000, 2000, 3000, 4000, 5000})},
              {"power_violation_us", json::array({10, 20, 30, 40})},
              {"thermal_violation_us", json::array({5, 6, 7, 8})},
              {"mig_mode", json::array({0, 1})},
              {"fan_pct", "not_supported"}};
}

class NvmlEnergyTest : public FakeNvmlTest {
 protected:
  core::GpuReading take(Backend& b) {
    auto s = b.snapshot();
    EXPECT_TRUE(s) << s.error().message;
    if (!s || s->gpus.empty()) return {};
    return std::move(s->gpus[0]);
  }
  unsigned long long energy_calls() const { return fake().calls_of("nvmlDeviceGetTotalEnergyConsumption"); }
  std::string one_gpu(json gpu = counting_gpu()) { return write_scenario(json{{"gpus", json::array({gpu})}}); }
};

TEST_F(NvmlEnergyTest, TheCounterIsAskedOncePerPeriodAndCarriedInBetween) {
  auto backend = open(one_gpu());
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  EXPECT_EQ(take(b).energy_mj, core::Reading<std::uint64_t>(1000));
  EXPECT_EQ(energy_calls(), 1u);
  // Nine readings within the period: the value as read, and not one more call.
  for (int i = 0; i < 9; ++i) {
    clock_.advance(seconds(1));
    EXPECT_EQ(take(b).energy_mj, core::Reading<std::uint64_t>(1000));
  }
  EXPECT_EQ(energy_calls(), 1u);
  // The period is over: read again.
  clock_.advance(nvml::kCounterReadInterval - seconds(9));
  EXPECT_EQ(take(b).energy_mj, core::Reading<std::uint64_t>(2000));
  EXPECT_EQ(energy_calls(), 2u);
}

TEST_F(NvmlEnergyTest, EightGpusSpreadTheirReadsOverThePeriod) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  ASSERT_TRUE(b.snapshot());
  EXPECT_EQ(energy_calls(), 8u);  // the first reading reads every GPU's
  // At 1 Hz after that: at most two GPUs' reads in one collection, eight in all per period.
  const int two_periods = 2 * static_cast<int>(nvml::kCounterReadInterval.count());
  for (int i = 0; i < two_periods; ++i) {
    const auto before = energy_calls();
    clock_.advance(seconds(1));
    ASSERT_TRUE(b.snapshot());
    EXPECT_LE(energy_calls() - before, 2u) << "at " << i + 1 << " s";
  }
  EXPECT_EQ(energy_calls(), 8u + 2u * 8u);
}

TEST_F(NvmlEnergyTest, TheViolationTimesGoWithTheEnergyCounter) {
  auto backend = open(one_gpu());
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  auto first = take(b);
  EXPECT_EQ(first.power_violation_us, core::Reading<std::uint64_t>(10));
  EXPECT_EQ(first.thermal_violation_us, core::Reading<std::uint64_t>(5));
  for (int i = 0; i < 5; ++i) {
    clock_.advance(seconds(1));
    const auto g = take(b);
    EXPECT_EQ(g.power_violation_us, core::Reading<std::uint64_t>(10));  // carried
    EXPECT_EQ(g.thermal_violation_us, core::Reading<std::uint64_t>(5));
  }
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetViolationStatus"), 2u);  // power and thermal, once
  b.fresh_counters();                                              // a job's first or last sample
  EXPECT_EQ(take(b).power_violation_us, core::Reading<std::uint64_t>(20));
  clock_.advance(nvml::kCounterReadInterval);
  const auto later = take(b);
  EXPECT_EQ(later.power_violation_us, core::Reading<std::uint64_t>(30));
  EXPECT_EQ(later.thermal_violation_us, core::Reading<std::uint64_t>(7));
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetViolationStatus"), 6u);
}

TEST_F(NvmlEnergyTest, FreshCountersBringItAtTheNextSnapshotOnly) {
  auto backend = open(one_gpu());
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  std::uint64_t last = 0;
  auto step = [&](bool fresh) {
    if (fresh) b.fresh_counters();
    const auto g = take(b);
    EXPECT_TRUE(g.energy_mj.has_value());
    const auto v = g.energy_mj.value_or(0);
    EXPECT_GE(v, last);  // a counter never goes backwards, read or carried
    last = v;
    return v;
  };
  EXPECT_EQ(step(false), 1000u);
  EXPECT_EQ(step(true), 2000u);  // the clock has not moved: only the request brought it
  EXPECT_EQ(energy_calls(), 2u);
  EXPECT_EQ(step(false), 2000u);  // the request is spent
  EXPECT_EQ(energy_calls(), 2u);
  clock_.advance(seconds(4));
  EXPECT_EQ(step(true), 3000u);
  clock_.advance(seconds(4));
  EXPECT_EQ(step(false), 3000u);
  EXPECT_EQ(energy_calls(), 3u);
}

TEST_F(NvmlEnergyTest, AFailedReadIsAskedAgainAtTheNextReading) {
  auto gpu = counting_gpu();
  gpu["energy_mj"] = json::array({1000, json{{"error", 999}}, 3000});
  auto backend = open(one_gpu(gpu));
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  EXPECT_EQ(take(b).energy_mj, core::Reading<std::uint64_t>(1000));
  clock_.advance(nvml::kCounterReadInterval);
  const auto failed = take(b);
  EXPECT_FALSE(failed.energy_mj.has_value());
  EXPECT_EQ(failed.energy_mj.why(), core::Absent::Error);  // not the last value passed off as new
  clock_.advance(seconds(1));
  EXPECT_EQ(take(b).energy_mj, core::Reading<std::uint64_t>(3000));  // within the period, asked again
  EXPECT_EQ(energy_calls(), 3u);
}

TEST_F(NvmlEnergyTest, MigModeIsASlowFieldAndAnUnsupportedFanIsNotAskedAgain) {
  auto backend = open(one_gpu());
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  EXPECT_EQ(take(b).mig_enabled, core::Reading<bool>(false));
  for (int i = 0; i < 3; ++i) {
    clock_.advance(seconds(3));
    EXPECT_EQ(take(b).mig_enabled, core::Reading<bool>(false));  // carried
  }
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMigMode"), 1u);
  clock_.advance(nvml::kSlowReadInterval - seconds(9));
  EXPECT_EQ(take(b).mig_enabled, core::Reading<bool>(true));
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMigMode"), 2u);
  // Five readings in all: the fan was asked at the first only.
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetFanSpeed"), 1u);
  EXPECT_EQ(take(b).fan_pct.why(), core::Absent::NotSupported);
}

}  // namespace
}  // namespace gf::backends::nvml_test
