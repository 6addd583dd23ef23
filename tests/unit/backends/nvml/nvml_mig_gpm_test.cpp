// NVML GPM per MIG GPU instance (nvmlGpmMigSampleGet on the parent's handle), against the fake NVML:
// each GPU instance's own metrics on its MIG devices (compute instances of one GPU instance share them),
// an instance whose GPM the driver refuses, a GPU without GPM, a driver without the function, and the
// samples' lifecycle when instances come and go (freed, never paired across instances: the fake rejects
// a metrics call on samples of two instances).
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/nvml/nvml_api.hpp"
#include "backends/nvml/nvml_gpm.hpp"
#include "core/fields.hpp"
#include "fake_nvml_harness.hpp"
#include "support/fake_clock.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvml_mig_gpm_test {
namespace {

using core::Absent;
using namespace std::chrono_literals;
using namespace backends::nvml;

constexpr double kMiBps = 1024.0 * 1024.0;

void expect_instance_without_profiling(const core::MigInstance& m, Absent why, const std::string& note_part) {
  for (const auto& slot : kGpmMetrics) {
    EXPECT_FALSE((m.*slot.mig_reading).has_value()) << m.uuid;
    EXPECT_EQ((m.*slot.mig_reading).why(), why) << m.uuid << ": " << core::code((m.*slot.mig_reading).why());
  }
  EXPECT_NE(m.profiling_note.find(note_part), std::string::npos) << m.uuid << ": " << m.profiling_note;
}

const core::MigInstance& by_gi(const core::GpuReading& g, unsigned gi, unsigned ci = 0) {
  auto it = std::find_if(g.mig_instances.begin(), g.mig_instances.end(),
                         [&](const auto& m) { return m.gpu_instance_id == gi && m.compute_instance_id == ci; });
  EXPECT_NE(it, g.mig_instances.end()) << "GPU instance " << gi << "/" << ci;
  static const core::MigInstance none;
  return it != g.mig_instances.end() ? *it : none;
}

class MigGpmTest : public nvml_test::FakeNvmlTest {
 protected:
  void SetUp() override {
    FakeNvmlTest::SetUp();
    live_ = fake().library().function<unsigned long long (*)()>("fake_nvml_gpm_live_samples");
    ASSERT_NE(live_, nullptr);
    live_before_ = live_();
  }
  void TearDown() override {
    if (live_) {
      EXPECT_EQ(live_(), live_before_);  // every sample went back to NVML
    }
    FakeNvmlTest::TearDown();
  }
  Result<std::unique_ptr<Backend>> open_gpm(const std::string& scenario, std::chrono::milliseconds interval = 10s) {
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    BackendOptions opts;
    opts.nvml_library = GF_FAKE_NVML;
    opts.clock = &time_;
    opts.gpm_interval = interval;
    return open_nvml(opts);
  }
  core::Snapshot take(Backend& b) {
    auto s = b.snapshot();
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? *s : core::Snapshot{};
  }

  test::FakeClock time_;
  unsigned long long (*live_)() = nullptr;
  unsigned long long live_before_ = 0;
};

TEST_F(MigGpmTest, EachGpuInstanceHasItsOwnProfiling) {
  auto backend = open_gpm(fixture("h100_mig_gpm.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto first = take(**backend);
  ASSERT_EQ(first.gpus.size(), 2u);
  ASSERT_EQ(first.gpus[0].mig_instances.size(), 5u);
  expect_instance_without_profiling(by_gi(first.gpus[0], 2), Absent::Unavailable, "first GPM sample");

  time_.advance(10s);
  auto s = take(**backend);
  const auto& h100 = s.gpus[0];
  // The whole GPU: no GPM of its own in MIG mode, and it says where to look.
  EXPECT_EQ(h100.prof_tensor_active.why(), Absent::MigEnabled);
  EXPECT_NE(h100.profiling_note.find("each MIG instance"), std::string::npos) << h100.profiling_note;

  // GPU instance 2 (3g.40gb), both of its compute instances: the same values, its own.
  for (unsigned ci : {0u, 1u}) {
    const auto& m = by_gi(h100, 2, ci);
    EXPECT_DOUBLE_EQ(m.prof_tensor_active.value_or(-1), 0.60);
    EXPECT_DOUBLE_EQ(m.prof_sm_active.value_or(-1), 0.75);
    EXPECT_DOUBLE_EQ(m.prof_fp16_active.value_or(-1), 0.50);
    EXPECT_DOUBLE_EQ(m.prof_pcie_rx_bytes.value_or(-1), 200 * kMiBps);
    EXPECT_TRUE(m.profiling_note.empty()) << m.profiling_note;
  }
  // GPU instance 3 (2g.20gb): its own counters, not instance 2's.
  const auto& gi3 = by_gi(h100, 3);
  EXPECT_DOUBLE_EQ(gi3.prof_tensor_active.value_or(-1), 0.02);
  EXPECT_DOUBLE_EQ(gi3.prof_fp32_active.value_or(-1), 0.07);
  EXPECT_DOUBLE_EQ(gi3.prof_pcie_tx_bytes.value_or(-1), 1 * kMiBps);
  // GPU instance 9: idle is 0, not absent.
  ASSERT_TRUE(by_gi(h100, 9).prof_sm_active.has_value());
  EXPECT_EQ(*by_gi(h100, 9).prof_sm_active, 0.0);
  // GPU instance 10: the driver does not sample it.
  expect_instance_without_profiling(by_gi(h100, 10), Absent::NotSupported, "GPU instance 10");
  // The A100's instance: no GPM on the GPU at all.
  ASSERT_EQ(s.gpus[1].mig_instances.size(), 1u);
  expect_instance_without_profiling(s.gpus[1].mig_instances[0], Absent::NotSupported, "Hopper");

  // One sample per GPU instance per GPM interval, on the parent's handle, and one metrics call per pair.
  EXPECT_EQ(fake().calls_of("nvmlGpmMigSampleGet"), 8u);  // GPU instances 2, 3, 9, 10, twice
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 3u);    // 2, 3 and 9 on the second collection
  // Two buffers per GPU instance that was sampled and for the whole H100, allocated once.
  EXPECT_EQ(live_(), live_before_ + 2 * 4 + 2);
  time_.advance(10s);
  take(**backend);
  EXPECT_EQ(fake().calls_of("nvmlGpmSampleAlloc"), 10u);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), 6u);
  backend->reset();
}

TEST_F(MigGpmTest, InstancesThatGoAwayFreeTheirSamples) {
  // MIG mode goes off on the third collection: the instances (and their GPM states) go with it.
  auto scenario = nlohmann::json::parse(std::ifstream(fixture("h100_mig_gpm.json")));
  scenario["gpus"][0]["mig_mode"] = {1, 1, 0};
  scenario["gpus"].erase(1);
  auto backend = open_gpm(write_scenario(scenario));
  ASSERT_TRUE(backend) << backend.error().message;
  take(**backend);
  EXPECT_EQ(live_(), live_before_ + 2 * 4 + 2);
  time_.advance(10s);
  EXPECT_DOUBLE_EQ(by_gi(take(**backend).gpus[0], 3).prof_tensor_active.value_or(-1), 0.02);
  time_.advance(10s);
  auto off = take(**backend);
  EXPECT_TRUE(off.gpus[0].mig_instances.empty());
  EXPECT_EQ(live_(), live_before_ + 2);  // the whole GPU's two only
  backend->reset();
}

// The collector on its own, fed the MIG instances a collection would list, to change them at will.
class MigGpmCollectorTest : public MigGpmTest {
 protected:
  void SetUp() override {
    MigGpmTest::SetUp();
    ::setenv("FAKE_NVML_SCENARIO", fixture("h100_mig_gpm.json").c_str(), 1);
    auto api = load_api(fake().library());
    ASSERT_TRUE(api) << api.error().message;
    api_ = *api;
    ASSERT_EQ(api_.init(), kSuccess);
    ASSERT_EQ(api_.device_handle(0, &h100_), kSuccess);
  }
  void TearDown() override {
    if (api_.shutdown) api_.shutdown();
    MigGpmTest::TearDown();
  }
  static core::MigInstance instance(unsigned gi, const std::string& uuid, const std::string& profile) {
    core::MigInstance m;
    m.gpu_instance_id = gi;
    m.uuid = uuid;
    m.profile = profile;
    return m;
  }
  core::GpuReading collect(GpmCollector& c, std::vector<core::MigInstance> instances) {
    core::GpuReading g;
    g.mig_enabled = true;
    g.mig_instances = std::move(instances);
    c.read(h100_, time_.now(), g);
    time_.advance(10s);
    return g;
  }

  Api api_;
  Device h100_ = nullptr;
};

TEST_F(MigGpmCollectorTest, ARecreatedInstanceStartsAfreshAndPairsAreNeverMixed) {
  GpmCollector c(api_, 10s);
  const auto gi2 = instance(2, "MIG-first", "3g.40gb");
  const auto gi3 = instance(3, "MIG-three", "2g.20gb");
  collect(c, {gi2, gi3});
  auto g = collect(c, {gi2, gi3});
  EXPECT_DOUBLE_EQ(g.mig_instances[0].prof_tensor_active.value_or(-1), 0.60);
  EXPECT_DOUBLE_EQ(g.mig_instances[1].prof_tensor_active.value_or(-1), 0.02);
  EXPECT_EQ(live_(), live_before_ + 2 + 2 * 2);

  // GPU instance 2 is gone: its samples are freed; instance 3 goes on with its own pair.
  g = collect(c, {gi3});
  EXPECT_DOUBLE_EQ(g.mig_instances[0].prof_tensor_active.value_or(-1), 0.02);
  EXPECT_EQ(live_(), live_before_ + 2 + 2);

  // An operator re-creates GPU instance 2 (a new MIG device UUID under the same id), listed first now:
  // a fresh state, whose first sample pairs with nothing (the old one was freed with its state).
  const auto before = fake().calls_of("nvmlGpmMetricsGet");
  g = collect(c, {instance(2, "MIG-second", "3g.40gb"), gi3});
  expect_instance_without_profiling(g.mig_instances[0], Absent::Unavailable, "first GPM sample");
  EXPECT_DOUBLE_EQ(g.mig_instances[1].prof_tensor_active.value_or(-1), 0.02);
  EXPECT_EQ(fake().calls_of("nvmlGpmMetricsGet"), before + 1);  // instance 3's only
  // The same id with another profile is another instance too.
  g = collect(c, {instance(2, "MIG-second", "4g.40gb"), gi3});
  expect_instance_without_profiling(g.mig_instances[0], Absent::Unavailable, "first GPM sample");
  g = collect(c, {instance(2, "MIG-second", "4g.40gb"), gi3});
  EXPECT_DOUBLE_EQ(g.mig_instances[0].prof_tensor_active.value_or(-1), 0.60);
  EXPECT_EQ(live_(), live_before_ + 2 + 2 * 2);
  // Every metrics call the fake accepted paired two samples of one instance (it answers INVALID_ARGUMENT
  // otherwise, which would have shown as an error above).
  c.clear();
  EXPECT_EQ(live_(), live_before_);
}

TEST_F(MigGpmCollectorTest, ADriverWithoutPerInstanceGpmSaysSo) {
  api_.gpm_mig_sample_get = nullptr;  // NVML from before the function
  GpmCollector c(api_, 10s);
  collect(c, {instance(2, "MIG-first", "3g.40gb")});
  auto g = collect(c, {instance(2, "MIG-first", "3g.40gb")});
  expect_instance_without_profiling(g.mig_instances[0], Absent::NotSupported, "nvmlGpmMigSampleGet");
  EXPECT_EQ(fake().calls_of("nvmlGpmMigSampleGet"), 0u);
}

TEST_F(MigGpmCollectorTest, IntervalZeroTurnsInstanceGpmOffToo) {
  GpmCollector c(api_, 0ms);
  auto g = collect(c, {instance(2, "MIG-first", "3g.40gb")});
  expect_instance_without_profiling(g.mig_instances[0], Absent::NotQueried, "off");
  EXPECT_EQ(fake().calls_of("nvmlGpmMigSampleGet"), 0u);
}

}  // namespace
}  // namespace gf::backends::nvml_mig_gpm_test
