// Allocation skips unhealthy GPUs (issue 21): eligibility names the XID, select_gpus goes around them,
// and fleet ranking counts them neither idle nor free.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator/node_rank.hpp"
#include "allocator/select.hpp"
#include "allocator_support.hpp"

namespace gf::allocator {
namespace {

using ::testing::HasSubstr;

core::GpuReading with_xid(core::GpuReading g, unsigned xid) {
  g.last_xid = xid;
  g.recent_xids.push_back({xid, std::chrono::system_clock::time_point{}});
  return g;
}

TEST(UnhealthyGpus, EligibilityNamesTheXidAndKeepsApplicationFaults) {
  auto failed_remap = test::gpu(2);
  failed_remap.remapped_rows_failure = true;
  const auto s =
      test::snapshot_of({with_xid(test::gpu(0), 79), with_xid(test::gpu(1), 13), failed_remap, test::gpu(3)});
  const auto refused = eligibility(s, SelectRequest{});
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].index, 0u);
  EXPECT_EQ(refused[0].reason, "unhealthy: XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(refused[1].index, 2u);
  EXPECT_EQ(refused[1].reason, "unhealthy: row remap failure");
}

TEST(UnhealthyGpus, SelectionGoesAroundThemAndARefusalSaysWhy) {
  const auto s = test::snapshot_of({with_xid(test::gpu(0), 48), test::gpu(1)});
  SelectRequest r;
  r.need.gpus = 1;
  auto chosen = select_gpus(s, core::Topology{}, r);
  ASSERT_TRUE(chosen) << chosen.error().message;
  EXPECT_THAT(chosen->indices, ::testing::ElementsAre(1u));
  r.need.gpus = 2;
  auto refused = select_gpus(s, core::Topology{}, r);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, HasSubstr("unhealthy: XID 48 (double-bit ECC error)"));
}

TEST(UnhealthyGpus, FleetRankingCountsThemNeitherIdleNorFree) {
  core::NodeMetrics m;
  m.node = "a";
  m.source = "agent";
  for (unsigned i = 0; i < 2; ++i) {
    core::FleetGpu g;
    g.node = "a";
    g.index = i;
    g.model = "NVIDIA H100";
    g.utilization_pct = 0;
    g.memory_used_mib = 0;
    g.memory_total_mib = 81920;
    m.gpus.push_back(g);
  }
  m.gpus[1].unhealthy = "GPU 1 had XID 79 (GPU has fallen off the bus): it needs a reset or an operator's attention";
  EXPECT_FALSE(gpu_is_idle(m.gpus[1], IdleThresholds{}));
  EXPECT_TRUE(gpu_is_idle(m.gpus[0], IdleThresholds{}));
  core::FleetFacts f;
  f.metrics = {m};
  RankOptions o;
  o.max_age = std::chrono::milliseconds(0);
  const auto s = summarize(f, o);
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].idle_gpu_count, 1u);
  EXPECT_EQ(s.nodes[0].free_gpus, 1u);
  EXPECT_THAT(s.nodes[0].problems, ::testing::Contains(HasSubstr("GPU 1 is unhealthy: GPU 1 had XID 79")));
}

// With Kubernetes: an unhealthy GPU is not free, whether or not the device plugin already took it out of
// allocatable (never twice), and refusals and the choice say how many GPUs the node lost to health.
TEST(UnhealthyGpus, WithKubernetesFreeLosesThemOnceAndRefusalsSayWhy) {
  core::NodeMetrics m;
  m.node = "k";
  m.source = "prometheus";
  for (unsigned i = 0; i < 8; ++i) {
    core::FleetGpu g;
    g.node = "k";
    g.index = i;
    g.utilization_pct = 0;
    g.memory_used_mib = 0;
    g.memory_total_mib = 81920;
    if (i < 2) g.unhealthy = "XID 79 (GPU has fallen off the bus)";
    m.gpus.push_back(g);
  }
  RankOptions o;
  o.max_age = std::chrono::milliseconds(0);
  for (std::uint64_t allocatable : {8u, 6u}) {  // 6: the device plugin took the two out already
    SCOPED_TRACE(allocatable);
    core::KubeNode k;
    k.name = "k";
    k.gpu_resource = "nvidia.com/gpu";
    k.gpu_capacity = 8;
    k.gpu_allocatable = allocatable;
    k.gpu_requested = 2;
    k.ready = true;
    core::FleetFacts f;
    f.kube = std::vector<core::KubeNode>{k};
    f.metrics = {m};
    const auto s = summarize(f, o);
    ASSERT_EQ(s.nodes.size(), 1u);
    EXPECT_EQ(s.nodes[0].free_gpus, 4u);
    EXPECT_EQ(s.nodes[0].idle_gpu_count, 4u);
    EXPECT_EQ(s.nodes[0].unhealthy.count, 2u);
    const auto refused = select_node(s, 5);
    EXPECT_FALSE(refused.node);
    EXPECT_THAT(refused.reason,
                HasSubstr("k: 4 free GPU(s) < 5 (2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus))"));
    const auto chosen = select_node(s, 2);
    ASSERT_TRUE(chosen.node);
    EXPECT_THAT(chosen.reasoning, ::testing::Contains("  - Unhealthy GPUs: 2 (XID 79 (GPU has fallen off the bus))"));
  }
}

}  // namespace
}  // namespace gf::allocator
