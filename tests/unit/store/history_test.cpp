#include "store/history.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "store/sqlite.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using TimePoint = std::chrono::system_clock::time_point;

constexpr std::int64_t kH0 = 1'700'000'000'000 / 3'600'000 * 3'600'000;  // an hour boundary (ms)

TimePoint at(std::int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

struct Gpu {
  unsigned index = 0;
  std::optional<unsigned> util;
  std::optional<double> power;
  std::optional<unsigned> fan;
};

core::SnapshotPtr snap(std::int64_t ts_ms, const std::vector<Gpu>& gpus) {
  auto s = std::make_shared<core::Snapshot>();
  s->timestamp = at(ts_ms);
  for (const auto& g : gpus) {
    core::GpuReading r;
    r.index = g.index;
    r.uuid = "GPU-" + std::to_string(g.index);
    r.memory_total_mib = std::uint64_t{81920};
    r.memory_used_mib = std::uint64_t{1024};
    r.temperature_c = 40;
    if (g.util) r.utilization_pct = *g.util;
    if (g.power) r.power_draw_w = *g.power;
    r.fan_pct = g.fan ? core::Reading<unsigned>(*g.fan) : core::Reading<unsigned>::absent(core::Absent::NotSupported);
    s->gpus.push_back(std::move(r));
  }
  return s;
}

struct HistoryTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp / "d";  // made by the code under test
  std::string file() const { return (dir / "history.db").string(); }
  std::unique_ptr<HistoryStore> open(HistoryOptions o = {}) {
    auto s = HistoryStore::open(file(), o);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? std::move(*s) : nullptr;
  }
  // The rows of a query on the file, each column as an integer (NULL stays nullopt).
  std::vector<std::vector<std::optional<std::int64_t>>> rows(const std::string& sql, int cols) {
    std::vector<std::vector<std::optional<std::int64_t>>> out;
    auto db = Db::open(file());
    EXPECT_TRUE(db);
    if (!db) return out;
    auto st = db->prepare(sql);
    EXPECT_TRUE(st) << sql << ": " << db->error();
    if (!st) return out;
    for (;;) {
      auto r = st->step();
      EXPECT_TRUE(r);
      if (!r || !*r) break;
      std::vector<std::optional<std::int64_t>> row;
      for (int c = 0; c < cols; ++c) row.push_back(st->opt_int64(c));
      out.push_back(std::move(row));
    }
    return out;
  }
  std::int64_t count(const std::string& table) {
    auto r = rows("SELECT COUNT(*) FROM " + table, 1);
    return r.empty() ? -1 : r[0][0].value_or(-1);
  }
  std::string dump(const std::string& table) {
    std::string out;
    for (const auto& r :
         rows("SELECT ts_ms, gpu, n, util_n, util_min, util_max, CAST(ROUND(util_avg * 1000) AS INTEGER),"
              " power_n, CAST(ROUND(power_avg * 1000) AS INTEGER), fan_n, fan_avg FROM " +
                  table + " ORDER BY gpu, ts_ms",
              11)) {
      for (const auto& v : r) out += v ? std::to_string(*v) + "," : "NULL,";
      out += "\n";
    }
    return out;
  }
};

TEST_F(HistoryTest, ParseMetric) {
  EXPECT_EQ(*parse_metric("utilization"), Metric::Utilization);
  EXPECT_EQ(*parse_metric("memory_utilization"), Metric::MemoryUtilization);
  EXPECT_EQ(*parse_metric("mem_clock"), Metric::MemClock);
  EXPECT_EQ(to_string(Metric::SmClock), "sm_clock");
  EXPECT_FALSE(parse_metric("util"));
  EXPECT_FALSE(parse_metric(""));
}

TEST_F(HistoryTest, UnknownMetricErrorListsTheNames) {
  auto r = parse_metric("gpu_temp");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "unknown metric 'gpu_temp' (expected one of utilization, memory_utilization, memory_used, temperature, "
            "power, fan, sm_clock, mem_clock, graphics_active, sm_active, sm_occupancy, tensor_active, dram_active, "
            "fp64_active, fp32_active, fp16_active, pcie_tx_bytes, pcie_rx_bytes, nvlink_tx_bytes, nvlink_rx_bytes)");
  EXPECT_EQ(*parse_metric("power"), core::Field::PowerDraw);
}

TEST_F(HistoryTest, FieldsTheHistoryDoesNotKeepAreAnErrorNotAnEmptySeries) {
  auto s = open();
  ASSERT_TRUE(s);
  auto q = s->query(0, core::Field::Energy, at(kH0), at(kH0 + 60'000), 0s);
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("energy_consumption_mj"), std::string::npos) << q.error().message;
}

TEST_F(HistoryTest, EachFieldLandsInItsOwnColumnThroughTheRollups) {
  // Memory used (1024) and total (81920) sit next to each other on disk: a column-order slip would swap them.
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->append(*snap(kH0 + 1'000, {{0, 50u, 100.5, 30u}})));
  auto check = [&](const std::string& sql, const char* table) {
    auto r = rows(sql, 5);
    ASSERT_EQ(r.size(), 1u) << table;
    EXPECT_EQ(r[0][0], 1024) << table;
    EXPECT_EQ(r[0][1], 81920) << table;
    EXPECT_EQ(r[0][2], 50) << table;
    EXPECT_EQ(r[0][3], 30) << table;
    EXPECT_EQ(r[0][4], 1005) << table;
  };
  check("SELECT mem_used, mem_total, util, fan, CAST(power * 10 AS INTEGER) FROM samples_raw", "samples_raw");
  ASSERT_TRUE(s->maintain(at(kH0 + 2 * 3'600'000)));
  for (const char* table : {"samples_1m", "samples_1h"})
    check(std::string("SELECT mem_used_max, mem_total_max, util_max, fan_max, CAST(power_max * 10 AS INTEGER) FROM ") +
              table,
          table);
}

TEST_F(HistoryTest, NullsStayNullThroughRawAndRollups) {
  auto s = open();
  ASSERT_TRUE(s);
  // No fan, no power on any sample; util on one of two.
  ASSERT_TRUE(s->append(*snap(kH0 + 1'000, {{0, 50u, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->append(*snap(kH0 + 2'000, {{0, std::nullopt, std::nullopt, std::nullopt}})));
  auto raw = rows("SELECT util, fan, power FROM samples_raw ORDER BY ts_ms", 3);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0][0], 50);
  EXPECT_EQ(raw[1][0], std::nullopt);
  EXPECT_EQ(raw[0][1], std::nullopt);
  EXPECT_EQ(raw[0][2], std::nullopt);

  ASSERT_TRUE(s->maintain(at(kH0 + 2 * 3'600'000)));
  for (const char* table : {"samples_1m", "samples_1h"}) {
    auto r =
        rows(std::string("SELECT n, util_n, util_min, fan_n, fan_min, fan_max, fan_avg, power_avg FROM ") + table, 8);
    ASSERT_EQ(r.size(), 1u) << table;
    EXPECT_EQ(r[0][0], 2) << table;
    EXPECT_EQ(r[0][1], 1) << table;
    EXPECT_EQ(r[0][2], 50) << table;
    EXPECT_EQ(r[0][3], 0) << table;
    for (int c = 4; c < 8; ++c) EXPECT_EQ(r[0][c], std::nullopt) << table << " column " << c;
  }
  auto fan = s->query(0, Metric::Fan, at(kH0), at(kH0 + 3'600'000), 0s);
  ASSERT_TRUE(fan) << fan.error().message;
  ASSERT_EQ(fan->size(), 1u);
  EXPECT_EQ((*fan)[0].samples, 0u);
  EXPECT_FALSE((*fan)[0].avg);
  EXPECT_FALSE((*fan)[0].min);
  EXPECT_FALSE((*fan)[0].max);
}

TEST_F(HistoryTest, RollupMath) {
  auto s = open();
  ASSERT_TRUE(s);
  // Minute 0: util 10, 20, absent, 60; power 100.5, 200.5. Minute 1: util 90. GPU 1 gets its own rows.
  ASSERT_TRUE(s->append(*snap(kH0 + 0, {{0, 10u, 100.5, 30u}, {1, 99u, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->append(*snap(kH0 + 10'000, {{0, 20u, 200.5, std::nullopt}})));
  ASSERT_TRUE(s->append(*snap(kH0 + 20'000, {{0, std::nullopt, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->append(*snap(kH0 + 59'999, {{0, 60u, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->append(*snap(kH0 + 60'000, {{0, 90u, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->maintain(at(kH0 + 3'600'000 + 1)));
  EXPECT_EQ(dump("samples_1m"),
            std::to_string(kH0) + ",0,4,3,10,60,30000,2,150500,1,30,\n" +               //
                std::to_string(kH0 + 60'000) + ",0,1,1,90,90,90000,0,NULL,0,NULL,\n" +  //
                std::to_string(kH0) + ",1,1,1,99,99,99000,0,NULL,0,NULL,\n");
  // The hour's average weighs each minute by its count: (10+20+60+90)/4 = 45, not (30+90)/2.
  EXPECT_EQ(dump("samples_1h"), std::to_string(kH0) + ",0,5,4,10,90,45000,2,150500,1,30,\n" +  //
                                    std::to_string(kH0) + ",1,1,1,99,99,99000,0,NULL,0,NULL,\n");
}

TEST_F(HistoryTest, MaintainTwiceGivesTheSameResult) {
  auto s = open();
  ASSERT_TRUE(s);
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(
        s->append(*snap(kH0 + i * 37'000, {{0, unsigned(i % 100), i * 1.5, std::nullopt}, {1, 7u, std::nullopt, 1u}})));
  const auto now = at(kH0 + 200 * 37'000 + 5'000);
  ASSERT_TRUE(s->maintain(now));
  const auto m1 = dump("samples_1m"), h1 = dump("samples_1h");
  ASSERT_FALSE(m1.empty());
  ASSERT_FALSE(h1.empty());
  ASSERT_TRUE(s->maintain(now));
  ASSERT_TRUE(s->maintain(now + 10s));
  EXPECT_EQ(dump("samples_1m"), m1);
  EXPECT_EQ(dump("samples_1h"), h1);
  // Even with the watermarks lost, buckets are recomputed from their source, never added to.
  auto db = Db::open(file());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("UPDATE history_tiers SET rolled_ms = 0"));
  ASSERT_TRUE(s->maintain(now));
  EXPECT_EQ(dump("samples_1m"), m1);
  EXPECT_EQ(dump("samples_1h"), h1);
}

TEST_F(HistoryTest, RetentionDeletesOldRowsFromEachTier) {
  HistoryOptions o;
  o.raw_retention = 1h;
  o.minute_retention = 24h * 7;
  o.hour_retention = 24h * 90;
  auto s = open(o);
  ASSERT_TRUE(s);
  const std::int64_t now = kH0 + 30 * 60'000;
  constexpr std::int64_t day = 24 * 3'600'000LL;
  constexpr std::int64_t hour = 3'600'000LL;
  for (std::int64_t age : std::vector<std::int64_t>{100 * day, 10 * day, 2 * day, 2 * hour, 30 * 60'000LL - 1})
    ASSERT_TRUE(s->append(*snap(now - age, {{0, 1u, std::nullopt, std::nullopt}})));
  ASSERT_TRUE(s->maintain(at(now)));
  // raw: only the sample younger than an hour (kH0 + 1 ms).
  EXPECT_EQ(rows("SELECT ts_ms FROM samples_raw", 1), (decltype(rows("", 1))){{kH0 + 1}});
  // 1m: younger than 7 days: 2 days, 2 hours, and kH0's minute (complete: now is 30 minutes on).
  EXPECT_EQ(count("samples_1m"), 3);
  EXPECT_EQ(rows("SELECT MIN(ts_ms) FROM samples_1m", 1)[0][0], (now - 2 * day) / 60'000 * 60'000);
  // 1h: younger than 90 days and complete: 10 days, 2 days, 2 hours; kH0's hour is not complete yet.
  EXPECT_EQ(count("samples_1h"), 3);
  EXPECT_EQ(rows("SELECT MAX(ts_ms) FROM samples_1h", 1)[0][0],
            kH0 - 2 * hour);  // the sample 2 hours before now, at kH0 - 90 min
  EXPECT_EQ(rows("SELECT COUNT(*) FROM samples_1h WHERE ts_ms < " + std::to_string(now - 90 * day), 1)[0][0], 0);
}

TEST_F(HistoryTest, QueryPicksTheFinestTierThatCoversSinceAndBucketsByStep) {
  HistoryOptions o;
  o.raw_retention = 1h;
  o.minute_retention = 2h;
  o.hour_retention = 24h;
  auto s = open(o);
  ASSERT_TRUE(s);
  // Three hours of samples every 10 s; util cycles 0..50 within each minute (min 0, max 50, avg 25).
  const std::int64_t now = kH0 + 3 * 3'600'000;
  std::vector<core::SnapshotPtr> batch;
  for (std::int64_t t = kH0; t < now; t += 10'000)
    batch.push_back(snap(t, {{0, unsigned((t / 10'000) % 6 * 10), std::nullopt, std::nullopt}}));
  ASSERT_TRUE(s->append_batch(batch));
  ASSERT_TRUE(s->maintain(at(now)));
  ASSERT_EQ(count("samples_raw"), 360);  // the last hour only: older samples exist only as rollups

  // Raw: 30 minutes at its own resolution, then in 5-minute steps.
  auto raw = s->query(0, Metric::Utilization, at(now - 30 * 60'000), at(now), 0s);
  ASSERT_TRUE(raw) << raw.error().message;
  ASSERT_EQ(raw->size(), 180u);
  EXPECT_EQ(raw->front().ts_ms, now - 30 * 60'000);
  EXPECT_EQ(raw->front().samples, 1u);
  auto raw5 = s->query(0, Metric::Utilization, at(now - 30 * 60'000), at(now), 300s);
  ASSERT_TRUE(raw5);
  ASSERT_EQ(raw5->size(), 6u);
  EXPECT_EQ((*raw5)[1].ts_ms - (*raw5)[0].ts_ms, 300'000);
  EXPECT_EQ((*raw5)[0].samples, 30u);
  EXPECT_DOUBLE_EQ(*(*raw5)[0].avg, 25.0);
  EXPECT_DOUBLE_EQ(*(*raw5)[0].min, 0.0);
  EXPECT_DOUBLE_EQ(*(*raw5)[0].max, 50.0);

  // Past raw retention: minutes. A sample newer than the minute watermark still shows up.
  ASSERT_TRUE(s->append(*snap(now + 5'000, {{0, 80u, std::nullopt, std::nullopt}})));
  auto minutes = s->query(0, Metric::Utilization, at(now - 2 * 3'600'000), at(now + 60'000), 0s);
  ASSERT_TRUE(minutes) << minutes.error().message;
  ASSERT_EQ(minutes->size(), 121u);
  EXPECT_EQ(minutes->front().samples, 6u);
  EXPECT_DOUBLE_EQ(*minutes->front().avg, 25.0);
  EXPECT_EQ(minutes->back().ts_ms, now);
  EXPECT_EQ(minutes->back().samples, 1u);
  EXPECT_DOUBLE_EQ(*minutes->back().max, 80.0);

  // Past minute retention: hours; in 2-hour steps the buckets are aligned to the epoch.
  auto hours = s->query(0, Metric::Utilization, at(kH0), at(now), 0s);
  ASSERT_TRUE(hours) << hours.error().message;
  ASSERT_EQ(hours->size(), 3u);
  EXPECT_EQ((*hours)[0].ts_ms, kH0);
  EXPECT_EQ((*hours)[0].samples, 360u);
  EXPECT_DOUBLE_EQ(*(*hours)[2].avg, 25.0);
  auto two = s->query(0, Metric::Utilization, at(kH0), at(now), 7200s);
  ASSERT_TRUE(two);
  std::size_t total = 0;
  for (const auto& p : *two) {
    EXPECT_EQ(p.ts_ms % 7'200'000, 0);
    total += p.samples;
  }
  EXPECT_EQ(total, 1080u);
  // Another GPU has nothing.
  auto other = s->query(1, Metric::Utilization, at(kH0), at(now), 0s);
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->empty());
}

TEST_F(HistoryTest, BatchIsOneTransaction) {
  auto s = open();
  ASSERT_TRUE(s);
  std::vector<core::SnapshotPtr> bad = {snap(kH0, {{0, 1u, 1.0, 1u}, {1, 2u, 2.0, 2u}}),
                                        snap(kH0 + 1'000, {{0, 3u, 3.0, 3u}}), nullptr};
  auto r = s->append_batch(bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("null"), std::string::npos);
  EXPECT_EQ(count("samples_raw"), 0);  // the rows of the first two snapshots were rolled back
  bad.pop_back();
  ASSERT_TRUE(s->append_batch(bad));
  EXPECT_EQ(count("samples_raw"), 3);
}

TEST_F(HistoryTest, SigkillMidWriteLeavesAnIntactStore) {
  constexpr int kRowsPerBatch = 20;  // 10 snapshots x 2 GPUs
  fs::create_directories(dir);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();  // before anything is opened in this process
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto s = HistoryStore::open(file(), {});
    if (!s) ::_exit(2);
    for (std::int64_t b = 0; b < 1'000'000; ++b) {
      std::vector<core::SnapshotPtr> batch;
      for (int i = 0; i < 10; ++i)
        batch.push_back(snap(kH0 + (b * 10 + i) * 100, {{0, 1u, 1.5, std::nullopt}, {1, 2u, std::nullopt, 3u}}));
      if (!(*s)->append_batch(batch)) ::_exit(3);
      const char one = 1;
      if (::write(fds[1], &one, 1) != 1) ::_exit(4);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::int64_t acked = 0;
  char buf[256];
  while (acked < 50) {
    const auto n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    acked += n;
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child ended on its own, status " << status;
  for (;;) {  // acknowledgements written before the kill
    const auto n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    acked += n;
  }
  ::close(fds[0]);
  ASSERT_GE(acked, 50);

  {
    auto db = Db::open(file());
    ASSERT_TRUE(db) << db.error().message;
    auto ic = db->prepare("PRAGMA integrity_check");
    ASSERT_TRUE(ic);
    ASSERT_TRUE(*ic->step());
    EXPECT_EQ(ic->text(0), "ok");
  }
  auto s = open();
  ASSERT_TRUE(s);
  const std::int64_t stored = count("samples_raw");
  EXPECT_EQ(stored % kRowsPerBatch, 0) << "a batch was half written";
  // Every acknowledged batch is there; at most one more (committed, killed before it was acknowledged).
  EXPECT_GE(stored / kRowsPerBatch, acked);
  EXPECT_LE(stored / kRowsPerBatch, acked + 1);
  auto q = s->query(1, Metric::Fan, at(kH0), at(kH0 + 1'000'000'000), 60s);
  ASSERT_TRUE(q) << q.error().message;
  std::size_t samples = 0;
  for (const auto& p : *q) samples += p.samples;
  EXPECT_EQ(static_cast<std::int64_t>(samples), stored / 2);
  ASSERT_TRUE(s->maintain(at(kH0 + 1'000'000'000)));
}

TEST_F(HistoryTest, AlertEpisodesAreStoredFiredThenResolved) {
  auto s = open();
  ASSERT_TRUE(s);
  core::AlertEvent fired;
  fired.alert.id = "high_temperature_alert:GPU-a";
  fired.alert.kind = core::AlertKind::HighTemperature;
  fired.alert.gpu_index = 1;
  fired.alert.gpu_uuid = "GPU-a";
  fired.alert.severity = "critical";
  fired.alert.message = "hot";
  fired.alert.value = 91;
  fired.alert.threshold = 85;
  fired.alert.started_at = at(kH0);
  core::AlertEvent second = fired;  // a later episode of the same rule on the same GPU
  second.alert.started_at = at(kH0 + 600'000);
  ASSERT_TRUE(s->record_alerts({fired, second}));
  core::AlertEvent resolved = fired;
  resolved.type = core::AlertEvent::Type::Resolved;
  resolved.alert.value = 70;
  resolved.alert.resolved_at = at(kH0 + 60'000);
  ASSERT_TRUE(s->record_alerts({resolved}));

  auto got = s->recent_alerts(core::AlertQuery::newest(10));
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].started_at, at(kH0 + 600'000));  // newest first
  EXPECT_FALSE((*got)[0].resolved_at);
  const auto& first = (*got)[1];
  EXPECT_EQ(first.kind, core::AlertKind::HighTemperature);
  EXPECT_EQ(first.gpu_index, 1u);
  EXPECT_EQ(first.gpu_uuid, "GPU-a");
  EXPECT_EQ(first.severity, "critical");
  EXPECT_DOUBLE_EQ(first.threshold, 85);
  EXPECT_DOUBLE_EQ(first.value, 70);
  ASSERT_TRUE(first.resolved_at);
  EXPECT_EQ(*first.resolved_at, at(kH0 + 60'000));
  auto one = s->recent_alerts(core::AlertQuery::newest(1));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->size(), 1u);
}

// The filters of GET /api/v1/alerts are the store query's: one GPU's episodes that overlap a range, found
// even when every other GPU has many newer ones (the newest `limit` of all GPUs would miss them).
TEST_F(HistoryTest, AlertEpisodesFilteredByGpuAndTimeInTheQuery) {
  auto s = open();
  ASSERT_TRUE(s);
  auto episode = [](unsigned gpu, std::int64_t start_ms, std::optional<std::int64_t> end_ms) {
    core::AlertEvent e;
    e.alert.id = fmt::format("high_gpu_usage_alert:GPU-{}", gpu);
    e.alert.kind = core::AlertKind::HighGpuUsage;
    e.alert.gpu_index = gpu;
    e.alert.gpu_uuid = fmt::format("GPU-{}", gpu);
    e.alert.severity = "warning";
    e.alert.started_at = at(start_ms);
    if (end_ms) e.alert.resolved_at = at(*end_ms);
    return e;
  };
  std::vector<core::AlertEvent> fired, resolved;
  // GPU 3: one old episode (an hour long, resolved), one still firing.
  fired.push_back(episode(3, kH0, kH0 + 3'600'000));
  fired.push_back(episode(3, kH0 + 20 * 3'600'000, std::nullopt));
  // GPU 0: 50 newer episodes, a minute each.
  for (int i = 0; i < 50; ++i)
    fired.push_back(episode(0, kH0 + 2 * 3'600'000 + i * 120'000, kH0 + 2 * 3'600'000 + i * 120'000 + 60'000));
  for (auto e : fired)
    if (e.alert.resolved_at) {
      e.type = core::AlertEvent::Type::Resolved;
      resolved.push_back(e);
    }
  for (auto& e : fired) e.alert.resolved_at.reset();
  ASSERT_TRUE(s->record_alerts(fired));
  ASSERT_TRUE(s->record_alerts(resolved));

  core::AlertQuery q = core::AlertQuery::newest(10);
  auto all = s->recent_alerts(q);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 10u);
  EXPECT_EQ((*all)[0].gpu_index, 3u);  // the one still firing is the newest
  EXPECT_TRUE(std::none_of(all->begin() + 1, all->end(), [](const core::Alert& a) { return a.gpu_index == 3; }));

  q.gpu = 3;
  auto mine = s->recent_alerts(q);
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].started_at, at(kH0 + 20 * 3'600'000));
  EXPECT_EQ((*mine)[1].started_at, at(kH0));
  ASSERT_TRUE((*mine)[1].resolved_at);

  // A range inside the old episode finds it (it overlaps), not the one that started later.
  q.since = at(kH0 + 1'800'000);
  q.until = at(kH0 + 2'000'000);
  auto inside = s->recent_alerts(q);
  ASSERT_TRUE(inside);
  ASSERT_EQ(inside->size(), 1u);
  EXPECT_EQ((*inside)[0].started_at, at(kH0));
  // A range after the old one ended and before the firing one started: nothing.
  q.since = at(kH0 + 3'600'001);
  q.until = at(kH0 + 10 * 3'600'000);
  auto between = s->recent_alerts(q);
  ASSERT_TRUE(between);
  EXPECT_TRUE(between->empty());
  // Open-ended since: the firing episode overlaps any range that ends after its start.
  q.until.reset();
  auto later = s->recent_alerts(q);
  ASSERT_TRUE(later);
  ASSERT_EQ(later->size(), 1u);
  EXPECT_FALSE((*later)[0].resolved_at);
  // Until alone: episodes that started before it.
  q.since.reset();
  q.until = at(kH0 + 2 * 3'600'000 + 120'000 * 3);
  q.gpu.reset();
  auto before = s->recent_alerts(q);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->size(), 4u);  // GPU 3's old one and GPU 0's first three
}

TEST_F(HistoryTest, SharesItsFileWithTheNodeStore) {
  // Both components migrate the same file; neither may skip its tables because the other went first.
  {
    auto db = Db::open(file());
    ASSERT_TRUE(db);
    ASSERT_TRUE(db->migrate("other", 3, "CREATE TABLE other_things(x);"));
  }
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->append(*snap(kH0, {{0, 10, 100.0, 30}})));
  EXPECT_EQ(count("samples_raw"), 1);
  EXPECT_EQ(count("other_things"), 0);
  auto again = open();  // an up-to-date file opens without re-running the schema
  ASSERT_TRUE(again);
  EXPECT_EQ(count("samples_raw"), 1);
}

}  // namespace
}  // namespace gf::store
