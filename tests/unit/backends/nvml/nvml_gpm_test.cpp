// NVML GPM through the nvml backend, against the fake NVML: the real H100's numbers (../shared/captures/
// h100-580), the first collection without a previous sample, GPUs and drivers without GPM, the GPM
// interval, sample buffers allocated once and freed, and each way a GPM call can fail.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fields.hpp"
#include "fake_nvml_harness.hpp"
#include "support/fake_clock.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvml_gpm_test {
namespace {

using core::Absent;
using core::Field;
using namespace std::chrono_literals;

constexpr double kMiB = 1024.0 * 1024.0;

// The twelve profiling fields, for "every one of them" checks.
constexpr Field kProf[] = {Field::ProfGraphicsActive, Field::ProfSmActive,      Field::ProfSmOccupancy,
                           Field::ProfTensorActive,   Field::ProfDramActive,    Field::ProfFp64Active,
                           Field::ProfFp32Active,     Field::ProfFp16Active,    Field::ProfPcieTxBytes,
                           Field::ProfPcieRxBytes,    Field::ProfNvlinkTxBytes, Field::ProfNvlinkRxBytes};

void expect_no_profiling(const core::GpuReading& g, Absent why) {
  for (Field f : kProf) {
    const core::FieldValue v = core::read(f, g);
    EXPECT_FALSE(v.has_value()) << core::info(f).json_key << " = " << v.as_double();
    EXPECT_EQ(v.why, why) << core::info(f).json_key << ": " << core::code(v.why);
  }
  EXPECT_FALSE(g.profiling_note.empty());
}

class GpmTest : public nvml_test::FakeNvmlTest {
 protected:
  void SetUp() override {
    FakeNvmlTest::SetUp();
    live_ = fake().library().function<unsigned long long (*)()>("fake_nvml_gpm_live_samples");
    ASSERT_NE(live_, nullptr);
    live_before_ = live_();
  }
  void TearDown() override {
    // Every sample the backends of the test allocated went back to NVML.
    if (live_) {
      EXPECT_EQ(live_(), live_before_);
    }
    FakeNvmlTest::TearDown();
  }

  Result<std::unique_ptr<Backend>> open_gpm(const std::string& scenario, std::chrono::milliseconds interval = 10s,
                                            const char* library = GF_FAKE_NVML) {
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    BackendOptions opts;
    opts.nvml_library = library;
    opts.clock = &time_;
    opts.gpm_interval = interval;
    return open_nvml(opts);
  }

  core::Snapshot take(Backend& b) {
    auto s = b.snapshot();
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? *s : core::Snapshot{};
  }

  // An H100 with GPM whose metric values are `metrics` (NVML's percent and MiB/s, by metric id).
  std::string one_h100(const nlohmann::json& metrics, nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json gpu = {{"name", "NVIDIA H100 80GB HBM3"}, {"memory_total_mib", 81559},   {"memory_used_mib", 0},
                          {"utilization_gpu_pct", 100},      {"utilization_memory_pct", 0}, {"gpm_supported", true},
                          {"gpm_metrics", metrics}};
    gpu.update(extra);
    return write_scenario({{"gpus", {gpu}}});
  }

  test::FakeClock time_;
  unsigned long long (*live_)() = nullptr;
  unsigned long long live_before_ = 0;
};

TEST_F(GpmTest, TheH100CaptureShowsWhatItsUtilizationIsMadeOf) {
  auto backend = open_gpm(fixture("h100_gpm.json"));
  ASSERT_TRUE(backend) << backend.error().message;

  // The first collection has no previous sample: nothing to average yet, which is not a 0.
  auto first = take(**backend);
  ASSERT_EQ(first.gpus.size(), 2u);
  expect_no_profiling(first.gpus[0], Absent::Unavailable);
  EXPECT_NE(first.gpus[0].profiling_note.find("first GPM sample"), std::string::npos) << first.gpus[0].profiling_note;
  // The A100 has no GPM at all.
  expect_no_profiling(first.gpus[1], Absent::NotSupported);
  EXPECT_NE(first.gpus[1].profiling_note.find("Hopper"), std::string::npos) << first.gpus[1].profiling_note;

  time_.advance(10s);
  auto second = take(**backend);
  const auto& h100 = second.gpus[0];
  EXPECT_EQ(h100.utilization_pct.value_or(0), 100u);  // "100 % utilized"…
  // …while the SMs were 97 % active at 14 % occupancy, the tensor pipes 94 %, DRAM 25 %, FP16/FP32 idle.
  EXPECT_NEAR(h100.prof_sm_active.value_or(-1), 0.97, 0.005);
  EXPECT_NEAR(h100.prof_sm_occupancy.value_or(-1), 0.14, 0.005);
  EXPECT_NEAR(h100.prof_tensor_active.value_or(-1), 0.94, 0.005);
  EXPECT_NEAR(h100.prof_dram_active.value_or(-1), 0.25, 0.005);
  EXPECT_DOUBLE_EQ(h100.prof_graphics_active.value_or(-1), 0.99863);
  EXPECT_DOUBLE_EQ(h100.prof_sm_active.value_or(-1), 0.96537);
  ASSERT_TRUE(h100.prof_fp16_active.has_value());
  EXPECT_EQ(*h100.prof_fp16_active, 0.0);
  ASSERT_TRUE(h100.prof_fp32_active.has_value());
  EXPECT_EQ(*h100.prof_fp32_active, 0.0);
  ASSERT_TRUE(h100.prof_fp64_active.has_value());
  EXPECT_EQ(*h100.prof_fp64_active, 0.0);
  // Throughput: NVML's MiB/s as bytes/s.
  EXPECT_DOUBLE_EQ(h100.prof_pcie_tx_bytes.value_or(-1), 6.044 * kMiB);
  EXPECT_DOUBLE_EQ(h100.prof_pcie_rx_bytes.value_or(-1), 16.217 * kMiB);
  EXPECT_EQ(h100.prof_nvlink_tx_bytes.value_or(-1), 0.0);
  EXPECT_EQ(h100.prof_nvlink_rx_bytes.value_or(-1), 0.0);
  EXPECT_TRUE(h100.profiling_note.empty()) << h100.profiling_note;

  // The A100 still has no profiling series: no value, no NaN.
  expect_no_profiling(second.gpus[1], Absent::NotSupported);
}

TEST_F(GpmTest, SupportIsAskedOnceAndSamplesAreAllocatedOnce) {
  auto backend = open_gpm(fixture("h100_gpm.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  for (int i = 0; i < 6; ++i) {
    take(**backend);
    time_.advance(10s);
  }
  EXPECT_EQ(fake().calls_of("nvmlGpmQueryDeviceSupport"), 2u);  // once per GPU
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleAlloc"), 2u);         // sample1 and sample2 of the H100
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleGet"), 6u);           // one per collection, H100 only
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 5u);          // every collection but the first
  EXPECT_EQ(live_(), live_before_ + 2);
  backend->reset();
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleFree"), 2u);
  EXPECT_EQ(live_(), live_before_);
}

TEST_F(GpmTest, CollectionsBetweenGpmSamplesKeepTheLastValues) {
  // Tensor activity 10 %, 20 %, 30 % on successive metrics calls.
  auto backend = open_gpm(one_h100({{"5", {10.0, 20.0, 30.0}}}), 5s);
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(5s);
  EXPECT_DOUBLE_EQ(take(**backend).gpus[0].prof_tensor_active.value_or(-1), 0.10);
  for (int i = 0; i < 3; ++i) {  // 1 s collections inside the 5 s GPM interval: no GPM call, same values
    time_.advance(1s);
    EXPECT_DOUBLE_EQ(take(**backend).gpus[0].prof_tensor_active.value_or(-1), 0.10);
  }
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleGet"), 2u);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 1u);
  time_.advance(2s);  // 5 s since the last sample
  EXPECT_DOUBLE_EQ(take(**backend).gpus[0].prof_tensor_active.value_or(-1), 0.20);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 2u);
}

TEST_F(GpmTest, ASampleIsTakenAtEveryCollectionWhenTheIntervalMatches) {
  // 1 s collections that come a little early still sample every time (no every-other-one).
  auto backend = open_gpm(one_h100({{"5", 50.0}}), 1s);
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  for (int i = 0; i < 4; ++i) {
    time_.advance(980ms);
    take(**backend);
  }
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleGet"), 5u);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 4u);
}

TEST_F(GpmTest, ADriverWithoutGpmSaysSo) {
  auto backend = open_gpm(fixture("h100_gpm.json"), 10s, GF_FAKE_NVML_OLD);
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  auto s = take(**backend);
  for (const auto& g : s.gpus) {
    expect_no_profiling(g, Absent::NotSupported);
    EXPECT_NE(g.profiling_note.find("no GPM functions"), std::string::npos) << g.profiling_note;
  }
}

TEST_F(GpmTest, IntervalZeroTurnsGpmOff) {
  auto backend = open_gpm(fixture("h100_gpm.json"), 0ms);
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  auto s = take(**backend);
  expect_no_profiling(s.gpus[0], Absent::NotQueried);
  EXPECT_NE(s.gpus[0].profiling_note.find("off"), std::string::npos);
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleGet") + fake().calls_of("nvmlGpmQueryDeviceSupport"), 0u);
}

TEST_F(GpmTest, AMetricTheDriverCannotComputeIsAbsentAlone) {
  // No NVLink metrics (a PCIe H100), FP64 answering an error; the rest are there.
  auto backend = open_gpm(one_h100({{"1", 50.0},
                                    {"2", 40.0},
                                    {"3", 10.0},
                                    {"5", 30.0},
                                    {"10", 5.0},
                                    {"11", {{"error", 999}}},
                                    {"12", 0.0},
                                    {"13", 0.0},
                                    {"20", 1.0},
                                    {"21", 2.0}}));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  const auto g = take(**backend).gpus[0];
  EXPECT_EQ(g.prof_nvlink_tx_bytes.why(), Absent::NotSupported);
  EXPECT_FALSE(g.prof_nvlink_rx_bytes.has_value());
  EXPECT_EQ(g.prof_fp64_active.why(), Absent::Error);
  EXPECT_FALSE(g.prof_fp64_active.has_value());
  EXPECT_DOUBLE_EQ(g.prof_sm_active.value_or(-1), 0.40);
  EXPECT_DOUBLE_EQ(g.prof_pcie_rx_bytes.value_or(-1), 2 * kMiB);
  EXPECT_TRUE(g.profiling_note.empty());
}

TEST_F(GpmTest, ActivityIsARatioEvenWhenCountersOvershoot) {
  auto backend = open_gpm(one_h100({{"1", 100.4}, {"2", -0.001}}));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  const auto g = take(**backend).gpus[0];
  EXPECT_EQ(g.prof_graphics_active.value_or(-1), 1.0);
  EXPECT_EQ(g.prof_sm_active.value_or(-1), 0.0);
}

TEST_F(GpmTest, AFailedSampleIsAnErrorAndTheNextSpanCoversTheGap) {
  // The second nvmlGpmSampleGet fails; the third succeeds and is paired with the first.
  auto backend = open_gpm(one_h100({{"5", 60.0}}, {{"gpm_sample_get", {true, {{"error", 999}}, true}}}));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  const auto failed = take(**backend).gpus[0];
  expect_no_profiling(failed, Absent::Error);
  EXPECT_NE(failed.profiling_note.find("cannot take a GPM sample"), std::string::npos) << failed.profiling_note;
  EXPECT_EQ(failed.health, core::Health::Ok);  // the rest of the GPU reads as usual
  time_.advance(10s);
  EXPECT_DOUBLE_EQ(take(**backend).gpus[0].prof_tensor_active.value_or(-1), 0.60);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 1u);  // the fake accepted the pair: same GPU, in order
}

TEST_F(GpmTest, UnderMigTheWholeGpuHasNoProfilingAndSaysWhy) {
  auto backend = open_gpm(one_h100({{"5", 60.0}}, {{"mig_mode", 1}, {"gpm_supported", false}}));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  const auto g = take(**backend).gpus[0];
  expect_no_profiling(g, Absent::MigEnabled);
  EXPECT_NE(g.profiling_note.find("MIG"), std::string::npos) << g.profiling_note;
}

TEST_F(GpmTest, ALostGpuIsNotAskedForGpm) {
  auto backend = open_gpm(one_h100({{"5", 60.0}}, {{"lost", {false, true}}}));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  time_.advance(10s);
  const auto g = take(**backend).gpus[0];
  EXPECT_EQ(g.health, core::Health::Lost);
  EXPECT_EQ(g.prof_tensor_active.why(), Absent::GpuLost);
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleGet"), 1u);
}

}  // namespace
}  // namespace gf::backends::nvml_gpm_test
