// The profiling (GPM) columns of the history: stored, rolled up and queried like the others, absent
// samples as NULL, and added by the schema migration to a file an older gpufleet wrote.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/history.hpp"
#include "store/sqlite.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ProfTime = std::chrono::system_clock::time_point;

constexpr std::int64_t kProfH0 = 1'700'000'000'000 / 3'600'000 * 3'600'000;  // an hour boundary (ms)

ProfTime prof_at(std::int64_t ms) { return ProfTime(std::chrono::milliseconds(ms)); }

// One GPU; tensor activity and PCIe bytes/s when given, else absent (a GPU without GPM).
core::Snapshot prof_snap(std::int64_t ts_ms, std::optional<double> tensor, std::optional<double> pcie_tx = {}) {
  core::Snapshot s;
  s.timestamp = prof_at(ts_ms);
  core::GpuReading g;
  g.uuid = "GPU-0";
  g.utilization_pct = 100u;
  g.prof_tensor_active =
      tensor ? core::Reading<double>(*tensor) : core::Reading<double>::absent(core::Absent::NotSupported);
  g.prof_pcie_tx_bytes =
      pcie_tx ? core::Reading<double>(*pcie_tx) : core::Reading<double>::absent(core::Absent::NotSupported);
  s.gpus.push_back(std::move(g));
  return s;
}

// The history schema as gpufleet wrote it before the profiling columns (schema version 2): nine value
// columns, rolled up as <col>_n/_min/_max/_avg.
std::string version2_schema() {
  const char* cols[] = {"util", "mem_util", "mem_used", "mem_total", "temp", "power", "fan", "sm_clock", "mem_clock"};
  std::string rollup;
  for (const char* c : cols)
    rollup += std::string(" ") + c + "_n INTEGER NOT NULL, " + c + "_min, " + c + "_max, " + c + "_avg REAL,";
  std::string s =
      "CREATE TABLE gf_schema(component TEXT PRIMARY KEY, version INTEGER NOT NULL);"
      "INSERT INTO gf_schema VALUES ('history', 2);"
      "CREATE TABLE samples_raw(ts_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, uuid TEXT NOT NULL, util INTEGER,"
      " mem_util INTEGER, mem_used INTEGER, mem_total INTEGER, temp INTEGER, power REAL, fan INTEGER,"
      " sm_clock INTEGER, mem_clock INTEGER);"
      "CREATE TABLE history_tiers(tier TEXT PRIMARY KEY, rolled_ms INTEGER NOT NULL DEFAULT 0,"
      " pruned_ms INTEGER NOT NULL DEFAULT 0);"
      "INSERT INTO history_tiers(tier) VALUES ('raw'), ('1m'), ('1h');"
      "CREATE TABLE alerts(alert_id TEXT NOT NULL, started_ms INTEGER NOT NULL, kind TEXT NOT NULL,"
      " gpu INTEGER NOT NULL, uuid TEXT NOT NULL, severity TEXT NOT NULL, message TEXT NOT NULL,"
      " value REAL NOT NULL, threshold REAL NOT NULL, resolved_ms INTEGER, PRIMARY KEY(alert_id, started_ms));";
  for (const char* t : {"samples_1m", "samples_1h"})
    s += std::string("CREATE TABLE ") + t + "(ts_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, uuid TEXT NOT NULL," +
         " n INTEGER NOT NULL," + rollup + " PRIMARY KEY(gpu, ts_ms));";
  return s;
}

struct HistoryProfiling : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  std::string file() const { return (dir / "history.db").string(); }
};

TEST_F(HistoryProfiling, EveryProfilingFieldHasAHistoryName) {
  EXPECT_EQ(*parse_metric("tensor_active"), core::Field::ProfTensorActive);
  EXPECT_EQ(*parse_metric("sm_occupancy"), core::Field::ProfSmOccupancy);
  EXPECT_EQ(*parse_metric("nvlink_rx_bytes"), core::Field::ProfNvlinkRxBytes);
  EXPECT_EQ(to_string(core::Field::ProfDramActive), "dram_active");
}

TEST_F(HistoryProfiling, RatiosAndBytesAreStoredRolledUpAndQueried) {
  auto s = HistoryStore::open(file());
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE((*s)->append(prof_snap(kProfH0 + 1'000, 0.93694, 6.044 * 1048576)));
  ASSERT_TRUE((*s)->append(prof_snap(kProfH0 + 2'000, std::nullopt)));  // no GPM sample yet: NULL, not 0
  ASSERT_TRUE((*s)->append(prof_snap(kProfH0 + 3'000, 0.5)));
  auto raw = (*s)->query(0, core::Field::ProfTensorActive, prof_at(kProfH0), prof_at(kProfH0 + 60'000), 60s);
  ASSERT_TRUE(raw) << raw.error().message;
  ASSERT_EQ(raw->size(), 1u);
  EXPECT_EQ((*raw)[0].samples, 2u);
  EXPECT_DOUBLE_EQ((*raw)[0].max.value_or(-1), 0.93694);
  EXPECT_DOUBLE_EQ((*raw)[0].min.value_or(-1), 0.5);

  // Through the rollups: two hours on, raw rows are gone (raw retention: one hour).
  ASSERT_TRUE((*s)->maintain(prof_at(kProfH0 + 2 * 3'600'000)));
  auto rolled = (*s)->query(0, core::Field::ProfTensorActive, prof_at(kProfH0), prof_at(kProfH0 + 3'600'000), 3600s);
  ASSERT_TRUE(rolled) << rolled.error().message;
  ASSERT_EQ(rolled->size(), 1u);
  EXPECT_EQ((*rolled)[0].samples, 2u);
  EXPECT_NEAR((*rolled)[0].avg.value_or(-1), (0.93694 + 0.5) / 2, 1e-9);
  auto bytes = (*s)->query(0, core::Field::ProfPcieTxBytes, prof_at(kProfH0), prof_at(kProfH0 + 3'600'000), 3600s);
  ASSERT_TRUE(bytes);
  ASSERT_EQ(bytes->size(), 1u);
  EXPECT_EQ((*bytes)[0].samples, 1u);
  EXPECT_DOUBLE_EQ((*bytes)[0].max.value_or(-1), 6.044 * 1048576);
}

TEST_F(HistoryProfiling, AFileFromBeforeTheProfilingColumnsIsMigratedAndStaysReadable) {
  {
    auto db = Db::open(file());
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE(db->exec(version2_schema().c_str())) << db->error();
    const std::string old_row = "INSERT INTO samples_raw(ts_ms, gpu, uuid, util, temp) VALUES (" +
                                std::to_string(kProfH0 + 500) + ", 0, 'GPU-0', 42, 40)";
    ASSERT_TRUE(db->exec(old_row.c_str())) << db->error();
  }
  auto s = HistoryStore::open(file());
  ASSERT_TRUE(s) << s.error().message;
  // The old row reads as before, and has no profiling values (NULL: absent, never 0).
  auto util = (*s)->query(0, core::Field::Utilization, prof_at(kProfH0), prof_at(kProfH0 + 60'000), 60s);
  ASSERT_TRUE(util) << util.error().message;
  ASSERT_EQ(util->size(), 1u);
  EXPECT_DOUBLE_EQ((*util)[0].max.value_or(-1), 42);
  ASSERT_TRUE((*s)->append(prof_snap(kProfH0 + 1'000, 0.25)));
  auto tensor = (*s)->query(0, core::Field::ProfTensorActive, prof_at(kProfH0), prof_at(kProfH0 + 60'000), 60s);
  ASSERT_TRUE(tensor) << tensor.error().message;
  ASSERT_EQ(tensor->size(), 1u);
  EXPECT_EQ((*tensor)[0].samples, 1u);  // the new row only
  EXPECT_DOUBLE_EQ((*tensor)[0].avg.value_or(-1), 0.25);
  // Rollups of old and new rows together.
  ASSERT_TRUE((*s)->maintain(prof_at(kProfH0 + 2 * 3'600'000)));
  s->reset();
  // Opening again does not migrate twice (ALTER TABLE ADD COLUMN would fail on a column that exists).
  auto again = HistoryStore::open(file());
  ASSERT_TRUE(again) << again.error().message;
  auto version = Db::open(file());
  ASSERT_TRUE(version);
  auto st = version->prepare("SELECT version FROM gf_schema WHERE component = 'history'");
  ASSERT_TRUE(st);
  ASSERT_TRUE(st->step().value_or(false));
  EXPECT_EQ(st->int64(0), 3);
}

}  // namespace
}  // namespace gf::store
