// Placement of MIG leases (allocator/mig_select.hpp): which instance of a profile is handed out, and the
// sentences that say which profile is missing or busy; whole-GPU selection never offers a MIG GPU.
#include "allocator/mig_select.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gf::allocator {
namespace {

using ::testing::HasSubstr;

core::MigInstance instance(std::string uuid, std::string profile, unsigned gi, unsigned index) {
  core::MigInstance m;
  m.uuid = std::move(uuid);
  m.profile = std::move(profile);
  m.gpu_instance_id = gi;
  m.index = index;
  m.memory_total_mib = std::uint64_t{9728};
  m.memory_used_mib = std::uint64_t{13};
  m.memory_free_mib = std::uint64_t{9715};
  return m;
}

core::GpuReading mig_gpu(unsigned index) {
  core::GpuReading g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.mig_enabled = true;
  g.memory_total_mib = std::uint64_t{81920};
  g.memory_used_mib = std::uint64_t{100};
  g.memory_free_mib = std::uint64_t{81820};
  g.utilization_pct = core::Reading<unsigned>::absent(core::Absent::MigEnabled);
  return g;
}

core::Snapshot node() {
  core::Snapshot s;
  auto g0 = mig_gpu(0);
  g0.mig_instances = {instance("MIG-a", "3g.40gb", 2, 0), instance("MIG-b", "1g.10gb", 9, 2),
                      instance("MIG-c", "1g.10gb", 10, 4)};
  core::GpuProcess p;
  p.pid = 5002;
  p.name = "python";
  p.gpu_instance_id = 9u;
  p.compute_instance_id = 0u;
  g0.processes = {p};
  auto g1 = mig_gpu(1);
  g1.mig_instances = {instance("MIG-d", "1g.10gb", 7, 0)};
  core::GpuReading g2;  // MIG off
  g2.index = 2;
  g2.mig_enabled = false;
  g2.memory_free_mib = std::uint64_t{80000};
  g2.utilization_pct = 0u;
  s.gpus = {g0, g1, g2};
  return s;
}

TEST(MigSelect, TheFirstFreeInstanceOfTheProfile) {
  MigRequest r;
  r.need.mig_profile = "1g.10gb";
  auto pick = select_mig_instance(node(), r);
  ASSERT_TRUE(pick) << pick.error().message;
  EXPECT_EQ(pick->gpu_index, 0u);
  EXPECT_EQ(pick->instance.uuid, "MIG-c");  // MIG-b runs pid 5002
  EXPECT_EQ(pick->selection.indices, std::vector<unsigned>{0});
  ASSERT_EQ(pick->selection.why.size(), 1u);
  EXPECT_THAT(pick->selection.why[0], HasSubstr("MIG 1g.10gb instance MIG-c of GPU 0 (GPU instance 10"));

  r.leased_uuids = {"MIG-c"};
  pick = select_mig_instance(node(), r);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->instance.uuid, "MIG-d");  // on to the next GPU
  r.own_pids = {5002};                      // our own process does not make it busy
  pick = select_mig_instance(node(), r);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->instance.uuid, "MIG-b");
  r.own_pids.clear();
  r.need.allow_busy = true;
  pick = select_mig_instance(node(), r);
  ASSERT_TRUE(pick);
  EXPECT_EQ(pick->instance.uuid, "MIG-b");
}

TEST(MigSelect, RefusalsNameTheProfileAndWhyEachInstanceIsTaken) {
  MigRequest r;
  r.need.mig_profile = "1g.10gb";
  r.leased_uuids = {"MIG-c", "MIG-d"};
  auto none = select_mig_instance(node(), r);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, ErrorKind::Unavailable);
  EXPECT_EQ(none.error().message,
            "no free MIG instance of profile 1g.10gb: GPU 0 MIG-b (GI 9): busy: pid 5002 (python); GPU 0 MIG-c (GI "
            "10): leased; GPU 1 MIG-d (GI 7): leased");
  r.need.mig_profile = "2g.20gb";
  auto missing = select_mig_instance(node(), r);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::Unavailable);
  EXPECT_EQ(missing.error().message,
            "no MIG instance of profile 2g.20gb on this node (its MIG instances: 1g.10gb ×3, 3g.40gb)");
  EXPECT_FALSE(has_mig_profile(node(), "2g.20gb"));
  EXPECT_TRUE(has_mig_profile(node(), "3g.40gb"));
}

TEST(MigSelect, ALostGpuOffersNoInstance) {
  auto s = node();
  s.gpus[1].health = core::Health::Lost;
  MigRequest r;
  r.need.mig_profile = "1g.10gb";
  r.leased_uuids = {"MIG-c"};
  auto none = select_mig_instance(s, r);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("GPU 1 MIG-d (GI 7): its GPU is lost"));
}

TEST(MigSelect, ProfilesAreCheckedBeforeUse) {
  EXPECT_TRUE(valid_mig_profile("1g.10gb"));
  EXPECT_TRUE(valid_mig_profile("1c.3g.40gb"));
  EXPECT_TRUE(valid_mig_profile("1g.10gb+me"));
  EXPECT_FALSE(valid_mig_profile(""));
  EXPECT_FALSE(valid_mig_profile("1g.10gb; rm -rf /"));
  EXPECT_FALSE(valid_mig_profile("1G.10GB"));
  EXPECT_FALSE(valid_mig_profile(std::string(33, 'g')));
  MigRequest r;
  r.need.mig_profile = "\x1b[31m";
  auto bad = select_mig_instance(node(), r);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::Invalid);
}

TEST(MigSelect, WholeGpusInMigModeAreNeverOffered) {
  SelectRequest r;
  r.need.gpus = 1;
  r.need.min_free_memory_mib = 0;
  const auto refused = eligibility(node(), r);
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].index, 0u);
  EXPECT_EQ(refused[0].reason, "in MIG mode (lease one of its instances with --mig PROFILE)");
  EXPECT_EQ(refused[1].index, 1u);
  auto sel = select_gpus(node(), core::Topology{}, r);
  ASSERT_TRUE(sel) << sel.error().message;
  EXPECT_EQ(sel->indices, std::vector<unsigned>{2});
  r.need.gpus = 2;
  EXPECT_FALSE(select_gpus(node(), core::Topology{}, r));
}

}  // namespace
}  // namespace gf::allocator
