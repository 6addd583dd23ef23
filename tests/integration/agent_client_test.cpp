// The CLI's side of the agent socket (docs/agent-socket.md), the real binary against a stand-in agent: a
// thread in this test that listens on a temp Unix socket and answers the protocol's lines as scripted.
// What the agent decides is not tested here (the real agent's tests and shared_node_test.cpp do that);
// what the client does with each answer is: errors passed through with their kind, a silent or broken
// agent, the order of run's requests, Ctrl-C while waiting.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
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

// A script's line that closes the connection instead of being sent.
const std::string kClose = "<close>";

// Answers: the lines to send back for one request (replies and events; a raw string is sent as is).
using Script = std::function<std::vector<std::string>(const json& request)>;

class StandInAgent {
 public:
  StandInAgent(std::string path, Script script, bool greet = true)
      : path_(std::move(path)), script_(std::move(script)), greet_(greet) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    ::unlink(path_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 64) == 0;
    if (ok_) thread_ = std::thread([this] { loop(); });
  }
  ~StandInAgent() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& t : conns_) t.join();
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return ok_; }
  std::vector<json> requests() {
    std::lock_guard l(mu_);
    return requests_;
  }
  // Waits (bounded) until a request with this op arrived.
  bool wait_for_op(const std::string& op, std::chrono::seconds limit = 20s) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, limit, [&] {
      for (const auto& r : requests_)
        if (r.value("op", "") == op) return true;
      return false;
    });
  }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      conns_.emplace_back([this, c] { serve(c); });
    }
  }
  void send_line(int c, const std::string& s) {
    const std::string line = s + "\n";
    (void)!::send(c, line.data(), line.size(), MSG_NOSIGNAL);
  }
  void serve(int c) {
    if (greet_)
      send_line(c,
                json{{"hello", "gpufleet-agent"},
                     {"protocol", 1},
                     {"version", "stand-in"},
                     {"peer", {{"uid", ::getuid()}, {"gid", ::getgid()}, {"pid", 1}, {"user", "me"}, {"admin", false}}}}
                    .dump());
    std::string buf;
    while (!stop_) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::recv(c, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<std::size_t>(n));
      for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n')) {
        json req = json::parse(buf.substr(0, nl), nullptr, false);
        buf.erase(0, nl + 1);
        {
          std::lock_guard l(mu_);
          requests_.push_back(req);
        }
        cv_.notify_all();
        for (const auto& out : script_(req)) {
          if (out == kClose) {
            ::close(c);
            return;
          }
          send_line(c, out);
        }
      }
    }
    ::close(c);
  }

  std::string path_;
  Script script_;
  bool greet_;
  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> conns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> requests_;
};

std::string ok_reply(const json& req, json extra = json::object()) {
  extra["id"] = req["id"];
  extra["ok"] = true;
  return extra.dump();
}
std::string error_reply(const json& req, const std::string& kind, const std::string& msg) {
  return json{{"id", req["id"]}, {"ok", false}, {"error", {{"kind", kind}, {"message", msg}}}}.dump();
}
json a_lease(const std::string& id, std::vector<unsigned> gpus, const std::string& user = "me") {
  json g = json::array();
  for (unsigned i : gpus) g.push_back({{"index", i}, {"uuid", "GPU-" + std::to_string(i)}});
  return {{"id", id},
          {"job_id", "j"},
          {"name", "n"},
          {"gpus", g},
          {"owner", {{"pid", 42}, {"user", user}}},
          {"created_at", "2025-01-02T03:04:05.678Z"},
          {"released_at", nullptr},
          {"release_reason", nullptr}};
}

struct AgentClient : ::testing::Test {
  gf::test::TempDir tmp;
  const fs::path dir = tmp.path();
  std::string sock = (dir / "agent.sock").string();
  void SetUp() override {
    setenv("GPUFLEET_SOCKET", sock.c_str(), 1);
    setenv("GPUFLEET_SIM_SCENARIO", GF_FIXTURES_DIR "/sim/two_idle.json", 1);
    unsetenv("GPUFLEET_DB");
  }
  void TearDown() override {
    setenv("GPUFLEET_SOCKET", "none", 1);  // back to no_ambient_agent.cpp's setting
    unsetenv("GPUFLEET_SIM_SCENARIO");     // other suites in this binary expect the default scenario
  }
  static gf::platform::ProcessOutput gf(std::vector<std::string> args) {
    args.insert(args.begin(), {GF_BINARY, "--backend", "sim"});
    auto r = gf::platform::run_process(args, gf::platform::RunOptions{60s});
    EXPECT_TRUE(r);
    return r ? *r : gf::platform::ProcessOutput{};
  }
};

TEST_F(AgentClient, ReleaseOfAnotherUsersLeaseShowsTheAgentsPermissionError) {
  StandInAgent agent(sock, [](const json& r) {
    return std::vector<std::string>{error_reply(r, "permission", "lease L1 belongs to alice (uid 1001)")};
  });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"release", "L1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("lease L1 belongs to alice"), std::string::npos) << r.err;
  ASSERT_EQ(agent.requests().size(), 1u);
  EXPECT_EQ(agent.requests()[0]["op"], "release");
  EXPECT_EQ(agent.requests()[0]["lease"], "L1");
}

TEST_F(AgentClient, LeasesComeFromTheAgentNotAStore) {
  StandInAgent agent(sock, [](const json& r) {
    json waiting = json::array(
        {{{"id", "w1"}, {"name", "queued"}, {"priority", 0}, {"gpus", 2}, {"owner", {{"pid", 7}, {"user", "bob"}}}}});
    return std::vector<std::string>{
        ok_reply(r, {{"leases", json::array({a_lease("L7", {3, 5}, "alice")})}, {"waiting", waiting}})};
  });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"leases", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  ASSERT_EQ(j["leases"].size(), 1u);
  EXPECT_EQ(j["leases"][0]["id"], "L7");
  EXPECT_EQ(j["leases"][0]["owner"]["user"], "alice");
  // Parsed and written back: the same instant (wire::iso8601 writes microseconds).
  EXPECT_EQ(j["leases"][0]["created_at"].get<std::string>().rfind("2025-01-02T03:04:05.678", 0), 0u);
  EXPECT_EQ(j["waiting"][0]["name"], "queued");
  EXPECT_FALSE(fs::exists(dir / "gf.db"));
}

TEST_F(AgentClient, DbWithAnAgentIsRefusedBecauseItWouldBypassIt) {
  StandInAgent agent(sock, [](const json& r) { return std::vector<std::string>{ok_reply(r)}; });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"leases", "--db", (dir / "mine.db").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("would bypass"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "mine.db"));
}

// Finding "a frozen agent blocks every CLI command for 30 s": an agent that greets and then never
// answers, and one that never even greets, both end in "not answering" and exit 1, within 10 s (the
// CLI's own limits are 3 s to connect and 5 s of silence; 10 s bounds the hang, it is no timing).
TEST_F(AgentClient, SilentAgentIsNotAnswering) {
  unsetenv("GPUFLEET_AGENT_TIMEOUT");
  StandInAgent agent(sock, [](const json&) { return std::vector<std::string>{}; });
  ASSERT_TRUE(agent.ok());
  const auto start = std::chrono::steady_clock::now();
  auto r = gf({"leases"});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the agent at " + sock + " is not answering"), std::string::npos) << r.err;
  EXPECT_LT(took, 10s) << "the CLI gave up after " << std::chrono::duration<double>(took).count() << " s";
}

TEST_F(AgentClient, AgentThatNeverGreetsIsNotAnswering) {
  unsetenv("GPUFLEET_AGENT_TIMEOUT");
  StandInAgent agent(
      sock, [](const json&) { return std::vector<std::string>{}; }, /*greet=*/false);
  ASSERT_TRUE(agent.ok());
  const auto start = std::chrono::steady_clock::now();
  auto r = gf({"jobs"});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not answering"), std::string::npos) << r.err;
  EXPECT_LT(took, 10s) << "the CLI gave up after " << std::chrono::duration<double>(took).count() << " s";
}

TEST_F(AgentClient, MalformedLineIsAnErrorNotACrash) {
  StandInAgent agent(sock, [](const json&) { return std::vector<std::string>{"this is not JSON {"}; });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"leases"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("malformed"), std::string::npos) << r.err;
}

TEST_F(AgentClient, RunTakesItsLeaseFromTheAgentAndRecordsThroughIt) {
  StandInAgent agent(sock, [](const json& r) {
    const std::string op = r.value("op", "");
    if (op == "job_put") return std::vector<std::string>{ok_reply(r, {{"job_id", r["job"].value("id", "agent-id")}})};
    if (op == "acquire") {
      json ev{{"id", r["id"]},          {"event", "waiting"}, {"waited_s", 1.0},
              {"why", "GPU 5 is busy"}, {"ahead", 0},         {"holders", json::array({a_lease("L0", {5}, "alice")})}};
      json gi{{"count", 1}, {"model", "Stand-in"}};
      return std::vector<std::string>{
          ev.dump(), ok_reply(r, {{"lease", a_lease("L9", {5})}, {"why", {"stand-in"}}, {"gpu_info", gi}})};
    }
    return std::vector<std::string>{ok_reply(r)};
  });
  ASSERT_TRUE(agent.ok());
  const std::string out = (dir / "visible").string();
  auto r =
      gf({"run", "--gpus", "1", "--json", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES $GPUFLEET_LEASE > " + out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out);
  std::string gpu, lease;
  in >> gpu >> lease;
  EXPECT_EQ(gpu, "5");  // the agent's choice, not a local one
  EXPECT_EQ(lease, "L9");
  EXPECT_NE(r.err.find("GPU 5 by n (alice)"), std::string::npos) << "the waiting event reaches the reporter: " << r.err;
  std::vector<std::string> ops;
  for (const auto& q : agent.requests())
    ops.push_back(q.value("op", "") + (q.contains("job") ? ":" + q["job"].value("status", "") : ""));
  EXPECT_EQ(
      ops, (std::vector<std::string>{"job_put:waiting", "acquire", "job_put:running", "release", "job_put:succeeded"}));
  const auto reqs = agent.requests();
  EXPECT_EQ(reqs[1]["tie"], "connection");
  EXPECT_EQ(reqs[3]["lease"], "L9");
  EXPECT_EQ(reqs[4]["job"]["exit_code"], 0);
  EXPECT_EQ(reqs[4]["job"]["record"]["gpu_info"]["model"], "Stand-in");
  EXPECT_EQ(json::parse(r.out)["lease_id"], "L9");
}

TEST_F(AgentClient, AllocTiesTheLeaseToTheCallingShell) {
  StandInAgent agent(sock, [](const json& r) {
    return std::vector<std::string>{ok_reply(r, {{"lease", a_lease("L3", {2, 3})}, {"why", {"because"}}})};
  });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"alloc", "--gpus", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("export CUDA_VISIBLE_DEVICES=2,3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("export GPUFLEET_LEASE=L3\n"), std::string::npos) << r.out;
  ASSERT_EQ(agent.requests().size(), 1u);
  EXPECT_EQ(agent.requests()[0]["tie"], "parent");
  EXPECT_EQ(agent.requests()[0]["gpus"], 2);
}

// Review of issue 12: `eval "$(gpufleet alloc)"` must never run what an agent put in a lease id.
TEST_F(AgentClient, AllocPrintsNoShellCodeForALeaseIdThatIsNotPlainText) {
  StandInAgent agent(sock, [](const json& r) {
    return std::vector<std::string>{ok_reply(r, {{"lease", a_lease("x; touch /tmp/pwned #", {2})}})};
  });
  ASSERT_TRUE(agent.ok());
  auto r = gf({"alloc", "--gpus", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.find("export"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("not plain text"), std::string::npos) << r.err;
}

// Review of issue 12: a socket that another user serves where ours would be (planted in /tmp when there
// is no XDG_RUNTIME_DIR) is not talked to: it would hear our commands and answer for the agent.
TEST_F(AgentClient, ASocketServedByAnotherUserIsRefused) {
  std::string why;
  auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  fs::permissions(dir, fs::perms(0777));
  const std::string planted = (dir / "planted.sock").string();
  const std::string ready = (dir / "ready").string();
  // gf-test-b serves a perfect greeting and would answer anything.
  auto pid = gf::platform::spawn_inheriting(
      b->as({"/usr/bin/python3", "-c",
             "import socket,sys,os\n"
             "s=socket.socket(socket.AF_UNIX);s.bind(sys.argv[1]);s.listen(4);open(sys.argv[2],'w').close()\n"
             "while True:\n"
             " c,_=s.accept();c.sendall(b'{\"hello\":\"gpufleet-agent\",\"protocol\":1}\\n')\n",
             planted, ready}));
  ASSERT_TRUE(pid) << pid.error().message;
  ASSERT_TRUE(gf::test::eventually([&] { return fs::exists(ready); }, 5s, 25ms)) << "the planted agent did not start";
  auto r = gf({"--socket", planted, "leases"});
  ::kill(*pid, SIGKILL);
  (void)gf::platform::wait_exit_code(*pid);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("neither root nor you"), std::string::npos) << r.err;
}

TEST_F(AgentClient, CtrlCWhileWaitingSendsCancel) {
  std::atomic<bool> cancelled{false};
  StandInAgent agent(sock, [&cancelled](const json& r) {
    const std::string op = r.value("op", "");
    if (op == "acquire") {
      return std::vector<std::string>{
          json{{"id", r["id"]}, {"event", "waiting"}, {"waited_s", 0.0}, {"why", "busy"}, {"ahead", 0}}.dump()};
    }
    if (op == "cancel") {
      cancelled = true;
      return std::vector<std::string>{error_reply({{"id", r["target"]}}, "unavailable", "cancelled"), ok_reply(r)};
    }
    return std::vector<std::string>{ok_reply(r, {{"job_id", "j1"}})};
  });
  ASSERT_TRUE(agent.ok());
  auto pid = gf::platform::spawn_inheriting({GF_BINARY, "--backend", "sim", "run", "--gpus", "1", "--", "true"});
  ASSERT_TRUE(pid);
  ASSERT_TRUE(agent.wait_for_op("acquire"));
  ::kill(*pid, SIGINT);
  EXPECT_EQ(gf::platform::wait_exit_code(*pid), 130);
  EXPECT_TRUE(cancelled.load());
  const auto reqs = agent.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back()["op"], "job_put");
  EXPECT_EQ(reqs.back()["job"]["status"], "interrupted");
}

// The agent goes away while the job runs: the client says so on stderr, the job goes on to its end and
// its exit status is run's.
TEST_F(AgentClient, ConnectionDropWhileTheJobRunsIsReportedAndTheJobGoesOn) {
  StandInAgent agent(sock, [](const json& r) {
    const std::string op = r.value("op", "");
    if (op == "acquire") return std::vector<std::string>{ok_reply(r, {{"lease", a_lease("L1", {0})}}), kClose};
    return std::vector<std::string>{ok_reply(r, {{"job_id", "j1"}})};
  });
  ASSERT_TRUE(agent.ok());
  const std::string flag = (dir / "finished").string();
  auto r = gf({"run", "--gpus", "1", "--", "sh", "-c", "sleep 0.5; touch " + flag + "; exit 4"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_TRUE(fs::exists(flag));
  EXPECT_NE(r.err.find("dropped while job"), std::string::npos) << r.err;
}

// `show` and `jobs` read the agent's records (wire::job_json: the record with id, status and ISO times).
TEST_F(AgentClient, ShowAndJobsReadTheAgentsRecords) {
  const json record{{"id", "J1"},
                    {"name", "train"},
                    {"status", "succeeded"},
                    {"exit_code", 0},
                    {"started_at", "2025-01-02T03:04:05.000000Z"},
                    {"ended_at", "2025-01-02T03:04:07.500000Z"},
                    {"command", {"python", "train.py"}}};
  StandInAgent agent(sock, [&record](const json& r) {
    if (r.value("op", "") == "job") {
      if (r.value("job", "") != "J1") return std::vector<std::string>{error_reply(r, "not_found", "no job")};
      return std::vector<std::string>{ok_reply(r, {{"job", record}})};
    }
    return std::vector<std::string>{ok_reply(r, {{"jobs", json::array({record})}})};
  });
  ASSERT_TRUE(agent.ok());
  auto show = gf({"show", "J1"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("job J1  train  status succeeded  exit 0"), std::string::npos) << show.out;
  EXPECT_EQ(gf({"show", "J2"}).exit_code, 1);
  auto jobs = gf({"jobs"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("2.5"), std::string::npos) << "seconds from the ISO times: " << jobs.out;
  EXPECT_NE(jobs.out.find("train"), std::string::npos) << jobs.out;
  ASSERT_GE(agent.requests().size(), 2u);
  EXPECT_EQ(agent.requests()[0]["job"], "J1");  // the job's id travels as "job", not as the request's "id"
}

}  // namespace
