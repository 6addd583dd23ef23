// UsageLedger over the real SQLite usage store and a scripted lease source.
#include "node/usage_ledger.hpp"

#include <gtest/gtest.h>

#include "store/sqlite.hpp"
#include "store/usage_store.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"

namespace gf::node {
namespace {

using std::chrono::milliseconds;
constexpr std::int64_t kT0 = 1'700'000'000'000;

core::Snapshot reading(std::int64_t at_ms, unsigned util, double power_w) {
  core::Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(milliseconds(at_ms));
  core::GpuReading g;
  g.index = 0;
  g.utilization_pct = util;
  g.power_draw_w = power_w;
  g.memory_used_mib = std::uint64_t{2048};
  s.gpus.push_back(g);
  return s;
}

// The lease table the ledger sees: tests end leases by setting released_at_ms.
struct Leases {
  std::map<std::string, core::Lease> all;
  int finds = 0;  // calls of find()
  LeaseSource source() {
    return {[this]() -> Result<std::vector<core::Lease>> {
              std::vector<core::Lease> out;
              for (const auto& [id, l] : all)
                if (!l.released_at_ms) out.push_back(l);
              return out;
            },
            [this](const std::vector<std::string>& ids) -> Result<std::vector<core::Lease>> {
              ++finds;
              std::vector<core::Lease> out;
              for (const auto& id : ids)
                if (auto it = all.find(id); it != all.end()) out.push_back(it->second);
              return out;
            },
            [this](std::int64_t since_ms) -> Result<std::vector<core::Lease>> {
              std::vector<core::Lease> out;
              for (const auto& [id, l] : all)
                if (l.released_at_ms && *l.released_at_ms >= since_ms) out.push_back(l);
              return out;
            }};
  }
  void take(std::string id, std::int64_t at) {
    core::Lease l;
    l.id = id;
    l.job_id = "job-" + id;
    l.owner.user = "alice";
    l.gpus = {{0, ""}};
    l.created_at_ms = at;
    all[id] = l;
  }
};

std::unique_ptr<core::UsageStore> open_store(const std::string& path) {
  auto s = store::UsageStore::open(path);
  EXPECT_TRUE(s) << s.error().message;
  return s ? std::move(*s) : nullptr;
}

TEST(UsageLedger, AnEndedLeaseGetsAFinalRowWithItsExactHeldTime) {
  test::TempDir dir;
  const auto db = (dir.path() / "gpufleet.db").string();
  test::FakeClock clock;
  Leases leases;
  UsageLedger ledger(open_store(db), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(ledger.load());
  leases.take("L1", kT0);
  for (int i = 0; i <= 3; ++i) ledger.observe(reading(kT0 + i * 1000, 50, 100.0));
  leases.all["L1"].released_at_ms = kT0 + 3500;
  ledger.observe(reading(kT0 + 4000, 50, 100.0));

  auto rows = ledger.rows_of({"L1"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->count("L1"), 1u);
  const auto& r = rows->at("L1");
  EXPECT_EQ(r.released_at_ms, std::optional<std::int64_t>(kT0 + 3500));
  EXPECT_DOUBLE_EQ(r.held_gpu_s, 3.5);
  EXPECT_DOUBLE_EQ(r.busy_gpu_s, 3.5);
  EXPECT_DOUBLE_EQ(r.energy_wh, 100.0 * 3.5 / 3600.0);
  EXPECT_EQ(r.peak_mem_mib, std::optional<std::uint64_t>(2048));
  const auto c = ledger.counters();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].user, "alice");
  EXPECT_DOUBLE_EQ(c[0].held_gpu_s, 3.5);
  EXPECT_DOUBLE_EQ(c[0].energy_j, 350.0);
}

// Found by the shared-node test (issue 12): a 50 ms job's lease starts and ends between two readings,
// so it is in no active list; it is still accounted, with its exact held time, and only once.
TEST(UsageLedger, ALeaseCreatedAndEndedBetweenReadingsIsAccountedOnce) {
  test::TempDir dir;
  const auto db = (dir.path() / "gpufleet.db").string();
  test::FakeClock clock;
  Leases leases;
  UsageLedger ledger(open_store(db), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(ledger.load());
  ledger.observe(reading(kT0, 0, 50.0));
  leases.take("short", kT0 + 200);
  leases.all["short"].released_at_ms = kT0 + 450;
  ledger.observe(reading(kT0 + 1000, 0, 50.0));
  ledger.observe(reading(kT0 + 2000, 0, 50.0));  // the source still returns it: not counted again
  ledger.observe(reading(kT0 + 3000, 0, 50.0));

  auto rows = ledger.rows_of({"short"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->count("short"), 1u);
  EXPECT_DOUBLE_EQ(rows->at("short").held_gpu_s, 0.25);
  auto since = ledger.since(kT0 - 1000);
  ASSERT_TRUE(since);
  ASSERT_EQ(since->size(), 1u);
  EXPECT_DOUBLE_EQ((*since)[0].held_gpu_s, 0.25);
}

TEST(UsageLedger, CountersNeverGoBackWhenALeaseEndsBetweenReadings) {
  test::TempDir dir;
  test::FakeClock clock;
  Leases leases;
  UsageLedger ledger(open_store((dir.path() / "g.db").string()), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(ledger.load());
  leases.take("L1", kT0);
  double last = 0;
  for (int i = 0; i <= 6; ++i) {
    if (i == 4) leases.all["L1"].released_at_ms = kT0 + 3100;
    ledger.observe(reading(kT0 + i * 1000, 50, 100.0));
    const auto c = ledger.counters();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_GE(c[0].held_gpu_s, last) << i;
    last = c[0].held_gpu_s;
  }
  EXPECT_DOUBLE_EQ(last, 3.1);
}

TEST(UsageLedger, AnotherRunOfTheAgentGoesOnFromTheStoredRow) {
  test::TempDir dir;
  const auto db = (dir.path() / "gpufleet.db").string();
  test::FakeClock clock;
  Leases leases;
  leases.take("L1", kT0);
  {
    UsageLedger first(open_store(db), leases.source(), {}, {}, {}, clock);
    ASSERT_TRUE(first.load());
    for (int i = 0; i <= 2; ++i) first.observe(reading(kT0 + i * 1000, 50, 100.0));
    first.flush();
  }
  UsageLedger second(open_store(db), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(second.load());
  second.observe(reading(kT0 + 3000, 50, 100.0));  // the first reading of this run: nothing to integrate
  second.observe(reading(kT0 + 4000, 50, 100.0));
  leases.all["L1"].released_at_ms = kT0 + 4000;
  second.observe(reading(kT0 + 5000, 50, 100.0));
  auto rows = second.rows_of({"L1"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->count("L1"), 1u);
  EXPECT_DOUBLE_EQ(rows->at("L1").held_gpu_s, 4.0);
  EXPECT_DOUBLE_EQ(rows->at("L1").busy_gpu_s, 3.0);  // 2 s before, 1 s after; the restart is not counted
}

TEST(UsageLedger, IdleLeaseIsWarnedThenReleasedAndAudited) {
  test::TempDir dir;
  const auto db = (dir.path() / "gpufleet.db").string();
  test::FakeClock clock;
  Leases leases;
  std::vector<std::string> warned, released;
  LedgerOptions o;
  o.reclaim.enabled = true;
  o.reclaim.idle_for = milliseconds(2000);
  o.reclaim.grace = milliseconds(1000);
  UsageLedger ledger(
      open_store(db), leases.source(), [&](const std::string& id, const std::string&) { warned.push_back(id); },
      [&](const std::string& id, const std::string& reason) {
        released.push_back(id + ": " + reason);
        leases.all[id].released_at_ms = kT0 + 3000;
      },
      o, clock);
  ASSERT_TRUE(ledger.load());
  leases.take("L1", kT0);
  for (int i = 0; i <= 2; ++i) ledger.observe(reading(kT0 + i * 1000, 0, 50.0));
  EXPECT_EQ(warned, std::vector<std::string>{"L1"});
  EXPECT_TRUE(released.empty());
  ledger.observe(reading(kT0 + 3000, 0, 50.0));
  EXPECT_EQ(released, std::vector<std::string>{"L1: idle: reclaimed"});
  ledger.observe(reading(kT0 + 4000, 0, 50.0));
  auto rows = ledger.rows_of({"L1"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->count("L1"), 1u);
  EXPECT_DOUBLE_EQ(rows->at("L1").held_gpu_s, 3.0);
  EXPECT_DOUBLE_EQ(rows->at("L1").busy_gpu_s, 0.0);

  auto raw = store::Db::open(db);
  ASSERT_TRUE(raw);
  auto st = raw->prepare("SELECT action, lease_id, at_ms FROM reclaim_audit ORDER BY id");
  ASSERT_TRUE(st);
  std::vector<std::string> audit;
  while (true) {
    auto has = st->step();
    ASSERT_TRUE(has);
    if (!*has) break;
    audit.push_back(st->text(0) + " " + st->text(1) + " " + std::to_string(st->int64(2) - kT0));
  }
  EXPECT_EQ(audit, (std::vector<std::string>{"warn L1 2000", "release L1 3000"}));
}

TEST(UsageLedger, LeasesEndingTogetherAreLookedUpOnceAndAForgottenOneEndsAtTheReading) {
  test::TempDir dir;
  test::FakeClock clock;
  Leases leases;
  UsageLedger ledger(open_store((dir.path() / "g.db").string()), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(ledger.load());
  for (int i = 0; i < 20; ++i) leases.take("L" + std::to_string(i), kT0);
  ledger.observe(reading(kT0, 50, 100.0));
  ledger.observe(reading(kT0 + 1000, 50, 100.0));
  for (int i = 0; i < 19; ++i) leases.all["L" + std::to_string(i)].released_at_ms = kT0 + 1500;
  leases.all.erase("L19");  // the source forgot it (pruned)
  ledger.observe(reading(kT0 + 2000, 50, 100.0));
  EXPECT_EQ(leases.finds, 1);
  auto rows = ledger.rows_of({"L0", "L19"});
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_DOUBLE_EQ(rows->at("L0").held_gpu_s, 1.5);
  EXPECT_DOUBLE_EQ(rows->at("L19").held_gpu_s, 2.0);
  EXPECT_EQ(rows->at("L19").released_at_ms, std::optional<std::int64_t>(kT0 + 2000));
}

TEST(UsageLedger, UsageSinceMergesRunningAndStoredRows) {
  test::TempDir dir;
  test::FakeClock clock;
  Leases leases;
  UsageLedger ledger(open_store((dir.path() / "g.db").string()), leases.source(), {}, {}, {}, clock);
  ASSERT_TRUE(ledger.load());
  leases.take("A", kT0);
  leases.take("B", kT0);
  ledger.observe(reading(kT0, 50, 100.0));
  ledger.observe(reading(kT0 + 1000, 50, 100.0));
  leases.all["A"].released_at_ms = kT0 + 1500;
  ledger.observe(reading(kT0 + 2000, 50, 100.0));
  auto rows = ledger.since(kT0);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].released_at_ms);   // A: final, from the store
  EXPECT_FALSE((*rows)[1].released_at_ms);  // B: running
  EXPECT_DOUBLE_EQ((*rows)[1].held_gpu_s, 2.0);
  auto later = ledger.since(kT0 + 1600);
  ASSERT_TRUE(later);
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].lease_id, "B");
}

}  // namespace
}  // namespace gf::node
