// MIG leases through the node allocator and the SQLite store: an instance is leased by its MIG UUID,
// never to two holders at once, however many threads (each with its own store connection, as separate
// processes have) race for it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"
#include "support/temp_dir.hpp"

namespace gf::scheduler {
namespace {

namespace fs = std::filesystem;

core::Snapshot mig_node(unsigned instances) {
  core::Snapshot s;
  core::GpuReading g;
  g.index = 0;
  g.uuid = "GPU-mig";
  g.mig_enabled = true;
  g.memory_total_mib = std::uint64_t{81920};
  g.memory_free_mib = std::uint64_t{80000};
  for (unsigned i = 0; i < instances; ++i) {
    core::MigInstance m;
    m.uuid = "MIG-" + std::to_string(i);
    m.profile = "1g.10gb";
    m.index = i;
    m.gpu_instance_id = 7 + i;
    g.mig_instances.push_back(m);
  }
  core::GpuReading plain;
  plain.index = 1;
  plain.uuid = "GPU-plain";
  plain.mig_enabled = false;
  plain.memory_total_mib = std::uint64_t{81920};
  plain.memory_free_mib = std::uint64_t{80000};
  plain.utilization_pct = 0u;
  s.gpus = {g, plain};
  return s;
}

struct MigLeaseTest : ::testing::Test {
  test::TempDir tmp;
  fs::path dir = tmp / "node";  // made by the store itself
  std::unique_ptr<store::NodeStore> store() {
    auto s = store::NodeStore::open((dir / "gf.db").string(), [](const core::LeaseOwner&) { return true; });
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? std::move(*s) : nullptr;
  }
  static core::SnapshotPtr reading(unsigned instances) {
    return std::make_shared<const core::Snapshot>(mig_node(instances));
  }
  static AllocationRequest mig(std::string job) {
    AllocationRequest r;
    r.need.mig_profile = "1g.10gb";
    r.need.min_free_memory_mib = 0;
    r.job_id = job;
    r.name = job;
    r.owner = {42, 1, "alice"};
    return r;
  }
};

TEST_F(MigLeaseTest, ALeaseHoldsOneInstanceByItsUuid) {
  auto st = store();
  ASSERT_TRUE(st);
  NodeAllocator a(*st, core::Topology{});
  const auto two = reading(2);
  auto first = a.allocate(mig("one"), two);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_EQ(first->lease.gpus.size(), 1u);
  EXPECT_EQ(first->lease.gpus[0].index, 0u);
  EXPECT_EQ(first->lease.gpus[0].uuid, "MIG-0");
  auto second = a.allocate(mig("two"), two);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->lease.gpus[0].uuid, "MIG-1");
  auto third = a.allocate(mig("three"), two);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().kind, ErrorKind::Unavailable);
  EXPECT_EQ(third.error().message,
            "no free MIG instance of profile 1g.10gb: GPU 0 MIG-0 (GI 7): leased; GPU 0 MIG-1 (GI 8): leased");
  // The store keeps the instance's UUID: after a reopen, it is still taken.
  auto again = store();
  NodeAllocator b(*again, core::Topology{});
  EXPECT_FALSE(b.allocate(mig("four"), two));
  ASSERT_TRUE(*st->release(first->lease.id, "done"));
  auto fifth = b.allocate(mig("five"), two);
  ASSERT_TRUE(fifth) << fifth.error().message;
  EXPECT_EQ(fifth->lease.gpus[0].uuid, "MIG-0");
  // A whole GPU never comes from the MIG GPU, and the plain GPU stays leasable.
  auto whole = b.allocate(
      [] {
        AllocationRequest r;
        r.need.gpus = 1;
        r.need.min_free_memory_mib = 0;
        r.job_id = r.name = "whole";
        r.owner = {42, 1, "alice"};
        return r;
      }(),
      two);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->lease.gpus[0].index, 1u);
}

TEST_F(MigLeaseTest, RacingThreadsNeverShareAnInstance) {
  constexpr unsigned kInstances = 3;
  constexpr int kThreads = 8;
  { auto init = store(); }  // create the schema once
  std::atomic<int> go{0};
  std::vector<std::string> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto st = store();
      if (!st) return;
      NodeAllocator a(*st, core::Topology{});
      ++go;
      while (go.load() < kThreads) std::this_thread::yield();
      auto r = a.allocate(mig("t" + std::to_string(t)), reading(kInstances));
      if (r) got[t] = r->lease.gpus.at(0).uuid;
    });
  for (auto& th : threads) th.join();
  std::multiset<std::string> leased;
  for (const auto& u : got)
    if (!u.empty()) leased.insert(u);
  EXPECT_EQ(leased.size(), kInstances);  // every instance once, the rest refused
  EXPECT_EQ(std::set<std::string>(leased.begin(), leased.end()).size(), kInstances) << "an instance leased twice";
}

}  // namespace
}  // namespace gf::scheduler
