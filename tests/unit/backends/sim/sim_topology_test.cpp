// The sim backend's topology(): the built-in demo's NVLink pairs, the scenario key "topology", its
// replication with sim_gpus, and the errors a bad "topology" gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/sim/sim_backend.hpp"
#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

using core::LinkLevel;
using ::testing::HasSubstr;

class SimTopologyTest : public ::testing::Test {
 protected:
  BackendOptions opts(unsigned sim_gpus = 0, const std::string& scenario_text = {}) {
    BackendOptions o;
    o.clock = &clock_;
    o.sim_gpus = sim_gpus;
    if (!scenario_text.empty()) {
      o.sim_scenario = (dir_ / "scenario.json").string();
      std::ofstream(o.sim_scenario) << scenario_text;
    }
    return o;
  }

  core::Topology topology_of(const BackendOptions& o) {
    auto b = open_sim(o);
    EXPECT_TRUE(b) << b.error().message;
    if (!b) return {};
    auto t = (*b)->topology();
    EXPECT_TRUE(t) << t.error().message;
    return t ? *t : core::Topology{};
  }

  test::FakeClock clock_;
  test::TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path();
};

constexpr const char* kTwoGpusPaired = R"({
  "gpus": [{"load": [{"t": 0, "utilization": 0}]}, {"load": [{"t": 0, "utilization": 0}]}],
  "topology": {"nvlink_pairs": [[0, 1, 2]], "levels": [[1, 0, "SingleSwitch"]]}
})";

TEST_F(SimTopologyTest, DemoHasTwoNvLinkPairsOnDifferentSockets) {
  const auto t = topology_of(opts());
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.nvlinks(0, 1), 4u);
  EXPECT_EQ(t.nvlinks(2, 3), 4u);
  EXPECT_EQ(t.nvlinks(1, 2), 0u);
  EXPECT_EQ(t.nvlinks(0, 3), 0u);
  EXPECT_EQ(t.level(0, 1), LinkLevel::NumaNode);
  EXPECT_EQ(t.level(3, 2), LinkLevel::NumaNode);
  for (auto [a, b] : {std::pair{0u, 2u}, {0u, 3u}, {1u, 2u}, {1u, 3u}})
    EXPECT_EQ(t.level(a, b), LinkLevel::CrossSocket);
}

TEST_F(SimTopologyTest, ReplicatedDemoGpusArePairedToo) {
  const auto t = topology_of(opts(8));
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t.nvlinks(4, 5), 4u);
  EXPECT_EQ(t.nvlinks(6, 7), 4u);
  EXPECT_EQ(t.level(4, 5), LinkLevel::NumaNode);
  EXPECT_EQ(t.nvlinks(3, 4), 0u);  // pairs do not straddle blocks
  EXPECT_EQ(t.nvlinks(0, 4), 0u);
  EXPECT_EQ(t.level(0, 4), LinkLevel::CrossSocket);
  EXPECT_EQ(t.level(5, 6), LinkLevel::CrossSocket);
}

TEST_F(SimTopologyTest, TrimmedDemoKeepsOnlyPairsItStillHas) {
  const auto t = topology_of(opts(3));
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.nvlinks(0, 1), 4u);
  EXPECT_EQ(t.nvlinks(1, 2), 0u);
  EXPECT_EQ(t.level(1, 2), LinkLevel::CrossSocket);
}

TEST_F(SimTopologyTest, ScenarioTopologyIsReplicatedInBlocksAndPartialBlocksDropPairs) {
  const auto t = topology_of(opts(5, kTwoGpusPaired));
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t.nvlinks(0, 1), 2u);
  EXPECT_EQ(t.nvlinks(2, 3), 2u);
  EXPECT_EQ(t.level(2, 3), LinkLevel::SingleSwitch);
  EXPECT_EQ(t.nvlinks(4, 3), 0u);                // GPU 4's partner would be GPU 5
  EXPECT_EQ(t.level(1, 2), LinkLevel::Unknown);  // no default_level
}

TEST_F(SimTopologyTest, NoTopologyKeyMeansNothingKnown) {
  BackendOptions o = opts();
  o.sim_scenario = std::string(GF_FIXTURES_DIR) + "/sim/two_gpus.json";
  const auto t = topology_of(o);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_FALSE(t.known());
}

TEST_F(SimTopologyTest, BadTopologyIsRefusedWithTheReason) {
  const std::string gpus = R"("gpus": [{"load": []}, {"load": []}])";
  struct Case {
    std::string topology;
    std::string says;
  };
  const Case cases[] = {
      {R"("topology": [])", "must be an object"},
      {R"("topology": {"levels": [[0, 1, "Numa"]]})", "\"Numa\" is not one of"},
      {R"("topology": {"levels": [[0, 1, 40]]})", "40 is not one of"},
      {R"("topology": {"nvlink_pairs": [[0, 2, 4]]})", "two different GPUs"},
      {R"("topology": {"nvlink_pairs": [[1, 1, 4]]})", "two different GPUs"},
      {R"("topology": {"nvlink_pairs": [[0, 4294967297, 4]]})", "two different GPUs"},  // not GPU 1
      {R"("topology": {"nvlink_pairs": [[0, 1, 0]]})", "links must be 1..18"},
      {R"("topology": {"nvlink_pairs": [[0, 1]]})", "[gpu a, gpu b, value]"},
      {R"("topology": {"default_level": "Far"})", "is not one of"},
  };
  for (const auto& c : cases) {
    auto b = open_sim(opts(0, "{" + gpus + ", " + c.topology + "}"));
    ASSERT_FALSE(b) << c.topology;
    EXPECT_THAT(b.error().message, HasSubstr(c.says)) << c.topology;
    EXPECT_THAT(b.error().message, HasSubstr("sim: bad scenario")) << c.topology;
  }
}

}  // namespace
}  // namespace gf::backends
