// `gpufleet serve` with leases and jobs over time: usage accounting of a held lease, idle leases warned
// and reclaimed, Docker-image jobs run through the stand-in engine and cancelled, and a bad reclaim
// setting refused at start.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <functional>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fakes/docker_standin.hpp"
#include "integration/serve_fixture.hpp"
#include "support/eventually.hpp"

#include "gf_test_paths.hpp"

namespace gf::serve_test {
namespace {

// Issue 12, accounting: a lease taken through the API, held across a few collections and released,
// is accounted exactly for the time it was held, and /api/v1/usage, the lease's efficiency line,
// /metrics and the CLI agree with the lease's own times.
TEST_F(Serve, UsageAccountsTheTimeALeaseWasHeld) {
  ASSERT_TRUE(start("sim", {"--interval", "0.1"}));
  const std::string auth = "Authorization: Bearer " + token();
  auto made = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "min_memory_mb": 0, "name": "acct"})", {auth});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.body_json()["id"].get<std::string>();

  // A few collections pass while it is held (the running row grows).
  ASSERT_TRUE(test::eventually(
      [&] {
        auto u = get_json(port(), "/api/v1/usage?since=1h&by=job");
        return u["rows"].size() == 1 && u["rows"][0]["held_gpu_s"].get<double>() >= 0.5;
      },
      20s, 20ms))
      << "the running lease was never accounted";
  ASSERT_EQ(http(port(), "DELETE", "/api/v1/allocations/" + id, {}, {auth}).status, 200);

  // The row is final at the next collection: the ended lease then carries its usage.
  json ended;
  test::eventually(
      [&] {
        const auto doc = get_json(port(), "/api/v1/leases?all=1");
        for (const auto& l : doc["leases"])
          if (l["id"] == id && l.contains("usage")) ended = l;
        return !ended.is_null();
      },
      20s, 20ms);
  ASSERT_FALSE(ended.is_null()) << "the ended lease has no usage";
  EXPECT_TRUE(ended["usage"]["final"].get<bool>());
  EXPECT_NE(ended["usage"]["line"].get<std::string>().find("GPU-h held"), std::string::npos);

  // The lease's own times, from the store.
  std::int64_t created = 0, released = 0;
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT created_ms, released_ms FROM leases WHERE id = ?1", -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    created = sqlite3_column_int64(st, 0);
    released = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(raw);
  }
  ASSERT_GT(released, created);
  const double held = static_cast<double>(released - created) / 1000.0;  // 1 GPU
  EXPECT_NEAR(ended["usage"]["held_gpu_s"].get<double>(), held, 1e-3);
  EXPECT_LE(ended["usage"]["busy_gpu_s"].get<double>(), ended["usage"]["held_gpu_s"].get<double>());

  auto by_user = get_json(port(), "/api/v1/usage?since=1h&by=user");
  ASSERT_EQ(by_user["rows"].size(), 1u) << by_user.dump();
  EXPECT_NEAR(by_user["rows"][0]["held_gpu_s"].get<double>(), held, 1e-3);
  EXPECT_NEAR(by_user["total"]["held_gpu_s"].get<double>(), held, 1e-3);
  const std::string user = by_user["rows"][0]["key"].get<std::string>();
  get_json(port(), "/api/v1/usage?by=nobody", 400);
  get_json(port(), "/api/v1/usage?since=yesterday", 400);

  // /metrics: the user's held counter is the same number.
  const auto prom = get(port(), "/metrics").body;
  const std::string prefix = "gpufleet_user_gpu_held_seconds_total{user=\"" + user + "\"";
  const auto at = prom.find(prefix);
  ASSERT_NE(at, std::string::npos) << prom;
  const auto line = prom.substr(at, prom.find('\n', at) - at);
  EXPECT_NEAR(std::stod(line.substr(line.rfind(' ') + 1)), held, 1e-3) << line;
  EXPECT_NE(prom.find("# TYPE gpufleet_user_energy_joules_total counter"), std::string::npos);

  // The CLI, through the agent's route and from the store, and the efficiency line of `leases --all`.
  auto cli = gf::platform::run_process(
      {GF_BINARY, "usage", "--since", "1h", "--json", "--agent", "http://127.0.0.1:" + std::to_string(port())},
      gf::platform::RunOptions{30s});
  ASSERT_TRUE(cli);
  ASSERT_EQ(cli->exit_code, 0) << cli->err;
  EXPECT_NEAR(json::parse(cli->out)["total"]["held_gpu_s"].get<double>(), held, 1e-3) << cli->out;
  auto local = gf::platform::run_process({GF_BINARY, "usage", "--since", "1h", "--by", "job", "--db", db},
                                         gf::platform::RunOptions{30s});
  ASSERT_TRUE(local);
  ASSERT_EQ(local->exit_code, 0) << local->err;
  EXPECT_NE(local->out.find("GPU-H HELD"), std::string::npos) << local->out;
  auto bad = gf::platform::run_process({GF_BINARY, "usage", "--by", "team", "--db", db}, gf::platform::RunOptions{30s});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->exit_code, 2) << bad->err;
  EXPECT_NE(bad->err.find("--by"), std::string::npos) << bad->err;
  auto leases = gf::platform::run_process({GF_BINARY, "--backend", "sim", "leases", "--all", "--db", db},
                                          gf::platform::RunOptions{30s});
  ASSERT_TRUE(leases);
  ASSERT_EQ(leases->exit_code, 0) << leases->err;
  EXPECT_NE(leases->out.find("efficiency: "), std::string::npos) << leases->out;
  expect_clean_stop();
}

// Issue 12, idle-lease reclaim through the real agent: with reclaim on, a lease whose GPU stays idle
// (0 % on the simulator, no process of its owner) is warned, then released a grace period later, and
// both decisions are in the audit table with their evidence. Off by default: see the test above,
// whose idle lease was never touched.
TEST_F(Serve, IdleLeaseIsWarnedThenReclaimed) {
  const auto cfg = write_file(
      "reclaim.json", R"({"reclaim": {"enabled": true, "utilization_threshold_pct": 5, "idle_for": 1, "grace": 1}})");
  ASSERT_TRUE(start("sim", {"--interval", "0.1", "--config", cfg}));
  WsConn ws(port(), "/ws?period_ms=60000");
  ASSERT_TRUE(ws.open()) << ws.handshake.raw_head;
  const std::string auth = "Authorization: Bearer " + token();
  auto made = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 1, "min_memory_mb": 0})", {auth});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.body_json()["id"].get<std::string>();
  // The WebSocket clients hear of both steps.
  auto warned = ws.next_event("lease_warning", in(20s));
  ASSERT_TRUE(warned) << "no lease_warning event";
  EXPECT_EQ(warned->j()["data"]["lease"], id);
  auto reclaimed = ws.next_event("lease_reclaimed", in(20s));
  ASSERT_TRUE(reclaimed) << "no lease_reclaimed event";
  EXPECT_EQ(reclaimed->j()["data"]["lease"], id);

  std::string reason;
  test::eventually(
      [&] {
        const auto doc = get_json(port(), "/api/v1/leases?all=1");
        for (const auto& l : doc["leases"])
          if (l["id"] == id && !l["released_at"].is_null()) reason = l["release_reason"].get<std::string>();
        return !reason.empty();
      },
      30s, 50ms);
  EXPECT_EQ(reason, "idle: reclaimed");

  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw,
                               "SELECT action, at_ms - idle_since_ms, evidence FROM reclaim_audit WHERE lease_id = ?1 "
                               "ORDER BY id",
                               -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<std::string> actions;
  while (sqlite3_step(st) == SQLITE_ROW) {
    actions.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    EXPECT_GE(sqlite3_column_int64(st, 1), 1000);  // idle for at least idle_for
    const auto ev = json::parse(reinterpret_cast<const char*>(sqlite3_column_text(st, 2)), nullptr, false);
    ASSERT_TRUE(ev.is_array() && ev.size() == 1u) << ev.dump();
    EXPECT_EQ(ev[0]["utilization_pct"], 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(raw);
  EXPECT_EQ(actions, (std::vector<std::string>{"warn", "release"}));
  EXPECT_NE(agent.stderr_text().find("warning for lease " + id), std::string::npos) << agent.stderr_text();
  expect_clean_stop();
}

// Issue 23, item 8: a Docker-image job submitted over HTTP is queued through the arbiter, runs in the
// engine (the stand-in) on the GPUs it was granted, is recorded, and its life goes out on /ws; a waiting
// one is cancelled with DELETE. Off without the config, and never without the token.
TEST_F(Serve, SubmittedJobsRunInDockerAndCanBeCancelled) {
  gf::fakes::DockerStandinConfig engine_cfg;
  engine_cfg.exit_code = 0;
  engine_cfg.run_time = 300ms;
  gf::fakes::DockerStandin engine(engine_cfg);
  const std::vector<std::string> env{"DOCKER_HOST=unix://" + engine.socket_path()};

  // Off by default: 403, whatever the token.
  ASSERT_TRUE(start("sim", {"--interval", "0.1", "--socket", "none"}, env));
  const std::string off_auth = "Authorization: Bearer " + token();
  auto off = http(port(), "POST", "/api/v1/jobs", R"({"image": "busybox"})", {off_auth});
  EXPECT_EQ(off.status, 403) << off.body;
  EXPECT_EQ(off.body_json()["error"], "submission_disabled") << off.body;
  expect_clean_stop();

  const auto cfg = write_file("jobs.json", R"({"jobs": {"submit": true}})");
  ASSERT_TRUE(start("sim", {"--interval", "0.1", "--socket", "none", "--config", cfg}, env));
  WsConn ws(port(), "/ws?period_ms=60000");
  ASSERT_TRUE(ws.open()) << ws.handshake.raw_head;
  const std::string auth = "Authorization: Bearer " + token();
  const std::string body =
      R"J({"image": "nvcr.io/nvidia/pytorch:24.01-py3", "args": ["python", "-c", "print(1)"], "gpus": 2,
          "min_memory_mb": 1000, "name": "submitted", "wait_s": 5})J";
  EXPECT_EQ(http(port(), "POST", "/api/v1/jobs", body).status, 401);
  EXPECT_EQ(http(port(), "POST", "/api/v1/jobs", R"({"image": "x", "cmd": []})", {auth}).status, 400);
  EXPECT_EQ(http(port(), "POST", "/api/v1/jobs", R"({"args": ["a"]})", {auth}).status, 400);
  EXPECT_EQ(http(port(), "POST", "/api/v1/jobs", R"({"image": "bad\nname"})", {auth}).status, 400);

  auto made = http(port(), "POST", "/api/v1/jobs", body, {auth, "Content-Type: application/json"});
  ASSERT_EQ(made.status, 202) << made.body;
  const std::string id = made.body_json()["id"].get<std::string>();
  EXPECT_EQ(made.body_json()["status"], "waiting");

  auto queued = ws.next_event("job_queued", in(20s));
  ASSERT_TRUE(queued) << "no job_queued event";
  EXPECT_EQ(queued->j()["data"]["id"], id);
  auto started = ws.next_event("job_started", in(20s));
  ASSERT_TRUE(started) << "no job_started event";
  EXPECT_EQ(started->j()["data"]["gpus"].size(), 2u) << started->text;
  auto finished = ws.next_event("job_finished", in(20s));
  ASSERT_TRUE(finished) << "no job_finished event";
  EXPECT_EQ(finished->j()["data"]["exit_code"], 0);

  // Recorded as a CLI run is, with the container; the GPUs reached it as DeviceRequests.
  auto until = [](const std::function<bool()>& done) { return test::eventually(done, 20s, 50ms); };
  json rec;
  ASSERT_TRUE(until([&] {
    rec = get_json(port(), "/api/v1/jobs/" + id);
    return rec.value("status", "") == "succeeded";
  })) << rec.dump();
  EXPECT_EQ(rec["exit_code"], 0) << rec.dump();
  auto create = json::parse(engine.last_create_body().value_or("{}"));
  EXPECT_EQ(create["Image"], "nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_EQ(create["HostConfig"]["DeviceRequests"][0]["DeviceIDs"].size(), 2u) << create.dump();
  EXPECT_TRUE(get_json(port(), "/api/v1/leases")["leases"].empty());  // released at the end

  // While a lease holds both GPUs, a job waits; DELETE cancels it, and job_failed says so.
  auto held = http(port(), "POST", "/api/v1/allocations", R"({"gpus": 2, "min_memory_mb": 0})", {auth});
  ASSERT_EQ(held.status, 201) << held.body;
  auto waiting =
      http(port(), "POST", "/api/v1/jobs", R"({"image": "busybox", "min_memory_mb": 0, "wait_s": 60})", {auth});
  ASSERT_EQ(waiting.status, 202) << waiting.body;
  const std::string wid = waiting.body_json()["id"].get<std::string>();
  ASSERT_TRUE(ws.next_event("job_queued", in(20s)));
  EXPECT_EQ(http(port(), "DELETE", "/api/v1/jobs/" + wid, {}).status, 401);
  auto del = http(port(), "DELETE", "/api/v1/jobs/" + wid, {}, {auth});
  EXPECT_EQ(del.status, 200) << del.body;
  auto failed = ws.next_event("job_failed", in(20s));
  ASSERT_TRUE(failed) << "no job_failed event";
  EXPECT_EQ(failed->j()["data"]["id"], wid);
  EXPECT_EQ(failed->j()["data"]["status"], "interrupted");
  ASSERT_TRUE(until([&] { return get_json(port(), "/api/v1/jobs/" + wid).value("status", "") == "interrupted"; }));
  EXPECT_EQ(http(port(), "DELETE", "/api/v1/jobs/" + wid, {}, {auth}).status, 404);

  // No GPUs within a short wait: a failure with its error, as the seed's worker reads it.
  auto brief =
      http(port(), "POST", "/api/v1/jobs", R"({"image": "busybox", "min_memory_mb": 0, "wait_s": 0.3})", {auth});
  ASSERT_EQ(brief.status, 202) << brief.body;
  const std::string bid = brief.body_json()["id"].get<std::string>();
  ASSERT_TRUE(until([&] {
    rec = get_json(port(), "/api/v1/jobs/" + bid);
    return rec.value("status", "") == "no_gpus";
  })) << rec.dump();
  EXPECT_NE(rec.value("error", "").find("no GPUs within the wait"), std::string::npos) << rec.dump();
  // A request the node can never serve fails at once, saying why.
  auto never = http(port(), "POST", "/api/v1/jobs", R"({"image": "busybox", "gpus": 64})", {auth});
  ASSERT_EQ(never.status, 202) << never.body;
  ASSERT_TRUE(until([&] {
    rec = get_json(port(), "/api/v1/jobs/" + never.body_json()["id"].get<std::string>());
    return rec.value("status", "") == "failed";
  })) << rec.dump();
  EXPECT_NE(rec.value("error", "").find("this node has 2"), std::string::npos) << rec.dump();
  expect_clean_stop();
}

// A wrong usage or reclaim setting stops the agent at start with one line naming the key.
TEST_F(Serve, BadReclaimConfigIsOneClearError) {
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {R"({"reclaim": {"idle_for": "soon"}})", "reclaim.idle_for"},
           {R"({"reclaim": {"enabled": "yes"}})", "reclaim.enabled"},
           {R"({"reclaim": {"utilization_threshold_pct": 101}})", "reclaim.utilization_threshold_pct"},
           {R"({"reclaim": {"idle": 5}})", "unknown key 'idle'"},
           {R"({"usage": {"busy_threshold_pct": -1}})", "usage.busy_threshold_pct"},
           {R"({"jobs": {"submit": "yes"}})", "jobs.submit"},
           {R"({"jobs": {"max_in_flight": 0}})", "jobs.max_in_flight"},
           {R"({"jobs": {"run": true}})", "unknown key 'run'"},
           {R"({"jobs": true})", "'jobs' must be an object"}}) {
    const auto cfg = write_file("bad.json", text);
    auto r = gf::platform::run_process(
        {GF_BINARY, "--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--config", cfg},
        gf::platform::RunOptions{30s});
    ASSERT_TRUE(r);
    EXPECT_NE(r->exit_code, 0) << text;
    EXPECT_NE(r->err.find(key), std::string::npos) << text << ": " << r->err;
  }
}

}  // namespace
}  // namespace gf::serve_test
