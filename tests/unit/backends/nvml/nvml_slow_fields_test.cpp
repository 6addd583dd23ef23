// The NVML backend's slow fields (ECC, retired pages, remapped rows, PCIe replays, power limit,
// persistence mode) against the fake NVML: asked once per kSlowReadInterval, not at every reading; a
// change shows after the period; an XID on a GPU brings its slow fields at the next reading.
#include <gtest/gtest.h>

#include <chrono>

#include "backends/nvml/nvml_device.hpp"
#include "fake_nvml_harness.hpp"
#include "support/eventually.hpp"

namespace gf::backends::nvml_test {
namespace {

using json = nlohmann::json;
using std::chrono::seconds;

// Every slow field steps from its first value to its second at the second query of its key.
json paced_gpu(unsigned index) {
  return json{{"uuid", "GPU-paced-" + std::to_string(index)},
              {"memory_total_mib", 1000},
              {"memory_used_mib", 10},
              {"utilization_gpu_pct", 5},
              {"utilization_memory_pct", 1},
              {"power_limit_w", json::array({700, 650})},
              {"persistence_mode", json::array({true, false})},
              {"ecc_uncorrected_volatile", json::array({0, 2})},
              {"ecc_corrected_volatile", json::array({0, 5})},
              {"ecc_corrected_aggregate", json::array({10, 17})},
              {"ecc_uncorrected_aggregate", json::array({0, 2})},
              {"retired_pages_sbe", json::array({0, 3})},
              {"retired_pages_dbe", 0},
              {"retired_pages_pending", 0},
              {"remapped_rows_correctable", json::array({0, 1})},
              {"remapped_rows_failure", json::array({0, 1})},
              {"pcie_replay_count", json::array({0, 9})},
              {"supported_event_types", 0xFF9F}};
}

class NvmlSlowFieldsTest : public FakeNvmlTest {
 protected:
  std::string two_gpus() { return write_scenario(json{{"gpus", json::array({paced_gpu(0), paced_gpu(1)})}}); }

  core::Snapshot take(Backend& b) {
    auto s = b.snapshot();
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(*s) : core::Snapshot{};
  }

  // The calls of every slow query so far.
  unsigned long long slow_calls() const {
    unsigned long long n = 0;
    for (const char* fn :
         {"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus",
          "nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetEnforcedPowerLimit",
          "nvmlDeviceGetPersistenceMode"})
      n += fake().calls_of(fn);
    return n;
  }
};

void expect_first_values(const core::GpuReading& g) {
  EXPECT_EQ(g.power_limit_w, core::Reading<double>(700.0));
  EXPECT_EQ(g.persistence_mode, core::Reading<bool>(true));
  EXPECT_EQ(g.ecc_uncorrected_volatile, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.ecc_corrected_volatile, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.ecc_corrected_aggregate, core::Reading<std::uint64_t>(10));
  EXPECT_EQ(g.ecc_uncorrected_aggregate, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.retired_pages_sbe, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.retired_pages_pending, core::Reading<bool>(false));
  EXPECT_EQ(g.remapped_rows_correctable, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.remapped_rows_failure, core::Reading<bool>(false));
  EXPECT_EQ(g.pcie_replay_count, core::Reading<std::uint64_t>(0));
}

void expect_second_values(const core::GpuReading& g) {
  EXPECT_EQ(g.power_limit_w, core::Reading<double>(650.0));
  EXPECT_EQ(g.persistence_mode, core::Reading<bool>(false));
  EXPECT_EQ(g.ecc_uncorrected_volatile, core::Reading<std::uint64_t>(2));
  EXPECT_EQ(g.ecc_corrected_volatile, core::Reading<std::uint64_t>(5));
  EXPECT_EQ(g.ecc_corrected_aggregate, core::Reading<std::uint64_t>(17));
  EXPECT_EQ(g.ecc_uncorrected_aggregate, core::Reading<std::uint64_t>(2));
  EXPECT_EQ(g.retired_pages_sbe, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(g.remapped_rows_correctable, core::Reading<std::uint64_t>(1));
  EXPECT_EQ(g.remapped_rows_failure, core::Reading<bool>(true));
  EXPECT_EQ(g.pcie_replay_count, core::Reading<std::uint64_t>(9));
}

TEST_F(NvmlSlowFieldsTest, AreAskedOncePerPeriodAndAChangeShowsAfterIt) {
  auto backend = open(two_gpus());
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;

  auto first = take(b);
  ASSERT_EQ(first.gpus.size(), 2u);
  for (const auto& g : first.gpus) expect_first_values(g);
  const auto slow_after_first = slow_calls();
  // Per GPU: 4 ECC counts, 2 retired-page counts, pending, remapped rows, replays, power limit, persistence.
  EXPECT_EQ(slow_after_first, 2u * 11u);

  // Within the period: the last answers again, and not one slow query; the fast ones are asked each time.
  const auto util_after_first = fake().calls_of("nvmlDeviceGetUtilizationRates");
  for (int i = 0; i < 3; ++i) {
    clock_.advance(seconds(3));  // 3, 6, 9 s: all within kSlowReadInterval
    auto again = take(b);
    ASSERT_EQ(again.gpus.size(), 2u);
    for (const auto& g : again.gpus) expect_first_values(g);
  }
  EXPECT_EQ(slow_calls(), slow_after_first);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetUtilizationRates"), util_after_first + 2u * 3u);

  // The period is over (10 s since the first reading): the changed values show.
  clock_.advance(nvml::kSlowReadInterval - seconds(9));
  auto later = take(b);
  ASSERT_EQ(later.gpus.size(), 2u);
  for (const auto& g : later.gpus) expect_second_values(g);
  EXPECT_EQ(slow_calls(), 2 * slow_after_first);
}

TEST_F(NvmlSlowFieldsTest, AnXidBringsItsGpusSlowFieldsAtTheNextReading) {
  auto backend = open(two_gpus(), GF_FAKE_NVML, /*xid_events=*/true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto& b = **backend;
  auto first = take(b);
  ASSERT_EQ(first.gpus.size(), 2u);
  const auto ecc_after_first = fake().calls_of("nvmlDeviceGetTotalEccErrors");
  EXPECT_EQ(ecc_after_first, 2u * 4u);

  auto inject = fake().library().function<int (*)(unsigned, unsigned long long)>("fake_nvml_inject_xid");
  ASSERT_NE(inject, nullptr);
  ASSERT_EQ(inject(0, 48), 0);  // a double-bit ECC error; the clock stands still
  core::Snapshot snap;
  ASSERT_TRUE(test::eventually(
      [&] {
        snap = take(b);
        return snap.gpus.size() == 2 && snap.gpus[0].last_xid == core::Reading<unsigned>(48u);
      },
      seconds(10), std::chrono::milliseconds(10)));
  snap = take(b);  // the XID may have come between the look at the count and the reading's XIDs
  ASSERT_EQ(snap.gpus.size(), 2u);
  expect_second_values(snap.gpus[0]);
  expect_first_values(snap.gpus[1]);  // another GPU's XID asks nothing of this one
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetTotalEccErrors"), ecc_after_first + 4u);  // GPU 0, once
}

}  // namespace
}  // namespace gf::backends::nvml_test
