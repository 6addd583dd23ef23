// The agent socket with real clients (issue 12): the peer is what SO_PEERCRED says, a second Unix
// user cannot release another's lease, and a client in another PID namespace keeps its lease.
#include "server/agent_socket.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/http.hpp"
#include "store/node_store.hpp"
#include "support/agent_rig.hpp"
#include "support/scripted_backend.hpp"
#include "support/test_users.hpp"

namespace gf::server {
namespace {

using nlohmann::json;

// In a forked child: only system calls on buffers made before the fork (the parent has threads).
// Connects, reads the greeting, sends each request and reads one line back for each; everything read
// goes to out_fd. Returns false on any failure.
bool child_session(const char* path, const std::vector<std::string>& requests, int out_fd) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
  auto read_line = [&]() {
    char ch = 0;
    while (::read(fd, &ch, 1) == 1) {
      if (::write(out_fd, &ch, 1) != 1) return false;
      if (ch == '\n') return true;
    }
    return false;
  };
  if (!read_line()) return false;
  for (const auto& r : requests) {
    if (::write(fd, r.data(), r.size()) != static_cast<ssize_t>(r.size())) return false;
    if (!read_line()) return false;
  }
  return true;
}

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(json::parse(line, nullptr, false));
  return out;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Runs child_session as user `b` in a forked child. ok: the child connected, sent every request and
// read a line for each; text: everything it read.
struct AsUser {
  bool ok = false;
  std::string text;
};
AsUser session_as(const test::TestUser& b, const std::string& path, const std::vector<std::string>& requests) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  const pid_t child = ::fork();
  if (child < 0) return {};
  if (child == 0) {
    ::close(out[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(b.gid) != 0 || ::setuid(b.uid) != 0) ::_exit(2);
    ::_exit(child_session(path.c_str(), requests, out[1]) ? 0 : 1);
  }
  ::close(out[1]);
  AsUser r;
  r.text = read_all(out[0]);
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

struct AgentSocketTest : ::testing::Test {
  test::TempDir dir;
  std::unique_ptr<node::Arbiter> arbiter;
  Router router;              // for `get`: routes a test adds, then restart(&router)
  std::promise<void> let_go;  // a test's blocking route waits for it; TearDown sets it
  std::unique_ptr<AgentSocket> sock;
  std::string path;

  void restart(AgentSocketOptions o) {
    sock->stop();
    o.path = path;
    o.version = "test";
    auto s = AgentSocket::start(*arbiter, &router, o);
    ASSERT_TRUE(s) << s.error().message;
    sock = std::move(*s);
  }

  void SetUp() override {
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // the second user must reach the socket
    // The real liveness check: a lease whose owner the store cannot see would be reaped.
    auto st = store::NodeStore::open((dir.path() / "gf.db").string());
    ASSERT_TRUE(st) << st.error().message;
    auto snap = std::make_shared<core::Snapshot>();
    for (unsigned i = 0; i < 2; ++i) snap->gpus.push_back(test::make_gpu(i, 0, 1000));
    node::ReadingSource rs;
    rs.latest = [snap] { return std::pair{core::SnapshotPtr(snap), std::chrono::steady_clock::now()}; };
    arbiter = std::make_unique<node::Arbiter>(std::move(*st), std::move(rs));
    path = (dir.path() / "run" / "agent.sock").string();
    AgentSocketOptions o;
    o.path = path;
    o.version = "test";
    auto s = AgentSocket::start(*arbiter, nullptr, o);
    ASSERT_TRUE(s) << s.error().message;
    sock = std::move(*s);
  }
  void TearDown() override {
    try {
      let_go.set_value();
    } catch (const std::future_error&) {
      // set by the test
    }
    if (sock) sock->stop();
  }
};

// Finding "user B releases user A's lease" (`gpufleet release`), through the socket as a real second
// user: the agent sees B's uid from the kernel and refuses, naming the owner.
TEST_F(AgentSocketTest, OtherUserCannotRelease) {
  std::string why;
  auto b = test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  node::Peer root{0, 0, static_cast<std::uint32_t>(::getpid()), "root", true};
  node::AcquireRequest req;
  req.need.min_free_memory_mib = 1000;
  core::LeaseOwner self{static_cast<std::uint32_t>(::getpid()), 0, "root"};
  auto lease = arbiter->acquire_for(root, req, self);
  ASSERT_TRUE(lease) << lease.error().message;
  const std::string id = lease->lease.id;

  const std::vector<std::string> requests = {json{{"id", 1}, {"op", "release"}, {"lease", id}}.dump() + "\n"};
  const auto [ok, text] = session_as(*b, path, requests);
  ASSERT_TRUE(ok) << text;
  auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 2u) << text;
  EXPECT_EQ(lines[0]["peer"]["uid"], b->uid) << "SO_PEERCRED, not anything the client said";
  EXPECT_EQ(lines[0]["peer"]["user"], "gf-test-b");
  EXPECT_EQ(lines[0]["peer"]["admin"], false);
  EXPECT_EQ(lines[1]["ok"], false);
  EXPECT_EQ(lines[1]["error"]["kind"], "permission");
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("belongs to root (uid 0)"), std::string::npos) << text;
  auto active = arbiter->leases(false);
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u) << "the lease is still root's";
}

// Issue 20, finding 6: under --auth-read, a non-admin's `leases`, `jobs` and `job` show only their own
// records: root's lease and job stay hidden from user B.
TEST_F(AgentSocketTest, AuthReadShowsANonAdminOnlyTheirOwnRecords) {
  std::string why;
  auto b = test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  sock->stop();
  AgentSocketOptions o;
  o.path = path;
  o.version = "test";
  o.auth_read = true;
  auto restarted = AgentSocket::start(*arbiter, nullptr, o);
  ASSERT_TRUE(restarted) << restarted.error().message;
  sock = std::move(*restarted);
  node::Peer root{0, 0, static_cast<std::uint32_t>(::getpid()), "root", true};
  node::AcquireRequest req;
  req.need.min_free_memory_mib = 1000;
  ASSERT_TRUE(arbiter->acquire_for(root, req, core::LeaseOwner{static_cast<std::uint32_t>(::getpid()), 0, "root"}));
  core::Job j;
  j.status = "running";
  auto job = arbiter->job_put(root, j);
  ASSERT_TRUE(job) << job.error().message;

  const std::vector<std::string> requests = {json{{"id", 1}, {"op", "leases"}}.dump() + "\n",
                                             json{{"id", 2}, {"op", "jobs"}}.dump() + "\n",
                                             json{{"id", 3}, {"op", "job"}, {"job", *job}}.dump() + "\n"};
  const auto [ok, text] = session_as(*b, path, requests);
  ASSERT_TRUE(ok) << text;
  auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), 4u) << text;
  ASSERT_EQ(lines[1]["ok"], true) << text;
  ASSERT_EQ(lines[2]["ok"], true) << text;
  EXPECT_TRUE(lines[1].at("leases").empty()) << "root's lease is not B's: " << text;
  EXPECT_TRUE(lines[2].at("jobs").empty()) << "root's job is not B's: " << text;
  EXPECT_EQ(lines[3]["ok"], false) << text;
  EXPECT_EQ(lines[3]["error"]["kind"], "permission") << text;
}

// Finding "a lease taken inside a container or another PID namespace is reaped as owner gone": the
// kernel gives the agent the client's host pid, so the store's liveness check finds it running.
TEST_F(AgentSocketTest, PidNamespaceKeepsLease) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a PID namespace";
  const std::vector<std::string> requests = {
      json{{"id", 1}, {"op", "acquire"}, {"gpus", 1}, {"min_memory_mib", 1000}}.dump() + "\n"};
  int out[2], pid_pipe[2], hold[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(pid_pipe, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(hold, O_CLOEXEC), 0);
  const std::string p = path;
  const pid_t mid = ::fork();
  ASSERT_GE(mid, 0);
  if (mid == 0) {
    ::close(out[0]);
    ::close(pid_pipe[0]);
    ::close(hold[1]);
    if (::unshare(CLONE_NEWPID) != 0) ::_exit(3);
    const pid_t inner = ::fork();
    if (inner == 0) {
      // pid 1 of the new namespace; the agent must see the host pid.
      const bool ok = child_session(p.c_str(), requests, out[1]);
      ::close(out[1]);
      char c;
      (void)!::read(hold[0], &c, 1);  // keep the connection (and the lease) until the parent says
      ::_exit(ok ? 0 : 1);
    }
    std::int32_t v = inner;
    (void)!::write(pid_pipe[1], &v, sizeof v);
    ::close(out[1]);
    int st = 0;
    ::waitpid(inner, &st, 0);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 4);
  }
  ::close(out[1]);
  ::close(pid_pipe[1]);
  ::close(hold[0]);
  std::int32_t host_pid = 0;
  const bool got_pid = ::read(pid_pipe[0], &host_pid, sizeof host_pid) == static_cast<ssize_t>(sizeof host_pid);
  ::close(pid_pipe[0]);
  const auto text = read_all(out[0]);  // EOF once the inner client closed its end
  ::close(out[0]);
  auto lines = lines_of(text);
  if (!got_pid || lines.size() != 2u) {
    ::close(hold[1]);
    ::waitpid(mid, nullptr, 0);
    if (!got_pid) GTEST_SKIP() << "could not make a PID namespace here";
    FAIL() << text;
  }
  EXPECT_EQ(lines[0]["peer"]["pid"], host_pid) << "the host's pid, not 1";
  ASSERT_EQ(lines[1]["ok"], true) << text;
  EXPECT_EQ(lines[1]["lease"]["owner"]["pid"], host_pid);
  auto active = arbiter->leases(false);  // the store's liveness check runs here
  ASSERT_TRUE(active);
  EXPECT_EQ(active->size(), 1u) << "the owner runs: its lease stays";

  ::close(hold[1]);  // the client exits; its connection closes; the lease ends at once
  int st = 0;
  ::waitpid(mid, &st, 0);
  EXPECT_TRUE(test::eventually([&] {
    auto l = arbiter->leases(false);
    return l && l->empty();
  }));
}

TEST_F(AgentSocketTest, RefusesForeignPlaces) {
  const auto other = (dir.path() / "open").string();
  ASSERT_EQ(::mkdir(other.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(other.c_str(), 0777), 0);
  AgentSocketOptions o;
  o.path = other + "/agent.sock";
  auto s = AgentSocket::start(*arbiter, nullptr, o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(other), std::string::npos) << s.error().message;

  o.path = path;  // ours, and an agent listens there
  auto again = AgentSocket::start(*arbiter, nullptr, o);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("already listens"), std::string::npos) << again.error().message;
}

// A plain client for the fairness tests: connect, send lines, read lines with a deadline (a missing
// line fails the test instead of hanging it).
struct Client {
  int fd = -1;
  std::string buf;
  explicit Client(const std::string& path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~Client() {
    if (fd >= 0) ::close(fd);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  bool send(const json& j) {
    const std::string line = j.dump() + "\n";
    return ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  }
  // The next line, or a discarded json when none comes within the limit (10 s: generous, for ASan).
  json line(std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (auto nl = buf.find('\n'); nl != std::string::npos) {
        json j = json::parse(buf.substr(0, nl), nullptr, false);
        buf.erase(0, nl + 1);
        return j;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return json(json::value_t::discarded);
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n <= 0) return json(json::value_t::discarded);
      buf.append(chunk, static_cast<std::size_t>(n));
    }
  }
};

// Finding 3 of issue 20: a heavy read (here a `get` whose route does not return until the test lets it)
// runs off the socket's I/O thread, so meanwhile another client is greeted, granted a lease and answered.
TEST_F(AgentSocketTest, AHeavyReadHoldsNoOneElseUp) {
  auto entered = std::make_shared<std::promise<void>>();
  auto in_route = entered->get_future();
  auto go = let_go.get_future().share();
  router.add(Method::Get, "/slow", Access::Read, Exec::Blocking, [entered, go](const Request&) {
    entered->set_value();
    go.wait();
    return json_response(200, json{{"slow", true}});
  });
  restart({});

  Client slow(path);
  ASSERT_TRUE(slow.line().is_object());  // greeting
  ASSERT_TRUE(slow.send({{"id", 1}, {"op", "get"}, {"path", "/slow"}}));
  ASSERT_TRUE(slow.send({{"id", 2}, {"op", "leases"}}));  // queued behind the read, in order
  in_route.wait();

  Client other(path);
  const json hello = other.line();
  ASSERT_TRUE(hello.is_object()) << "no greeting while another client's read runs";
  ASSERT_TRUE(other.send({{"id", 7}, {"op", "acquire"}, {"gpus", 1}, {"min_memory_mib", 1000}}));
  const json granted = other.line();
  ASSERT_TRUE(granted.is_object()) << "no answer to acquire while another client's read runs";
  EXPECT_EQ(granted["ok"], true) << granted.dump();
  ASSERT_TRUE(other.send({{"id", 8}, {"op", "jobs"}}));
  EXPECT_EQ(other.line(std::chrono::milliseconds(300)).is_discarded(), true)
      << "one worker: another read waits for the one under way";

  let_go.set_value();
  const json first = slow.line();
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first["id"], 1);
  EXPECT_EQ(first["body"]["slow"], true) << first.dump();
  const json second = slow.line();
  EXPECT_EQ(second["id"], 2) << "replies stay in request order";
  EXPECT_EQ(other.line()["id"], 8);
}

// Finding 3: replies are capped in bytes. A `jobs` list stops at the cap and says so; a larger `get` body
// is refused with a reason.
TEST_F(AgentSocketTest, AReplyIsCappedInBytes) {
  node::Peer root{0, 0, static_cast<std::uint32_t>(::getpid()), "root", true};
  for (int i = 0; i < 10; ++i) {
    core::Job j;
    j.status = "succeeded";
    j.started_at_ms = i;
    j.record = json{{"pad", std::string(60000, 'A')}}.dump();
    ASSERT_TRUE(arbiter->job_put(root, j));
  }
  router.add(Method::Get, "/big", Access::Read, Exec::Blocking, [](const Request&) {
    return json_response(200, json{{"pad", std::string(300000, 'B')}});
  });
  AgentSocketOptions o;
  o.max_reply_bytes = 200000;
  restart(o);

  Client c(path);
  ASSERT_TRUE(c.line().is_object());
  ASSERT_TRUE(c.send({{"id", 1}, {"op", "jobs"}, {"limit", 1000}}));
  const json jobs = c.line();
  ASSERT_EQ(jobs["ok"], true) << jobs.dump().substr(0, 300);
  EXPECT_EQ(jobs["jobs"].size(), 3u) << "60 kB records under a 200 kB cap";
  EXPECT_EQ(jobs.value("truncated", false), true);
  EXPECT_EQ(jobs["jobs"][0].value("started_at", ""), "1970-01-01T00:00:00.009000Z") << "the newest first";

  ASSERT_TRUE(c.send({{"id", 2}, {"op", "get"}, {"path", "/big"}}));
  const json big = c.line();
  ASSERT_EQ(big["ok"], false) << big.dump().substr(0, 300);
  EXPECT_NE(big["error"]["message"].get<std::string>().find("more than the socket's 200000"), std::string::npos)
      << big.dump();
}

// Finding 3: unread replies are budgeted per uid. Connections that ask for big lists and never read
// them use up their user's budget: that user's next heavy read is refused (light requests still pass),
// another user's reads are served, and the budget comes back when those connections close.
TEST_F(AgentSocketTest, UnreadRepliesAreBudgetedPerUser) {
  node::Peer root{0, 0, static_cast<std::uint32_t>(::getpid()), "root", true};
  for (int i = 0; i < 40; ++i) {
    core::Job j;
    j.status = "succeeded";
    j.started_at_ms = i;
    j.record = json{{"pad", std::string(60000, 'A')}}.dump();
    ASSERT_TRUE(arbiter->job_put(root, j));
  }
  AgentSocketOptions o;
  o.max_reply_bytes = 1 << 20;
  o.max_unsent_per_uid = 2 << 20;
  o.max_unsent_bytes = 64 << 20;  // the per-connection drop stays out of this test
  restart(o);

  // 16 MiB asked for and not read: far past 2 MiB plus what the kernel's buffers take.
  std::vector<std::unique_ptr<Client>> hogs;
  for (int i = 0; i < 16; ++i) {
    hogs.push_back(std::make_unique<Client>(path));
    ASSERT_TRUE(hogs.back()->line().is_object());
    ASSERT_TRUE(hogs.back()->send({{"id", 1}, {"op", "jobs"}, {"limit", 1000}}));
  }
  Client me(path);
  ASSERT_TRUE(me.line().is_object());
  ASSERT_TRUE(me.send({{"id", 1}, {"op", "jobs"}, {"limit", 1}}));
  const json refused = me.line();
  ASSERT_EQ(refused["ok"], false) << refused.dump().substr(0, 300);
  EXPECT_EQ(refused["error"]["kind"], "unavailable") << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("not read"), std::string::npos) << refused.dump();
  ASSERT_TRUE(me.send({{"id", 2}, {"op", "leases"}}));
  EXPECT_EQ(me.line()["ok"], true) << "light requests are not budgeted away";

  std::string why;
  if (auto b = test::test_user("gf-test-b", &why)) {
    const std::vector<std::string> requests = {json{{"id", 1}, {"op", "jobs"}, {"limit", 1}}.dump() + "\n"};
    const auto [ok, text] = session_as(*b, path, requests);
    ASSERT_TRUE(ok) << text;
    auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), 2u) << text;
    EXPECT_EQ(lines[1]["ok"], true) << "another user's budget is their own: " << text.substr(0, 300);
  }

  hogs.clear();  // their unread replies are given back
  int id = 3;
  EXPECT_TRUE(test::eventually([&] {
    if (!me.send({{"id", ++id}, {"op", "jobs"}, {"limit", 1}})) return false;
    return me.line().value("ok", false);
  }));
}

}  // namespace
}  // namespace gf::server
