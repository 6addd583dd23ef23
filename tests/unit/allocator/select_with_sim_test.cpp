// The allocator fed by a real backend: the sim's built-in demo (GPUs 0-1 and 2-3 NVLink pairs), read
// through Backend::snapshot() and Backend::topology() as the scheduler will.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator/select.hpp"
#include "backends/sim/sim_backend.hpp"
#include "support/fake_clock.hpp"

namespace gf::allocator {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::StartsWith;

struct SimDemo : ::testing::Test {
  void SetUp() override {
    backends::BackendOptions o;
    o.clock = &clock;
    auto b = backends::open_sim(o);
    ASSERT_TRUE(b) << b.error().message;
    auto s = (*b)->snapshot();
    ASSERT_TRUE(s) << s.error().message;
    auto t = (*b)->topology();
    ASSERT_TRUE(t) << t.error().message;
    snap = std::move(*s);
    topo = std::move(*t);
  }
  gf::test::FakeClock clock;  // t = 0: GPU 0 is training (92 %), GPU 3 serves (45 %), 1 and 2 idle
  core::Snapshot snap;
  core::Topology topo;
};

TEST_F(SimDemo, BusyGpusAreRefusedByTheirProcesses) {
  SelectRequest r;
  r.need.gpus = 2;
  auto sel = select_gpus(snap, topo, r);
  ASSERT_TRUE(sel) << sel.error().message;
  EXPECT_THAT(sel->indices, ElementsAre(1u, 2u));
  EXPECT_THAT(sel->refused,
              ElementsAre(Field(&Refusal::reason, "utilization 92 % > 50 %; busy: pid 31337 (python3, alice)"),
                          Field(&Refusal::reason, "busy: pid 31400 (vllm, bob)")));
}

TEST_F(SimDemo, PairsDecideOnceTheBusyRuleIsOff) {
  SelectRequest r;
  r.need.allow_busy = true;  // GPU 3 (45 %) becomes eligible; GPU 0 stays over the ceiling
  r.need.gpus = 2;
  auto two = select_gpus(snap, topo, r);
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_THAT(two->indices, ElementsAre(2u, 3u));
  EXPECT_THAT(two->method, StartsWith("topology: NVLink pair"));

  r.need.gpus = 1;  // GPU 1's partner is busy, so taking 1 splits nothing usable
  auto one = select_gpus(snap, topo, r);
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_THAT(one->indices, ElementsAre(1u));
}

}  // namespace
}  // namespace gf::allocator
