// `gpufleet serve` and its store, read straight through SQLite: SIGTERM drains and leaves a healthy
// store, SIGKILL at any moment loses at most the last batch.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "integration/serve_fixture.hpp"
#include "support/eventually.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {
namespace {

// The agent's store, read-only and straight through SQLite (not through gpufleet's own store code).
class StoreReader {
 public:
  explicit StoreReader(const std::string& path) {
    sqlite3* raw = nullptr;
    if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK)
      con_.reset(raw);
    else
      sqlite3_close(raw);
  }
  bool ok() const { return con_ != nullptr; }
  // The first column of the first row as text ("" for none or NULL).
  std::string scalar(const char* sql) {
    sqlite3_stmt* st = nullptr;
    std::string out;
    EXPECT_EQ(sqlite3_prepare_v2(con_.get(), sql, -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(con_.get());
    if (st && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
  }

 private:
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> con_{nullptr, sqlite3_close};
};

TEST_F(Serve, SigtermDrainsAndLeavesAHealthyStore) {
  ASSERT_TRUE(start("sim", {"--interval", "0.2"}));
  // Some samples exist before the stop.
  ASSERT_TRUE(test::eventually(
      [&] {
        auto h = get_json(port(), "/api/v1/history?gpu=0&since=10m");
        return !h["series"].empty() && !h["series"][0]["points"].empty();
      },
      20s, 100ms));

  WsConn ws(port(), "/ws?period_ms=200");
  ASSERT_TRUE(ws.open());
  ASSERT_TRUE(ws.next(in(10s)));
  Sock busy(port());     // a whole request, its answer not read yet
  Sock partial(port());  // half a request
  ASSERT_TRUE(busy.ok() && partial.ok());
  ASSERT_TRUE(busy.send_all(request_text("GET", "/api/v1/leases")));
  ASSERT_TRUE(partial.send_all("GET /api/health HTTP/1.1\r\nHo"));

  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(agent.pid(), SIGTERM), 0);
  // The WebSocket client is told "going away".
  while (ws.next(in(8s))) {
  }
  EXPECT_TRUE(ws.closed());
  EXPECT_EQ(ws.close_code().value_or(0), 1001u) << "expected a going-away close frame";
  // The request in flight either got its whole answer or none: never half of one.
  auto r = read_response(busy, in(8s));
  if (r.status != 0) {
    EXPECT_TRUE(r.status == 200 || r.status == 503) << r.status;
  } else {
    EXPECT_TRUE(busy.buf.empty()) << "a truncated response: " << busy.buf.substr(0, 200);
  }
  EXPECT_TRUE(partial.closed_by(in(8s)));
  EXPECT_EQ(partial.buf, "") << "a half request was answered";

  test::eventually([&] { return !agent.running(); }, 10s, 10ms);
  const double secs = ms_since(t0) / 1000;
  ASSERT_FALSE(agent.running()) << "still running 10 s after SIGTERM";
  EXPECT_EQ(agent.stop(), 0) << agent.stderr_text();
  EXPECT_LT(secs, 7.0) << "longer than the 5 s drain";
  EXPECT_NE(agent.stderr_text().find("agent stopped"), std::string::npos) << agent.stderr_text();

  StoreReader store(db);
  ASSERT_TRUE(store.ok());
  auto scalar = [&](const char* sql) { return store.scalar(sql); };
  EXPECT_EQ(scalar("PRAGMA integrity_check"), "ok");
  EXPECT_GT(std::stoll("0" + scalar("SELECT count(*) FROM samples_raw")), 0);

  struct stat st {};
  ASSERT_EQ(::stat((dir / "agent.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// SIGKILL at three different moments of the write cycle (history is flushed every 2 s): each time the
// store passes integrity_check, keeps what was there before, and has samples up to the last flush.
TEST_F(Serve, SigkillAtAnyMomentLeavesAnIntactStoreMissingAtMostTheLastBatch) {
  long long before = 0;
  for (const auto wait : {2700ms, 3300ms, 4900ms}) {
    ASSERT_TRUE(start("sim", {"--interval", "0.1"}));
    // Real time, on purpose: the moment of the kill within the agent's own 2 s flush cycle is what varies.
    std::this_thread::sleep_for(wait);
    ASSERT_TRUE(agent.running());
    const auto killed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    ASSERT_EQ(::kill(agent.pid(), SIGKILL), 0);
    ASSERT_TRUE(test::eventually([&] { return !agent.running(); }, 10s));

    StoreReader store(db);
    ASSERT_TRUE(store.ok());
    auto scalar = [&](const char* sql) { return store.scalar(sql); };
    EXPECT_EQ(scalar("PRAGMA integrity_check"), "ok") << "after " << wait.count() << " ms";
    const long long rows = std::stoll("0" + scalar("SELECT count(*) FROM samples_raw"));
    EXPECT_GT(rows, before) << "after " << wait.count() << " ms: samples were lost or none were written";
    before = rows;
    // The newest stored sample is at most one flush period (2 s), plus slack for a loaded machine, older
    // than the kill.
    const long long newest = std::stoll("0" + scalar("SELECT max(ts_ms) FROM samples_raw"));
    EXPECT_GT(newest, killed_ms - 4000) << "after " << wait.count() << " ms: more than the last batch is missing";
  }
}

}  // namespace
}  // namespace gf::serve_test
