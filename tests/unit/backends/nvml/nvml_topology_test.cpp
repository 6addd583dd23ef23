// The NVML backend's topology(): PCIe common ancestors and NvLink links read through the fake NVML,
// on current and old drivers, and how missing symbols, unsupported devices and lost GPUs degrade to
// Unknown instead of failing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/nvml/nvml_api.hpp"
#include "backends/nvml/nvml_topology.hpp"
#include "fake_nvml_harness.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvml_test {
namespace {

using core::LinkLevel;
using json = nlohmann::json;

using NvmlTopologyTest = FakeNvmlTest;

// What tests/fixtures/nvml/topology.json describes (see its "description").
void expect_fixture_topology(const core::Topology& t) {
  ASSERT_EQ(t.size(), 6u);
  EXPECT_TRUE(t.known());
  EXPECT_EQ(t.nvlinks(0, 1), 4u);
  EXPECT_EQ(t.nvlinks(1, 0), 4u);
  EXPECT_EQ(t.nvlinks(2, 3), 4u);  // GPU 3's links end at 0000:47 — GPU 2, not GPU 1 at 0001:47
  EXPECT_EQ(t.nvlinks(1, 2), 1u);
  EXPECT_EQ(t.nvlinks(1, 3), 0u);
  EXPECT_EQ(t.nvlinks(0, 2), 0u);
  EXPECT_EQ(t.nvlinks(4, 5), 0u);
  EXPECT_EQ(t.level(0, 1), LinkLevel::SingleSwitch);
  EXPECT_EQ(t.level(1, 0), LinkLevel::SingleSwitch);
  EXPECT_EQ(t.level(2, 3), LinkLevel::MultiSwitch);
  EXPECT_EQ(t.level(0, 4), LinkLevel::HostBridge);
  EXPECT_EQ(t.level(0, 2), LinkLevel::NumaNode);
  EXPECT_EQ(t.level(1, 3), LinkLevel::NumaNode);
  EXPECT_EQ(t.level(4, 5), LinkLevel::SameBoard);
  EXPECT_EQ(t.level(3, 5), LinkLevel::Unknown);      // level 35 is no NVML level
  EXPECT_EQ(t.level(0, 5), LinkLevel::CrossSocket);  // the scenario's default
}

TEST_F(NvmlTopologyTest, LevelsAndNvLinksFromTheFixture) {
  auto backend = open(fixture("topology.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto topo = (*backend)->topology();
  ASSERT_TRUE(topo) << topo.error().message;
  expect_fixture_topology(*topo);
  // The current driver's remote-PCI function, not the old one.
  EXPECT_GT(fake().calls_of("nvmlDeviceGetNvLinkRemotePciInfo_v2"), 0u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetNvLinkRemotePciInfo"), 0u);
  // One common-ancestor call per pair.
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetTopologyCommonAncestor"), 15u);
}

TEST_F(NvmlTopologyTest, OldDriverFindsLinksThroughTheLegacyRemotePciStruct) {
  auto backend = open(fixture("topology.json"), GF_FAKE_NVML_OLD);
  ASSERT_TRUE(backend) << backend.error().message;
  auto topo = (*backend)->topology();
  ASSERT_TRUE(topo) << topo.error().message;
  expect_fixture_topology(*topo);
  EXPECT_GT(fake_old().calls_of("nvmlDeviceGetNvLinkRemotePciInfo"), 0u);
}

TEST_F(NvmlTopologyTest, GpusWithoutNvLinkAreAskedAboutLinkZeroOnly) {
  auto backend = open(fixture("mixed.json"));  // no "topology": NvLinkState answers NOT_SUPPORTED
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  auto topo = (*backend)->topology();
  ASSERT_TRUE(topo) << topo.error().message;
  ASSERT_EQ(topo->size(), snap->gpus.size());
  unsigned reachable = 0;
  for (const auto& g : snap->gpus) reachable += g.health == core::Health::Lost ? 0 : 1;
  for (unsigned a = 0; a < topo->size(); ++a)
    for (unsigned b = 0; b < topo->size(); ++b) EXPECT_EQ(topo->nvlinks(a, b), 0u) << a << "-" << b;
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetNvLinkState"), reachable);  // link 0 each, then stop
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetNvLinkRemotePciInfo_v2"), 0u);
}

TEST_F(NvmlTopologyTest, LostGpuIsUnknownToEveryoneAndTheOthersAreUnaffected) {
  auto scenario = json::parse(std::ifstream(fixture("topology.json")));
  scenario["gpus"][1]["lost"] = true;
  auto backend = open(write_scenario(scenario));
  ASSERT_TRUE(backend) << backend.error().message;
  auto topo = (*backend)->topology();
  ASSERT_TRUE(topo) << topo.error().message;
  ASSERT_EQ(topo->size(), 6u);
  for (unsigned other : {0u, 2u, 3u, 4u, 5u}) {
    EXPECT_EQ(topo->level(1, other), LinkLevel::Unknown) << other;
    EXPECT_EQ(topo->nvlinks(1, other), 0u) << other;
  }
  EXPECT_EQ(topo->nvlinks(2, 3), 4u);
  EXPECT_EQ(topo->level(0, 2), LinkLevel::NumaNode);
}

TEST_F(NvmlTopologyTest, FailingDeviceCountIsTheOnlyError) {
  auto scenario = json::parse(std::ifstream(fixture("topology.json")));
  auto backend = open(write_scenario(scenario));
  ASSERT_TRUE(backend) << backend.error().message;
  // Shut the fake down under the backend: every call now answers UNINITIALIZED.
  ASSERT_EQ(fake().library().function<nvml::FnVoid*>("nvmlShutdown")(), nvml::kSuccess);
  auto topo = (*backend)->topology();
  ASSERT_FALSE(topo);
  EXPECT_THAT(topo.error().message, ::testing::HasSubstr("cannot count GPUs"));
  // Give the backend its reference back, so its destructor's shutdown pairs with an init.
  ASSERT_EQ(fake().library().function<nvml::FnVoid*>("nvmlInit_v2")(), nvml::kSuccess);
}

// A driver without the topology symbols: read_topology on the fake's own entry points with the
// optional ones removed, one group at a time.
TEST_F(NvmlTopologyTest, MissingSymbolsLeaveThatPartUnknown) {
  ::setenv("FAKE_NVML_SCENARIO", fixture("topology.json").c_str(), 1);
  auto api = nvml::load_api(fake().library());
  ASSERT_TRUE(api) << api.error().message;
  ASSERT_EQ(api->init(), nvml::kSuccess);
  std::vector<nvml::Device> devices(6, nullptr);
  for (unsigned i = 0; i < devices.size(); ++i) ASSERT_EQ(api->device_handle(i, &devices[i]), nvml::kSuccess);

  nvml::Api no_nvlink = *api;
  no_nvlink.nvlink_state = nullptr;
  const auto levels_only = nvml::read_topology(no_nvlink, devices);
  EXPECT_EQ(levels_only.level(0, 1), LinkLevel::SingleSwitch);
  EXPECT_EQ(levels_only.nvlinks(0, 1), 0u);

  nvml::Api no_remote = *api;
  no_remote.nvlink_remote_pci = nullptr;
  no_remote.nvlink_remote_pci_legacy = nullptr;
  EXPECT_EQ(nvml::read_topology(no_remote, devices).nvlinks(2, 3), 0u);

  nvml::Api no_levels = *api;
  no_levels.topology_common_ancestor = nullptr;
  const auto links_only = nvml::read_topology(no_levels, devices);
  EXPECT_EQ(links_only.level(0, 1), LinkLevel::Unknown);
  EXPECT_EQ(links_only.nvlinks(0, 1), 4u);

  nvml::Api none = no_levels;
  none.nvlink_state = nullptr;
  const auto nothing = nvml::read_topology(none, devices);
  EXPECT_EQ(nothing.size(), 6u);
  EXPECT_FALSE(nothing.known());

  // A GPU without a handle is Unknown to the others.
  devices[4] = nullptr;
  const auto partial = nvml::read_topology(*api, devices);
  EXPECT_EQ(partial.level(0, 4), LinkLevel::Unknown);
  EXPECT_EQ(partial.level(0, 1), LinkLevel::SingleSwitch);
  EXPECT_EQ(api->shutdown(), nvml::kSuccess);
}

TEST(NvmlTopologyLevels, EveryNvmlLevelMapsAndOthersAreUnknown) {
  EXPECT_EQ(nvml::link_level_from_nvml(0), LinkLevel::SameBoard);
  EXPECT_EQ(nvml::link_level_from_nvml(10), LinkLevel::SingleSwitch);
  EXPECT_EQ(nvml::link_level_from_nvml(20), LinkLevel::MultiSwitch);
  EXPECT_EQ(nvml::link_level_from_nvml(30), LinkLevel::HostBridge);
  EXPECT_EQ(nvml::link_level_from_nvml(40), LinkLevel::NumaNode);
  EXPECT_EQ(nvml::link_level_from_nvml(50), LinkLevel::CrossSocket);
  EXPECT_EQ(nvml::link_level_from_nvml(35), LinkLevel::Unknown);
  EXPECT_EQ(nvml::link_level_from_nvml(-1), LinkLevel::Unknown);
}

}  // namespace
}  // namespace gf::backends::nvml_test
