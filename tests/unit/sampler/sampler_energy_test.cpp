// A job sampler's counter energy is exact from the job's first sample to its last, although the backend
// reads its energy counter only every 30 s (NVML: nvml_device.hpp's kCounterReadInterval) and carries the
// last value in between: the sampler asks for fresh counters (Backend::fresh_counters) at both ends.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "sampler/hub.hpp"
#include "sampler/sampler.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::sampler {
namespace {

using namespace std::chrono_literals;

// A GPU drawing 100 W steadily whose energy counter is read as the NVML backend reads it: at the first
// snapshot, every period, and at the snapshot after fresh_counters(); the last value in between.
class PacedCounterBackend final : public backends::Backend {
 public:
  static constexpr double kWatts = 100.0;
  explicit PacedCounterBackend(const core::Clock& clock) : clock_(clock) {}
  std::string_view name() const noexcept override { return "paced-counter"; }
  void fresh_counters() override { fresh_ = true; }
  Result<core::Snapshot> snapshot() override {
    if (fail_next > 0) {
      --fail_next;
      return make_error("the driver did not answer");
    }
    const auto now = clock_.now();
    if (!read_at_ || fresh_ || now - *read_at_ >= 10s) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
      held_mj_ = static_cast<std::uint64_t>(ms) * static_cast<std::uint64_t>(kWatts);  // W × ms = mJ
      read_at_ = now;
      ++reads_;
    }
    fresh_ = false;
    core::Snapshot s;
    s.gpus = {test::make_gpu(0, 50)};
    s.gpus[0].power_draw_w = kWatts;
    s.gpus[0].energy_mj = held_mj_;
    return s;
  }
  int reads() const { return reads_; }
  int fail_next = 0;  // snapshots still to fail

 private:
  const core::Clock& clock_;
  std::optional<std::chrono::steady_clock::time_point> read_at_;
  bool fresh_ = false;
  std::uint64_t held_mj_ = 0;
  int reads_ = 0;
};

struct SamplerEnergyTest : ::testing::Test {
  test::FakeClock clock;
  PacedCounterBackend* backend = nullptr;
  std::unique_ptr<Monitor> monitor;
  void SetUp() override {
    auto b = std::make_unique<PacedCounterBackend>(clock);
    backend = b.get();
    monitor = std::make_unique<Monitor>(std::move(b), clock, MonitorOptions{});
  }
};

TEST_F(SamplerEnergyTest, CounterEnergyRunsFromTheJobsFirstSampleToItsLast) {
  SampleHub hub(*monitor, clock, SampleHub::Drive::Manual);
  ASSERT_TRUE(monitor->snapshot(false));  // the agent read the counter 3 s before the job started
  clock.advance(3s);
  auto sampler = Sampler::create(hub, 1s);
  ASSERT_TRUE(sampler);
  (*sampler)->start();
  hub.step(clock.now());
  for (int i = 0; i < 25; ++i) {  // 25.5 s of job: the counter is read by the period twice in between
    clock.advance(1s);
    hub.step(clock.now());
  }
  clock.advance(500ms);
  const auto report = (*sampler)->stop();
  ASSERT_EQ(report.gpus.size(), 1u);
  const auto& g = report.gpus.at(0);
  EXPECT_EQ(g.energy_source, core::EnergySource::Counter);
  ASSERT_TRUE(g.energy_joules.has_value());
  // 100 W for the 25.5 s from the first sample to the last, to the millijoule.
  EXPECT_DOUBLE_EQ(*g.energy_joules, PacedCounterBackend::kWatts * 25.5);
  EXPECT_DOUBLE_EQ(report.duration_s, 25.5);
  // The first read, two by the period, the job's first and last samples: the sampler did not make the
  // backend read the counter at every sample.
  EXPECT_EQ(backend->reads(), 5);
  // A second stop takes no further sample.
  EXPECT_EQ((*sampler)->stop().sample_count, report.sample_count);
}

TEST_F(SamplerEnergyTest, AJobShorterThanThePeriodStillSeesItsEnergy) {
  SampleHub hub(*monitor, clock, SampleHub::Drive::Manual);
  ASSERT_TRUE(monitor->snapshot(false));
  clock.advance(1s);
  auto sampler = Sampler::create(hub, 1s);
  ASSERT_TRUE(sampler);
  (*sampler)->start();
  for (int i = 0; i < 4; ++i) {
    hub.step(clock.now());
    clock.advance(1s);
  }
  const auto report = (*sampler)->stop();
  ASSERT_EQ(report.gpus.size(), 1u);
  ASSERT_TRUE(report.gpus.at(0).energy_joules.has_value());
  EXPECT_DOUBLE_EQ(*report.gpus.at(0).energy_joules, PacedCounterBackend::kWatts * 4.0);  // not 0
  EXPECT_EQ(report.gpus.at(0).energy_source, core::EnergySource::Counter);
}

TEST_F(SamplerEnergyTest, AFailedFreshFirstSampleLeavesTheFirstTickToTheJob) {
  SampleHub hub(*monitor, clock, SampleHub::Drive::Manual);
  auto sampler = Sampler::create(hub, 1s);
  ASSERT_TRUE(sampler);
  backend->fail_next = 1;  // the fresh query at start() fails
  (*sampler)->start();
  hub.step(clock.now());  // the subscription's first call: now the job's first sample, not skipped
  clock.advance(500ms);
  const auto report = (*sampler)->stop();
  EXPECT_EQ(report.sample_count, 2u);  // that tick and the fresh last sample
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(report.duration_s, 0.5);
}

}  // namespace
}  // namespace gf::sampler
