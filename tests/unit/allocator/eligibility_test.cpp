// eligibility(): every reason a GPU is not offered, in the words the user reads, and the limits
// that are inclusive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator/select.hpp"
#include "allocator_support.hpp"

namespace gf::allocator {
namespace {

using test::gpu;
using test::snapshot_of;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

MATCHER_P2(RefusedFor, index, reason, "") { return arg.index == static_cast<unsigned>(index) && arg.reason == reason; }

core::GpuProcess process(std::uint32_t pid, std::string name = {}, std::string user = {}) {
  core::GpuProcess p;
  p.pid = pid;
  p.name = std::move(name);
  p.user = std::move(user);
  return p;
}

TEST(Eligibility, HealthyIdleGpusAreAllEligible) {
  EXPECT_THAT(eligibility(test::idle_gpus(4), SelectRequest{}), IsEmpty());
}

TEST(Eligibility, LostAndFailingGpusSayWhat) {
  auto lost = gpu(0);
  lost.health = core::Health::Lost;
  lost.health_message = "GPU is lost";
  auto failing = gpu(1);
  failing.health = core::Health::Error;
  failing.health_message = "cannot get a handle for the GPU: Unknown Error (NVML error 999)";
  auto silent = gpu(2);
  silent.health = core::Health::Lost;  // no message: a generic one
  EXPECT_THAT(eligibility(snapshot_of({lost, failing, silent, gpu(3)}), SelectRequest{}),
              ElementsAre(RefusedFor(0, "lost: GPU is lost"),
                          RefusedFor(1, "error: cannot get a handle for the GPU: Unknown Error (NVML error 999)"),
                          RefusedFor(2, "lost: GPU is lost")));
}

TEST(Eligibility, LeasedGpusAreRefusedForThatAlone) {
  SelectRequest r;
  r.leased = {1, 7};  // 7 is not in the snapshot: ignored
  auto leased_and_full = gpu(1, 100, 99);
  leased_and_full.processes.push_back(process(999, "python3", "alice"));
  EXPECT_THAT(eligibility(snapshot_of({gpu(0), leased_and_full, gpu(2)}), r), ElementsAre(RefusedFor(1, "leased")));
}

TEST(Eligibility, MemoryFloorIsInclusive) {
  SelectRequest r;  // 8000 MiB floor
  EXPECT_THAT(
      eligibility(snapshot_of({gpu(0, 2048), gpu(1, 8000), gpu(2, 7999)}), r),
      ElementsAre(RefusedFor(0, "2048 MiB free < 8000 MiB floor"), RefusedFor(2, "7999 MiB free < 8000 MiB floor")));
}

TEST(Eligibility, UtilizationCeilingIsInclusive) {
  SelectRequest r;  // 50 % ceiling
  EXPECT_THAT(eligibility(snapshot_of({gpu(0, 80000, 73), gpu(1, 80000, 50), gpu(2, 80000, 51)}), r),
              ElementsAre(RefusedFor(0, "utilization 73 % > 50 %"), RefusedFor(2, "utilization 51 % > 50 %")));
}

TEST(Eligibility, ForeignProcessesMakeAGpuBusyOursDoNot) {
  auto g0 = gpu(0);
  g0.processes.push_back(process(4242, "python3", "alice"));
  auto g1 = gpu(1);
  g1.processes.push_back(process(5000, "trainer", "svc"));  // ours
  auto g2 = gpu(2);
  g2.processes.push_back(process(77));             // not resolvable from /proc
  g2.processes.push_back(process(78, "", "bob"));  // user only
  g2.processes.push_back(process(79, "Xorg"));     // name only
  g2.processes.push_back(process(80));
  g2.processes.push_back(process(81));
  SelectRequest r;
  r.own_pids = {5000};
  EXPECT_THAT(eligibility(snapshot_of({g0, g1, g2}), r),
              ElementsAre(RefusedFor(0, "busy: pid 4242 (python3, alice)"),
                          RefusedFor(2, "busy: pid 77, pid 78 (bob), pid 79 (Xorg) and 2 more")));

  r.need.allow_busy = true;
  EXPECT_THAT(eligibility(snapshot_of({g0, g1, g2}), r), IsEmpty());
}

TEST(Eligibility, SeveralReasonsAreAllGiven) {
  auto g = gpu(3, 2048, 73);
  g.processes.push_back(process(4242, "python3", "alice"));
  EXPECT_THAT(eligibility(snapshot_of({g}), SelectRequest{}),
              ElementsAre(RefusedFor(3,
                                     "2048 MiB free < 8000 MiB floor; utilization 73 % > 50 %; "
                                     "busy: pid 4242 (python3, alice)")));
}

TEST(Eligibility, UnknownReadingsRefuseOnlyWhenTheirLimitConstrains) {
  auto g = gpu(0);
  g.memory_free_mib = core::Reading<std::uint64_t>::absent(core::Absent::NotSupported);
  g.utilization_pct = core::Reading<unsigned>::absent(core::Absent::NoPermission);
  EXPECT_THAT(eligibility(snapshot_of({g}), SelectRequest{}),
              ElementsAre(RefusedFor(0, "free memory unknown; utilization unknown")));
  SelectRequest unconstrained;
  unconstrained.need.min_free_memory_mib = 0;
  unconstrained.need.max_utilization_pct = 100;
  EXPECT_THAT(eligibility(snapshot_of({g}), unconstrained), IsEmpty());
}

TEST(Eligibility, RefusalsComeInIndexOrder) {
  EXPECT_THAT(
      eligibility(snapshot_of({gpu(5, 10), gpu(2, 10), gpu(4)}), SelectRequest{}),
      ElementsAre(RefusedFor(2, "10 MiB free < 8000 MiB floor"), RefusedFor(5, "10 MiB free < 8000 MiB floor")));
}

}  // namespace
}  // namespace gf::allocator
