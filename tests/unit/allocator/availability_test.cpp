// check_availability(): the one availability check (GET /api/v1/availability and the Python client's
// get_available_gpus): which GPUs qualify, why the others do not, and what would be chosen.
#include "allocator/availability.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "allocator_support.hpp"

namespace gf::allocator {
namespace {

using test::gpu;
using test::snapshot_of;

std::vector<unsigned> qualifying(const Availability& a) {
  std::vector<unsigned> out;
  for (const auto& g : a.gpus)
    if (g.qualifies) out.push_back(g.gpu->index);
  return out;
}

std::string reason_of(const Availability& a, unsigned index) {
  for (const auto& g : a.gpus)
    if (g.gpu->index == index) return g.reason;
  return "no such GPU";
}

TEST(Availability, FloorAndCeilingAreInclusiveAndLostGpusNeverQualify) {
  auto s = snapshot_of({gpu(0, 10000, 10),  // below the floor
                        gpu(1, 20000, 50),  // exactly the floor, exactly the ceiling: qualifies
                        gpu(2, 70000, 51),  // one point too busy
                        gpu(3, 80000, 0), gpu(4, 80000, 0), gpu(5, 80000, 0)});
  s.gpus[5].health = core::Health::Lost;
  SelectRequest r;
  r.need.min_free_memory_mib = 20000;
  r.need.max_utilization_pct = 50;
  const auto a = check_availability(s, core::Topology{}, r);
  EXPECT_EQ(qualifying(a), (std::vector<unsigned>{1, 3, 4}));
  EXPECT_EQ(a.qualifying, 3u);
  EXPECT_TRUE(a.available);
  EXPECT_EQ(reason_of(a, 0), "10000 MiB free < 20000 MiB floor");
  EXPECT_EQ(reason_of(a, 2), "utilization 51 % > 50 %");
  EXPECT_EQ(reason_of(a, 5), "lost: GPU is lost");
  EXPECT_EQ(reason_of(a, 1), "");
}

TEST(Availability, OneGpuIsTheBestScoreAndTiesGoToTheLowerIndex) {
  auto s = snapshot_of({gpu(0, 20000, 50), gpu(1, 80000, 0), gpu(2, 80000, 0), gpu(3, 40000, 0)});
  SelectRequest r;
  r.need.min_free_memory_mib = 20000;
  const auto a = check_availability(s, core::Topology{}, r);
  ASSERT_TRUE(a.would_choose);
  EXPECT_EQ(a.would_choose->indices, (std::vector<unsigned>{1}));  // 1 and 2 tie on the best score
}

TEST(Availability, TheDefaultFloorRefusesAFullGpuAndCountsMustBeMet) {
  // The defaults (8000 MiB, 50 %): a busy GPU, a full one and a lost one leave one that qualifies.
  auto s = snapshot_of({gpu(0, 80000, 90), gpu(1, 80000, 10), gpu(2, 1000, 0), gpu(3, 80000, 0)});
  s.gpus[3].health = core::Health::Lost;
  SelectRequest r;
  r.need.gpus = 2;
  const auto a = check_availability(s, core::Topology{}, r);
  EXPECT_EQ(qualifying(a), (std::vector<unsigned>{1}));
  EXPECT_FALSE(a.available);
  EXPECT_FALSE(a.would_choose);
  r.need.gpus = 1;
  const auto one = check_availability(s, core::Topology{}, r);
  EXPECT_TRUE(one.available);
  ASSERT_TRUE(one.would_choose);
  EXPECT_EQ(one.would_choose->indices, (std::vector<unsigned>{1}));
}

TEST(Availability, LeasedGpusDoNotQualify) {
  auto s = test::idle_gpus(3);
  SelectRequest r;
  r.leased = {1};
  const auto a = check_availability(s, core::Topology{}, r);
  EXPECT_EQ(qualifying(a), (std::vector<unsigned>{0, 2}));
  EXPECT_EQ(reason_of(a, 1), "leased");
}

}  // namespace
}  // namespace gf::allocator
