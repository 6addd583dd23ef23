// The simulated backend's GPM readings: Hopper-class names get the real H100's proportions scaled by
// the simulated load; other names have none and say why.
#include <gtest/gtest.h>

#include "backends/sim/sim_backend.hpp"
#include "support/fake_clock.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

TEST(SimProfiling, HopperClassGpusHaveActivityOthersSayWhyNot) {
  test::FakeClock time;
  BackendOptions o;
  o.clock = &time;  // the built-in demo: four "Simulated H100 80GB HBM3"
  auto b = open_sim(o);
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s);
  ASSERT_FALSE(s->gpus.empty());
  for (const auto& g : s->gpus) {
    ASSERT_TRUE(g.utilization_pct.has_value());
    const double u = *g.utilization_pct / 100.0;
    EXPECT_NEAR(g.prof_tensor_active.value_or(-1), 0.93694 * u, 0.01) << g.index;
    EXPECT_NEAR(g.prof_sm_occupancy.value_or(-1), 0.14266 * u, 0.01) << g.index;
    EXPECT_EQ(g.prof_fp32_active.value_or(-1), 0.0);
    EXPECT_TRUE(g.profiling_note.empty());
  }
}

TEST(SimProfiling, OtherGpusHaveNoProfilingSeries) {
  test::FakeClock time;
  BackendOptions o;
  o.clock = &time;
  o.sim_scenario = std::string(GF_FIXTURES_DIR) + "/sim/two_gpus.json";  // "Sim A100", "Sim L4"
  auto b = open_sim(o);
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s);
  const auto& a100 = s->gpus.at(0);
  EXPECT_FALSE(a100.prof_tensor_active.has_value());
  EXPECT_EQ(a100.prof_tensor_active.why(), core::Absent::NotSupported);
  EXPECT_NE(a100.profiling_note.find("Hopper"), std::string::npos);
}

}  // namespace
}  // namespace gf::backends
