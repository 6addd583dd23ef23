// The fake NVML's GPM entry points themselves, called through gpufleet's own ABI declarations: sample
// handles are checked as NVML checks them, so a backend that pairs samples wrongly fails its tests.
#include <gtest/gtest.h>

#include <memory>

#include "backends/nvml/nvml_abi.hpp"
#include "fake_nvml_harness.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::fake_gpm_test {
namespace {

using namespace backends::nvml;

class FakeGpm : public nvml_test::FakeNvmlTest {
 protected:
  void SetUp() override {
    FakeNvmlTest::SetUp();
    const auto& lib = fake().library();
    init_ = lib.function<FnVoid*>("nvmlInit_v2");
    shutdown_ = lib.function<FnVoid*>("nvmlShutdown");
    handle_ = lib.function<FnHandleByIndex*>("nvmlDeviceGetHandleByIndex_v2");
    support_ = lib.function<FnGpmSupport*>("nvmlGpmQueryDeviceSupport");
    alloc_ = lib.function<FnGpmSampleAlloc*>("nvmlGpmSampleAlloc");
    free_ = lib.function<FnGpmSampleFree*>("nvmlGpmSampleFree");
    get_ = lib.function<FnGpmSampleGet*>("nvmlGpmSampleGet");
    metrics_ = lib.function<FnGpmMetricsGet*>("nvmlGpmMetricsGet");
    ASSERT_TRUE(init_ && shutdown_ && handle_ && support_ && alloc_ && free_ && get_ && metrics_);
    ::setenv("FAKE_NVML_SCENARIO", fixture("h100_gpm.json").c_str(), 1);
    ASSERT_EQ(init_(), kSuccess);
    ASSERT_EQ(handle_(0, &h100_), kSuccess);
    ASSERT_EQ(handle_(1, &a100_), kSuccess);
    ASSERT_EQ(alloc_(&a_), kSuccess);
    ASSERT_EQ(alloc_(&b_), kSuccess);
    request_ = std::make_unique<GpmMetricsGet>();
  }
  void TearDown() override {
    if (free_) {
      free_(a_);
      free_(b_);
    }
    if (shutdown_) shutdown_();
    FakeNvmlTest::TearDown();
  }
  Return metrics(GpmSample s1, GpmSample s2, unsigned version = kGpmMetricsGetVersion) {
    *request_ = GpmMetricsGet{};
    request_->version = version;
    request_->num_metrics = 3;
    request_->sample1 = s1;
    request_->sample2 = s2;
    request_->metrics[0].metric_id = kGpmAnyTensorUtil;
    request_->metrics[1].metric_id = 8;     // NVML_GPM_METRIC_DMMA_TENSOR_UTIL: not in the scenario
    request_->metrics[2].metric_id = 1000;  // no such metric
    return metrics_(request_.get());
  }

  FnVoid* init_ = nullptr;
  FnVoid* shutdown_ = nullptr;
  FnHandleByIndex* handle_ = nullptr;
  FnGpmSupport* support_ = nullptr;
  FnGpmSampleAlloc* alloc_ = nullptr;
  FnGpmSampleFree* free_ = nullptr;
  FnGpmSampleGet* get_ = nullptr;
  FnGpmMetricsGet* metrics_ = nullptr;
  Device h100_ = nullptr, a100_ = nullptr;
  GpmSample a_ = nullptr, b_ = nullptr;
  std::unique_ptr<GpmMetricsGet> request_;
};

TEST_F(FakeGpm, SupportIsPerGpuAndChecksTheStructVersion) {
  GpmSupport s{kGpmSupportVersion, 7};
  EXPECT_EQ(support_(h100_, &s), kSuccess);
  EXPECT_EQ(s.is_supported_device, 1u);
  EXPECT_EQ(support_(a100_, &s), kSuccess);
  EXPECT_EQ(s.is_supported_device, 0u);
  GpmSupport wrong{2, 0};
  EXPECT_EQ(support_(h100_, &wrong), kErrorArgumentVersionMismatch);
  EXPECT_EQ(support_(h100_, nullptr), kErrorInvalidArgument);
}

TEST_F(FakeGpm, MetricsNeedTwoSamplesOfOneGpuInOrder) {
  EXPECT_EQ(metrics(a_, b_), kErrorInvalidArgument);  // neither filled yet
  ASSERT_EQ(get_(h100_, a_), kSuccess);
  EXPECT_EQ(metrics(a_, a_), kErrorInvalidArgument);  // the same sample twice
  ASSERT_EQ(get_(h100_, b_), kSuccess);
  EXPECT_EQ(metrics(b_, a_), kErrorInvalidArgument);  // sample1 newer than sample2
  EXPECT_EQ(metrics(a_, b_, 2), kErrorArgumentVersionMismatch);
  ASSERT_EQ(metrics(a_, b_), kSuccess);
  EXPECT_EQ(request_->metrics[0].nvml_return, kSuccess);
  EXPECT_DOUBLE_EQ(request_->metrics[0].value, 93.694);  // percent, as NVML gives it
  EXPECT_EQ(request_->metrics[1].nvml_return, kErrorNotSupported);
  EXPECT_EQ(request_->metrics[2].nvml_return, kErrorInvalidArgument);
  EXPECT_EQ(get_(a100_, b_), kErrorNotSupported);  // no GPM before Hopper
}

TEST_F(FakeGpm, SamplesOfTwoGpusDoNotPair) {
  ASSERT_EQ(shutdown_(), kSuccess);  // the same samples, a scenario with two GPM GPUs
  const nlohmann::json gpu = {{"gpm_supported", true}, {"gpm_metrics", {{"5", 1.0}}}};
  ::setenv("FAKE_NVML_SCENARIO", write_scenario({{"gpus", {gpu, gpu}}}).c_str(), 1);
  ASSERT_EQ(init_(), kSuccess);
  Device first = nullptr, second = nullptr;
  ASSERT_EQ(handle_(0, &first), kSuccess);
  ASSERT_EQ(handle_(1, &second), kSuccess);
  ASSERT_EQ(get_(first, a_), kSuccess);
  ASSERT_EQ(get_(second, b_), kSuccess);
  EXPECT_EQ(metrics(a_, b_), kErrorInvalidArgument);
  ASSERT_EQ(get_(first, b_), kSuccess);  // refilled from the first GPU
  EXPECT_EQ(metrics(a_, b_), kSuccess);
}

TEST_F(FakeGpm, FreeingChecksTheHandle) {
  GpmSample s = nullptr;
  ASSERT_EQ(alloc_(&s), kSuccess);
  EXPECT_EQ(free_(nullptr), kSuccess);
  EXPECT_EQ(free_(s), kSuccess);
  EXPECT_EQ(free_(s), kErrorInvalidArgument);  // freed twice
  EXPECT_EQ(get_(h100_, s), kErrorInvalidArgument);
  EXPECT_EQ(alloc_(nullptr), kErrorInvalidArgument);
}

}  // namespace
}  // namespace gf::backends::fake_gpm_test
