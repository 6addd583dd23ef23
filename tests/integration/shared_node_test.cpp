// A shared node end to end (issue 12): the real agent (`gpufleet serve --backend sim`, 8 GPUs, as root,
// on a temp socket and store) and the real CLI run as two unprivileged Unix users, gf-test-a and
// gf-test-b (tests/support/test_users.hpp). Each test reproduces one finding of the issue; on today's
// main (no agent socket, every user's own store) each fails. Skipped, saying why, when not root.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/child.hpp"
#include "platform/subprocess.hpp"
#include "support/eventually.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using gf::test::eventually;
using gf::test::TestUser;

struct SharedNode : ::testing::Test {
  std::optional<TestUser> a, b;
  // Under /tmp whatever TMPDIR says: the test users must reach it.
  gf::test::TempDir tmp{"/tmp"};
  const fs::path dir = tmp.path();
  std::string sock, db;
  pid_t agent = -1;

  void SetUp() override {
    std::string why;
    a = gf::test::test_user("gf-test-a", &why);
    if (a) b = gf::test::test_user("gf-test-b", &why);
    if (!a || !b) GTEST_SKIP() << why;
    // Reachable by the test users: the socket's directory is 0755 like /run/gpufleet; the store's is
    // 0755 too, so that the store file's own owner and mode are what keeps other users out.
    fs::create_directories(dir / "state");
    fs::create_directories(dir / "out");
    fs::permissions(dir, fs::perms(0755));
    fs::permissions(dir / "state", fs::perms(0755));
    fs::permissions(dir / "out", fs::perms(01777));
    sock = (dir / "agent.sock").string();
    db = (dir / "state" / "gf.db").string();
    setenv("GPUFLEET_SOCKET", sock.c_str(), 1);
    setenv("GPUFLEET_SIM_SCENARIO", GF_FIXTURES_DIR "/sim/two_idle.json", 1);
    unsetenv("GPUFLEET_DB");  // defaults: the finding "per-user default stores" is about them
    start_agent();
  }
  // The agent as root, with `extra` serve arguments (a --config, say).
  void start_agent(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{GF_BINARY,     "--backend", "sim", "--sim-gpus", "8", "serve",       "--listen",
                                  "127.0.0.1:0", "--socket",  sock,  "--db",       db,  "--no-history"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto pid = gf::platform::spawn_inheriting(argv);
    ASSERT_TRUE(pid) << pid.error().message;
    agent = *pid;
    // A bound, not a timer: under ASan on a loaded 2-core machine the agent's first answer can take many seconds.
    std::string last;
    ASSERT_TRUE(eventually(
        [&] {
          if (!fs::exists(sock)) return false;
          const auto r = gf({"leases"});
          last = r.out + r.err;
          return r.exit_code == 0;
        },
        60s, 50ms))
        << "the agent did not start answering on " << sock << "; the CLI said: " << last;
  }
  void stop_agent() {
    if (agent > 0) {
      ::kill(agent, SIGCONT);
      ::kill(agent, SIGTERM);
      if (!eventually([&] { return ::waitpid(agent, nullptr, WNOHANG) == agent; }, 15s, 50ms)) {
        ::kill(agent, SIGKILL);
        ::waitpid(agent, nullptr, 0);
      }
    }
    agent = -1;
  }
  // Restarts the agent with a config file holding `config`.
  void restart_with_config(const std::string& config, std::vector<std::string> extra = {}) {
    stop_agent();
    const auto cfg = dir / "state" / "config.json";
    std::ofstream(cfg) << config;
    extra.insert(extra.begin(), {"--config", cfg.string()});
    start_agent(extra);
  }
  void TearDown() override {
    stop_agent();
    setenv("GPUFLEET_SOCKET", "none", 1);  // back to no_ambient_agent.cpp's setting
    unsetenv("GPUFLEET_AGENT_TIMEOUT");
  }

  static std::vector<std::string> cli(std::vector<std::string> args) {
    args.insert(args.begin(), {GF_BINARY, "--backend", "sim", "--sim-gpus", "8"});
    return args;
  }
  // The CLI as root (or as `user`).
  static gf::platform::ProcessOutput gf(std::vector<std::string> args, const TestUser* user = nullptr) {
    auto argv = cli(std::move(args));
    if (user) argv = user->as(argv);
    auto r = gf::platform::run_process(argv, gf::platform::RunOptions{60s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  }
  json active_leases() {
    auto r = gf({"leases", "--json"});
    auto j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j["leases"] : json::array();
  }
  // Starts `run --gpus N -- sleep 60` as user and returns its pid and lease id (once the agent lists it).
  std::pair<pid_t, std::string> holder(const TestUser& u, unsigned gpus, std::vector<std::string> prefix = {}) {
    auto argv = u.as(cli({"run", "--gpus", std::to_string(gpus), "--name", "holder-" + u.name, "--", "sleep", "60"}));
    argv.insert(argv.begin(), prefix.begin(), prefix.end());
    auto pid = gf::platform::spawn_inheriting(argv);
    EXPECT_TRUE(pid);
    std::string lease;
    EXPECT_TRUE(eventually(
        [&] {
          for (const auto& l : active_leases())
            if (l["owner"]["user"] == u.name) lease = l["id"].get<std::string>();
          return !lease.empty();
        },
        20s, 50ms))
        << u.name << "'s lease never showed up";
    return {pid ? *pid : -1, lease};
  }
  static void end(pid_t pid) {
    if (pid <= 0) return;
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
};

// Finding (high) "user B releases user A's lease": refused, naming A; A and root may.
TEST_F(SharedNode, OnlyTheOwnerOrRootReleasesALease) {
  auto [pid, lease] = holder(*a, 1);
  ASSERT_FALSE(lease.empty());
  auto byb = gf({"release", lease}, &*b);
  EXPECT_EQ(byb.exit_code, 1) << byb.out;
  EXPECT_NE(byb.err.find("gf-test-a"), std::string::npos) << "the error names the owner: " << byb.err;
  EXPECT_EQ(active_leases().size(), 1u);
  auto bya = gf({"release", lease}, &*a);
  EXPECT_EQ(bya.exit_code, 0) << bya.err;
  EXPECT_TRUE(active_leases().empty());
  end(pid);

  auto [pid2, lease2] = holder(*a, 1);
  ASSERT_FALSE(lease2.empty());
  auto byroot = gf({"release", lease2});
  EXPECT_EQ(byroot.exit_code, 0) << byroot.err;
  EXPECT_TRUE(active_leases().empty());
  end(pid2);
}

// Finding (high) "anyone who can write the shared store can forge leases": the agent's store is root's
// and private, so B's plain SQLite write fails.
TEST_F(SharedNode, OtherUsersCannotWriteTheStore) {
  struct stat st {};
  ASSERT_EQ(::stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "store mode " << std::oct << (st.st_mode & 07777);
  auto forge = gf::platform::run_process(
      b->as({"sqlite3", db,
             "INSERT INTO leases(id, job_id, name, owner_pid, owner_start, owner_user, created_ms) "
             "VALUES('forged', 'j', 'n', 1, 0, 'gf-test-a', 0)"}),
      gf::platform::RunOptions{30s});
  ASSERT_TRUE(forge);
  EXPECT_NE(forge->exit_code, 0) << forge->out << forge->err;
  for (const auto& l : active_leases()) EXPECT_NE(l["id"], "forged");
}

// Finding (high) "any user may set any --priority": above the ceiling (default 0) needs root.
TEST_F(SharedNode, PriorityAboveTheCeilingNeedsRoot) {
  auto byb = gf({"run", "--gpus", "1", "--priority", "5", "--wait", "0", "--", "true"}, &*b);
  EXPECT_EQ(byb.exit_code, 1) << byb.err;
  EXPECT_NE(byb.err.find("priority"), std::string::npos) << byb.err;
  auto byroot = gf({"run", "--gpus", "1", "--priority", "5", "--wait", "0", "--", "true"});
  EXPECT_EQ(byroot.exit_code, 0) << byroot.err;
}

// Finding (high) "per-user default stores: A and B both get GPU 1": with defaults and an agent, both
// allocate through it, so while A holds every GPU, B gets none.
TEST_F(SharedNode, DefaultsShareOneArbiter) {
  auto [pid, lease] = holder(*a, 8);
  ASSERT_FALSE(lease.empty());
  auto byb = gf({"run", "--gpus", "1", "--wait", "0", "--", "true"}, &*b);
  EXPECT_EQ(byb.exit_code, 75) << byb.err;
  // alloc ties the lease to its caller's shell, which must be B's own: run it from one.
  auto ran = gf::platform::run_process(
      b->as({"sh", "-c", "\"$0\" --backend sim --sim-gpus 8 alloc --gpus 1; exit $?", GF_BINARY}),
      gf::platform::RunOptions{60s});
  ASSERT_TRUE(ran);
  EXPECT_EQ(ran->exit_code, 75) << ran->out << ran->err;
  end(pid);
  EXPECT_TRUE(eventually([&] { return active_leases().empty(); }, 20s, 50ms));
  EXPECT_EQ(gf({"run", "--gpus", "1", "--wait", "0", "--", "true"}, &*b).exit_code, 0);
}

// Finding (high) "a lease taken inside another PID namespace is reaped as 'owner gone' while its owner
// runs": A's `alloc` from a shell in a new PID namespace (where the shell is pid 1) keeps its owner as
// long as the shell runs, and ends when it exits.
TEST_F(SharedNode, LeaseFromAnotherPidNamespaceKeepsItsOwner) {
  const std::string shell = "\"$0\" --backend sim --sim-gpus 8 alloc --gpus 1 >/dev/null && exec sleep 60";
  auto pid =
      gf::platform::spawn_inheriting({"unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--", "setpriv",
                                      "--reuid=" + std::to_string(a->uid), "--regid=" + std::to_string(a->gid),
                                      "--clear-groups", "--", "sh", "-c", shell, GF_BINARY});
  ASSERT_TRUE(pid);
  json lease;
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& l : active_leases())
          if (l["owner"]["user"] == "gf-test-a") lease = l;
        return !lease.is_null();
      },
      20s, 50ms));
  // The agent saw the shell's host pid (not 1, its pid inside the namespace), and other users' requests,
  // which make the agent look at owners, leave the lease alone.
  const auto owner_pid = lease["owner"]["pid"].get<unsigned>();
  EXPECT_GT(owner_pid, 1u);
  EXPECT_TRUE(fs::exists("/proc/" + std::to_string(owner_pid)));
  EXPECT_EQ(gf({"run", "--gpus", "1", "--wait", "0", "--", "true"}, &*b).exit_code, 0);
  bool still = false;
  for (const auto& l : active_leases()) still |= l["id"] == lease["id"];
  EXPECT_TRUE(still) << "the lease was ended while its owner runs";
  // The owner exits: the namespace's pid 1 (the shell, now sleep), by its host pid. (unshare's
  // --kill-child cannot do it: the parent-death signal is cleared when setpriv changes the uid.)
  ::kill(static_cast<pid_t>(owner_pid), SIGKILL);
  ::waitpid(*pid, nullptr, 0);
  EXPECT_TRUE(eventually([&] { return active_leases().empty(); }, 20s, 50ms)) << "the lease outlived its owner";
}

// Finding (medium) "a frozen agent blocks every CLI command for 30 s": the CLI gives up after its own
// limit (3 s to connect, 5 s of silence) with "not answering" and exit 1, within 10 s. The 10 s bounds
// the hang; it is not a timing assertion.
TEST_F(SharedNode, FrozenAgentIsNotAnswering) {
  unsetenv("GPUFLEET_AGENT_TIMEOUT");
  ASSERT_EQ(::kill(agent, SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = gf::platform::run_process(b->as(cli({"leases"})), gf::platform::RunOptions{30s});
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(agent, SIGCONT);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("the agent at " + sock + " is not answering"), std::string::npos) << r->err;
  EXPECT_LT(took, 10s) << "the CLI gave up after " << std::chrono::duration<double>(took).count() << " s";
}

// Review of issue 12: admin_group, from the config file. gf-test-b, a member of gf-test-admins, may set
// a priority above the ceiling and release gf-test-a's lease; gf-test-a, not a member, may do neither.
TEST_F(SharedNode, TheAdminGroupMayWhatOthersMayNot) {
  std::string why;
  if (!gf::test::test_group("gf-test-admins", {b->name}, &why)) GTEST_SKIP() << why;
  ASSERT_NO_FATAL_FAILURE(restart_with_config(R"({"admin_group": "gf-test-admins", "max_user_priority": 0})"));
  const std::vector<std::string> high{"run", "--gpus", "1", "--priority", "5", "--wait", "0", "--", "true"};
  auto bya = gf(high, &*a);
  EXPECT_EQ(bya.exit_code, 1) << bya.err;
  EXPECT_NE(bya.err.find("priority 5 is above 0"), std::string::npos) << bya.err;
  auto byb = gf(high, &*b);
  EXPECT_EQ(byb.exit_code, 0) << byb.err;

  auto [pid, lease] = holder(*a, 1);
  ASSERT_FALSE(lease.empty());
  auto rel = gf({"release", lease}, &*b);
  EXPECT_EQ(rel.exit_code, 0) << rel.err;
  EXPECT_TRUE(active_leases().empty()) << "the admin group's member released a's lease";
  end(pid);
  // And the reverse: a is no admin.
  auto [pid2, lease2] = holder(*b, 1);
  ASSERT_FALSE(lease2.empty());
  rel = gf({"release", lease2}, &*a);
  EXPECT_EQ(rel.exit_code, 1) << rel.err;
  EXPECT_NE(rel.err.find("belongs to gf-test-b"), std::string::npos) << rel.err;
  end(pid2);
}

// Done-when (quotas) through the real agent and its config file: with max_gpus_per_user 2, a user who
// holds 2 GPUs is refused a third at once (exit 75, naming the quota) and queued for it with --wait,
// while another user still gets one; when the first user's lease ends, the queued run goes.
TEST_F(SharedNode, PerUserQuotaFromTheConfigRefusesOrQueues) {
  ASSERT_NO_FATAL_FAILURE(restart_with_config(R"({"max_gpus_per_user": 2})"));
  auto [pid, lease] = holder(*a, 2);
  ASSERT_FALSE(lease.empty());
  auto now = gf({"run", "--gpus", "1", "--wait", "0", "--", "true"}, &*a);
  EXPECT_EQ(now.exit_code, 75) << now.err;
  EXPECT_NE(now.err.find("max_gpus_per_user"), std::string::npos) << now.err;
  auto other = gf({"run", "--gpus", "1", "--wait", "0", "--", "true"}, &*b);
  EXPECT_EQ(other.exit_code, 0) << "the quota is per user: " << other.err;

  const auto marker = dir / "out" / "queued-ran";
  auto queued = gf::platform::spawn_inheriting(
      a->as(cli({"run", "--gpus", "1", "--wait", "60", "--name", "queued", "--", "touch", marker.string()})));
  ASSERT_TRUE(queued) << queued.error().message;
  json waiting;
  EXPECT_TRUE(eventually(
      [&] {
        auto r = gf({"leases", "--json"});
        auto j = json::parse(r.out, nullptr, false);
        if (!j.is_object() || !j["waiting"].is_array() || j["waiting"].empty()) return false;
        waiting = j["waiting"][0];
        return true;
      },
      20s, 50ms))
      << "the third GPU's run was not queued";
  EXPECT_EQ(waiting["name"], "queued");
  EXPECT_EQ(waiting["owner"]["user"], a->name);
  EXPECT_FALSE(fs::exists(marker)) << "it ran beyond the quota";
  end(pid);  // a's 2 GPUs come back: the queued run fits its quota again
  EXPECT_EQ(gf::platform::wait_exit_code(*queued), 0);
  EXPECT_TRUE(fs::exists(marker));
}

// Issue 20, finding 4, through the real agent and its config file: a user's long run on 8 GPUs with a
// long command line is recorded (its series thinned, its command cut, under the agent's 16 KiB), and
// with max_jobs_per_user 2 a third run pushes out the user's oldest finished record.
TEST_F(SharedNode, AUsersJobRecordsAreFittedAndCappedFromTheConfig) {
  ASSERT_NO_FATAL_FAILURE(restart_with_config(R"({"max_jobs_per_user": 2, "job_retention": "30d"})"));
  std::vector<std::string> long_run{"run",  "--gpus", "8",  "--interval", "0.05",    "--name",
                                    "long", "--",     "sh", "-c",         "sleep 2", "sh"};
  for (int i = 0; i < 300; ++i) long_run.push_back("--option-" + std::to_string(i) + "=0123456789");
  auto r = gf(long_run, &*a);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("cannot record"), std::string::npos) << r.err;
  auto mine = [&] {
    auto l = gf({"jobs", "--json"}, &*a);
    std::vector<json> out;
    for (const auto& j : json::parse(l.out, nullptr, false))
      if (j.is_object() && j.value("user", "") == a->name) out.push_back(j);
    return out;
  };
  auto jobs = mine();
  ASSERT_EQ(jobs.size(), 1u);
  const json& rec = jobs[0];
  EXPECT_EQ(rec["status"], "succeeded");
  EXPECT_EQ(rec["command_truncated"], true);
  const json& mon = rec["metrics"]["gpu_monitoring"];
  ASSERT_TRUE(mon.contains("series")) << mon.dump().substr(0, 400);
  EXPECT_TRUE(mon.contains("series_thinned_from")) << "8 GPUs at 20 samples a second do not fit whole";
  EXPECT_EQ(mon["gpu_stats"].size(), 8u);
  EXPECT_LE(rec.dump().size(), 16u * 1024);

  for (const char* name : {"second", "third"}) {
    auto s = gf({"run", "--gpus", "1", "--name", name, "--", "true"}, &*a);
    ASSERT_EQ(s.exit_code, 0) << s.err;
  }
  jobs = mine();
  ASSERT_EQ(jobs.size(), 2u) << "max_jobs_per_user 2";
  EXPECT_EQ(jobs[0]["name"], "third");
  EXPECT_EQ(jobs[1]["name"], "second") << "the oldest finished record made room";
}

// Done-when (idle-lease reclaim) through the real agent: the CLI attached to its lease (`run`) prints
// the agent's reclaim warning on stderr, then that the lease ended, while its command runs on.
TEST_F(SharedNode, TheCliAttachedToAnIdleLeaseHearsTheReclaimWarning) {
  ASSERT_NO_FATAL_FAILURE(restart_with_config(
      R"({"reclaim": {"enabled": true, "utilization_threshold_pct": 5, "idle_for": 1, "grace": 1}})",
      {"--interval", "0.2"}));
  // The simulator's GPUs stay at 0 % and run no process of gf-test-a: the lease is idle throughout.
  auto r = gf({"run", "--gpus", "1", "--name", "idle", "--", "sleep", "6"}, &*a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto warned = r.err.find(" has been idle for ");
  ASSERT_NE(warned, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("will be released"), std::string::npos) << r.err;
  EXPECT_NE(r.err.rfind("gpufleet: lease ", warned), std::string::npos) << r.err;
  const auto ended = r.err.find("ended: idle: reclaimed");
  EXPECT_NE(ended, std::string::npos) << r.err;
  EXPECT_LT(warned, ended) << "the warning comes first: " << r.err;
}

// The concurrent runs of TwoUsersFiftyConcurrentRunsNeverShareAGpu: each user's `run --gpus 1` writes
// "<CUDA_VISIBLE_DEVICES> <start ns> <end ns>" of its command into dir/out/<user>-<i>.
struct ConcurrentRuns : SharedNode {
  static constexpr int kPerUser = 50;
  std::vector<std::pair<std::string, pid_t>> jobs;             // output file, pid
  std::map<std::string, std::pair<long long, long long>> ran;  // job name -> its command's own start, end (ns)

  void start_runs() {
    for (int i = 0; i < kPerUser; ++i)
      for (const TestUser* u : {&*a, &*b}) {
        const std::string name = u->name + "-" + std::to_string(i);
        const std::string out = (dir / "out" / name).string();
        auto pid = gf::platform::spawn_inheriting(u->as(
            cli({"run", "--gpus", "1", "--wait", "300", "--min-memory-mb", "1000", "--name", name, "--", "sh", "-c",
                 "s=$(date +%s%N); sleep 0.05; echo \"$CUDA_VISIBLE_DEVICES $s $(date +%s%N)\" > " + out})));
        ASSERT_TRUE(pid) << pid.error().message;
        jobs.emplace_back(out, *pid);
      }
  }
  // Reads every run's output into `ran`; no two runs on one GPU overlap.
  void expect_no_gpu_held_twice() {
    std::map<std::string, std::vector<std::pair<long long, long long>>> by_gpu;
    for (const auto& j : jobs) {
      std::ifstream in(j.first);
      std::string gpu;
      long long s = 0, e = 0;
      ASSERT_TRUE(in >> gpu >> s >> e) << j.first << ": the job left no record";
      by_gpu[gpu].push_back({s, e});
      ran[fs::path(j.first).filename().string()] = {s, e};
    }
    EXPECT_LE(by_gpu.size(), 8u);
    for (auto& [gpu, iv] : by_gpu) {
      std::sort(iv.begin(), iv.end());
      for (std::size_t k = 1; k < iv.size(); ++k) EXPECT_LE(iv[k - 1].second, iv[k].first) << "overlap on GPU " << gpu;
    }
  }
  // Every record is there, succeeded, and owned by its runner's uid (read from the agent's store as root).
  void expect_records_owned_by_their_runners() {
    auto rows = gf::platform::run_process(
        {"sqlite3", "-readonly", "-separator", " ", db, "SELECT name, status, owner_uid FROM experiments"},
        gf::platform::RunOptions{30s});
    ASSERT_TRUE(rows);
    ASSERT_EQ(rows->exit_code, 0) << rows->err;
    std::istringstream in(rows->out);
    int seen = 0;
    for (std::string name, status, uid; in >> name >> status >> uid; ++seen) {
      EXPECT_EQ(status, "succeeded") << name;
      const TestUser& u = name.rfind(a->name + "-", 0) == 0 ? *a : *b;
      EXPECT_EQ(uid, std::to_string(u.uid)) << name;
    }
    EXPECT_EQ(seen, 2 * kPerUser);
  }
  // Per owner uid, the GPU-seconds the store's ended leases were held.
  std::map<std::string, double> held_in_store() const {
    std::map<std::string, double> out;
    auto r = gf::platform::run_process(
        {"sqlite3", "-readonly", "-separator", " ", db,
         "SELECT owner_uid, SUM((released_ms - created_ms) * (SELECT COUNT(*) FROM lease_gpus g WHERE g.lease_id = "
         "leases.id)) FROM leases WHERE released_ms IS NOT NULL GROUP BY owner_uid"},
        gf::platform::RunOptions{30s});
    if (!r || r->exit_code != 0) return out;
    std::istringstream rows_in(r->out);
    for (std::string uid, ms; rows_in >> uid >> ms;) out[uid] = std::stod(ms) / 1000.0;
    return out;
  }
  // The ledger writes a lease's row when a reading shows it ended: waits (bounded) for all of them, so
  // that no lease is still counted only up to the ledger's latest reading. (Waiting only for the usage
  // rows to list every lease left the last few counted that way: up to a second short each.) One line
  // per run: name, started, ended, lease created, released, held and busy GPU-seconds.
  std::string ledger_rows() const {
    std::string per_job;
    EXPECT_TRUE(eventually(
        [&] {
          auto r = gf::platform::run_process(
              {"sqlite3", "-readonly", "-separator", " ", db,
               "SELECT e.name, e.started_ms, e.ended_ms, l.created_ms, l.released_ms, u.held_gpu_s, u.busy_gpu_s "
               "FROM experiments e JOIN leases l ON l.id = e.lease_id JOIN lease_usage u ON u.lease_id = e.lease_id "
               "WHERE u.released_at_ms IS NOT NULL"},
              gf::platform::RunOptions{30s});
          if (!r || r->exit_code != 0) return false;
          per_job = r->out;
          return std::count(per_job.begin(), per_job.end(), '\n') >= 2 * kPerUser;
        },
        30s, 50ms))
        << "the ledger recorded only some of the leases:\n"
        << per_job;
    return per_job;
  }
  // `gpufleet usage --by user` (through the agent socket) against the store's lease times, per user.
  void expect_usage_matches_the_store(const std::map<std::string, double>& store_held) {
    json usage;
    const bool settled = eventually(
        [&] {
          auto r = gf({"usage", "--by", "user", "--since", "1h", "--json"});
          usage = json::parse(r.out, nullptr, false);
          if (!usage.is_object() || !usage["rows"].is_array() || usage["rows"].size() != 2) return false;
          for (const auto& row : usage["rows"])
            if (row["leases"] != kPerUser) return false;
          return true;
        },
        30s, 50ms);
    ASSERT_TRUE(settled) << usage.dump();
    for (const auto& row : usage["rows"]) {
      const TestUser& u = row["key"] == a->name ? *a : *b;
      ASSERT_TRUE(row["key"] == a->name || row["key"] == b->name) << row.dump();
      const auto it = store_held.find(std::to_string(u.uid));
      ASSERT_NE(it, store_held.end()) << u.name;
      // Within one sampling interval (1 s), as the issue asks: a lease the ledger has not yet seen end
      // counts up to its latest reading.
      EXPECT_NEAR(row["held_gpu_s"].get<double>(), it->second, 1.0) << u.name;
      EXPECT_LE(row["busy_gpu_s"].get<double>(), row["held_gpu_s"].get<double>()) << u.name;
    }
  }
  // Lease by lease: the ledger's held time of each run's lease (lease_usage) against the run's job record
  // (started..ended, written by the CLI around its command) within one sampling interval; the command's
  // own start and end (its output) inside the lease; busy time never above held time.
  void expect_each_run_inside_its_lease(const std::string& per_job) {
    std::istringstream jobs_in(per_job);
    int checked = 0;
    std::map<std::string, double> command_s, held_s;  // per user
    std::string name;
    long long started = 0, ended = 0, created = 0, released = 0;
    double held = 0, busy = 0;
    while (jobs_in >> name >> started >> ended >> created >> released >> held >> busy) {
      ++checked;
      const auto r = ran.find(name);
      ASSERT_NE(r, ran.end()) << name << " has a job record but left no output";
      const long long cmd_start_ms = r->second.first / 1000000, cmd_end_ms = r->second.second / 1000000;
      EXPECT_LE(created, cmd_start_ms) << name << ": the command started before its lease";
      EXPECT_LE(cmd_end_ms, released) << name << ": the command ended after its lease";
      EXPECT_NEAR(held, static_cast<double>(ended - started) / 1000.0, 1.0)
          << name << ": the ledger's held time against the run's own record";
      EXPECT_LE(busy, held) << name;
      const double cmd = static_cast<double>(r->second.second - r->second.first) / 1e9;
      EXPECT_LE(cmd, held + 0.001) << name << ": the command ran longer than its lease was held";
      const std::string user = name.substr(0, name.rfind('-'));
      command_s[user] += cmd;
      held_s[user] += held;
    }
    EXPECT_EQ(checked, 2 * kPerUser) << per_job;
    for (const auto& [user, cmd] : command_s) EXPECT_LE(cmd, held_s[user]) << user;
  }
};

// Done-when: two users x 50 concurrent `run --gpus 1` on 8 fake GPUs: no GPU is ever held twice, every job
// runs and succeeds, and each job record belongs to the user who ran it.
TEST_F(ConcurrentRuns, TwoUsersFiftyConcurrentRunsNeverShareAGpu) {
  // 100 CLI processes start at once on a 2-core machine (under the sanitizers, 2-3 times slower): the
  // agent answers all of them, but not always within the default 3 s. This test is about exclusivity
  // and accounting; FrozenAgentIsNotAnswering covers the limit itself.
  setenv("GPUFLEET_AGENT_TIMEOUT", "60", 1);
  start_runs();
  if (HasFatalFailure()) return;
  int failures = 0;
  for (const auto& j : jobs)
    if (gf::platform::wait_exit_code(j.second) != 0) ++failures;
  EXPECT_EQ(failures, 0);
  expect_no_gpu_held_twice();
  if (HasFatalFailure()) return;
  EXPECT_TRUE(active_leases().empty());
  expect_records_owned_by_their_runners();
  if (HasFatalFailure()) return;

  // The accounting sums to the time the jobs held their GPUs: per user, the GPU-seconds held that
  // `gpufleet usage` reports against the leases' own times in the store. Held time comes from the lease
  // times, so the two agree to rounding once the ledger has seen every lease end (at its next reading:
  // the check waits for that, bounded).
  const auto store_held = held_in_store();
  ASSERT_EQ(store_held.size(), 2u) << "the leases of both users are in the store";
  const std::string per_job = ledger_rows();
  expect_usage_matches_the_store(store_held);
  if (HasFatalFailure()) return;
  expect_each_run_inside_its_lease(per_job);
}

}  // namespace
