// The agent's arbiter and unhealthy GPUs (issue 21): a lease never lands on a GPU with a critical XID,
// and a request only such a GPU could meet is refused saying so.
#include <gtest/gtest.h>

#include "node/arbiter.hpp"
#include "store/node_store.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;

struct HealthSink final : ConnectionSink {
  std::vector<std::vector<unsigned>> granted_gpus;
  std::vector<Error> refusals;
  void granted(std::int64_t, const scheduler::Allocation& a) override {
    std::vector<unsigned> gpus;
    for (const auto& g : a.lease.gpus) gpus.push_back(g.index);
    granted_gpus.push_back(std::move(gpus));
  }
  void refused(std::int64_t, const Error& e) override { refusals.push_back(e); }
  void waiting(std::int64_t, const WaitingEvent&) override {}
  void lease_ended(const std::string&, const std::string&) override {}
  void lease_warning(const std::string&, const std::string&) override {}
};

const Peer kCarol{1003, 1003, 4003, "carol", false};

TEST(ArbiterHealth, LeasesGoAroundAnUnhealthyGpuAndARefusalNamesTheXid) {
  test::TempDir dir;
  test::FakeClock clock;
  auto s = std::make_shared<core::Snapshot>();
  for (unsigned i = 0; i < 2; ++i) s->gpus.push_back(test::make_gpu(i, 0, 1000));
  s->gpus[0].last_xid = 79u;
  s->gpus[0].recent_xids = {{79, {}}};
  s->backend = "scripted";
  core::SnapshotPtr snap = s;
  auto st =
      store::NodeStore::open((dir.path() / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
  ASSERT_TRUE(st) << st.error().message;
  ReadingSource rs;
  rs.latest = [&] { return std::pair{snap, clock.now()}; };
  Arbiter arb(std::move(*st), std::move(rs), ArbiterOptions{}, clock);

  auto sink = std::make_shared<HealthSink>();
  auto c = arb.connect(kCarol, sink);
  AcquireRequest one;
  one.need.gpus = 1;
  one.need.min_free_memory_mib = 1000;
  auto got = arb.acquire(c, 1, one);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(*got) << "granted now";
  ASSERT_EQ((*got)->lease.gpus.size(), 1u);
  EXPECT_EQ((*got)->lease.gpus[0].index, 1u);  // GPU 0 had XID 79

  auto second = arb.acquire(c, 2, one);  // GPU 1 is leased now; GPU 0 is unhealthy
  std::string why;
  if (!second)
    why = second.error().message;
  else if (!sink->refusals.empty())
    why = sink->refusals.back().message;
  EXPECT_NE(why.find("unhealthy: XID 79"), std::string::npos) << why;
}

}  // namespace
}  // namespace gf::node
