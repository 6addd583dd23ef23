// Files the agent writes and text the CLI prints (issue 12), through the real binary: the token file
// refused with one line and exit 1 (it used to crash with SIGSEGV), --port-file not written through a
// planted F.tmp, the store's wake-up link not followed when a client lists leases, and names chosen by
// processes or other users shown with their control characters escaped (exact in --json).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/subprocess.hpp"
#include "support/agent_process.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using gf::test::slurp;
using namespace std::chrono_literals;
using nlohmann::json;

gf::platform::ProcessOutput run(std::vector<std::string> argv) {
  // No token from the environment: the file is what is under test.
  argv.insert(argv.begin(), {"env", "-u", "GPUFLEET_TOKEN"});
  auto r = gf::platform::run_process(argv, gf::platform::RunOptions{30s});
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : gf::platform::ProcessOutput{};
}

bool one_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return !t.empty() && t.find('\n') == std::string::npos;
}

// One HTTP/1.1 request, the whole response (the agent closes after Connection: close).
std::string http_get(unsigned short port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

struct Files : ::testing::Test {
  gf::test::TempDir tmp;
  const fs::path dir = tmp.path();
  std::string db = (dir / "gf.db").string();
  std::vector<std::string> serve(const std::string& token_file) const {
    return {GF_BINARY, "--backend", "sim", "serve", "--listen", "127.0.0.1:0", "--db", db, "--token-file", token_file};
  }
  void expect_refused(const std::vector<std::string>& argv, const fs::path& token, const std::string& why) {
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 1) << token << ": " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find(token.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
};

// Token file problems (issue 12, high: a dangling or unreadable token file crashed the agent with
// SIGSEGV; one that another user owns or can write was accepted): each is one line and exit 1.
TEST_F(Files, ServeRefusesABadTokenFileWithOneLineAndExit1) {
  const auto t = dir / "agent.token";
  fs::create_symlink(dir / "nowhere", t);
  expect_refused(serve(t.string()), t, "symbolic link");
  fs::remove(t);

  const auto good = dir / "real.token";
  std::ofstream(good) << "s3cret\n";
  ::chmod(good.c_str(), 0600);
  fs::create_symlink(good, t);
  expect_refused(serve(t.string()), t, "symbolic link");
  fs::remove(t);

  fs::create_directory(t);
  expect_refused(serve(t.string()), t, "not a regular file");
  fs::remove(t);

  std::ofstream(t) << "";
  ::chmod(t.c_str(), 0600);
  expect_refused(serve(t.string()), t, "empty");

  std::ofstream(t) << "s3cret\n";
  ::chmod(t.c_str(), 0666);
  expect_refused(serve(t.string()), t, "writable by others");

  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  ::chmod(t.c_str(), 0600);
  ASSERT_EQ(::chown(t.c_str(), b->uid, b->gid), 0);
  expect_refused(serve(t.string()), t, "owned by uid " + std::to_string(b->uid));

  // Unreadable: the agent runs as the second user, who owns a store directory and a token file it may
  // not read (root would read it anyway).
  const auto bdir = dir / "b";
  fs::create_directory(bdir);
  ::chmod(dir.c_str(), 0755);
  ASSERT_EQ(::chown(bdir.c_str(), b->uid, b->gid), 0);
  const auto bt = bdir / "agent.token";
  std::ofstream(bt) << "s3cret\n";
  ASSERT_EQ(::chown(bt.c_str(), b->uid, b->gid), 0);
  ::chmod(bt.c_str(), 0200);
  expect_refused(b->as({"env", "-u", "GPUFLEET_TOKEN", GF_BINARY, "--backend", "sim", "serve", "--listen",
                        "127.0.0.1:0", "--db", (bdir / "gf.db").string(), "--token-file", bt.string()}),
                 bt, "cannot read");
}

// --port-file F (issue 12, high): the agent wrote through F.tmp, following a link planted there.
TEST_F(Files, PortFileIsNotWrittenThroughAPlantedTemporary) {
  const auto victim = dir / "victim";
  std::ofstream(victim) << "keep me\n";
  ::chmod(victim.c_str(), 0600);
  const auto pf = dir / "agent.port";  // where AgentProcess has the agent write its port
  fs::create_symlink(victim, dir / "agent.port.tmp");
  gf::test::AgentProcess agent;
  auto args = serve((dir / "agent.token").string());
  args.erase(args.begin());
  ASSERT_TRUE(agent.start(dir, args, {"GPUFLEET_TOKEN"}));
  EXPECT_EQ(slurp(victim), "keep me\n");
  EXPECT_FALSE(fs::is_symlink(pf));
  EXPECT_EQ(slurp(pf), std::to_string(agent.port()) + "\n");
  EXPECT_EQ(agent.stop(), 0);
}

// The critical finding end to end: the store's directory was writable by a second user, who planted
// `<db>.changed` as a link to a root-owned file (the directory is private again when the agent starts:
// a store in a directory others can write is refused outright, see the next test); an
// unauthenticated GET /api/v1/leases makes the agent reap and notify. The file must keep its content
// and mode.
TEST_F(Files, ListingLeasesDoesNotWriteThroughAPlantedWakeUpLink) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto store_dir = dir / "store";
  const auto secret = dir / "secret";
  fs::create_directories(store_dir);
  fs::create_directories(secret);
  ::chmod(dir.c_str(), 0755);
  const auto victim = secret / "victim";
  std::ofstream(victim) << "root's data\n";
  ::chmod(victim.c_str(), 0600);
  db = (store_dir / "gf.db").string();
  // A lease whose owner is gone (alloc leases for its parent, a shell that exits at once): listing
  // leases reaps it, and a reap is what notifies. Taken before the link is planted, so that only the
  // agent's listing can write through it (the other user replaces the
  // marker: the directory is theirs to write).
  auto alloc = gf::platform::run_process(
      {"sh", "-c", std::string(GF_BINARY) + " --backend sim alloc --gpus 1 --db " + db + " >/dev/null"},
      gf::platform::RunOptions{30s});
  ASSERT_TRUE(alloc && alloc->exit_code == 0) << (alloc ? alloc->err : alloc.error().message);
  ::chmod(store_dir.c_str(), 0777);
  auto ln = gf::platform::run_process(b->as({"ln", "-sfn", victim.string(), db + ".changed"}), {});
  ASSERT_TRUE(ln && ln->exit_code == 0) << (ln ? ln->err : ln.error().message);
  ::chmod(store_dir.c_str(), 0755);

  gf::test::AgentProcess agent;
  auto args = serve((secret / "agent.token").string());
  args.erase(args.begin());
  ASSERT_TRUE(agent.start(secret, args, {"GPUFLEET_TOKEN"}));
  const auto resp = http_get(agent.port(), "/api/v1/leases");
  EXPECT_NE(resp.find(" 200 "), std::string::npos) << resp;
  EXPECT_EQ(agent.stop(), 0);
  EXPECT_EQ(slurp(victim), "root's data\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Review of issue 12: a store in a directory other users can write (sticky or not) is refused, one line
// naming the directory, exit 1: they could plant its -wal and -shm files, which SQLite opens by name.
// A -wal planted as a link next to a store in a private directory is refused too, naming it.
TEST_F(Files, StoreInADirectoryOthersCanWriteIsRefused) {
  const auto open_dir = dir / "shared";
  fs::create_directories(open_dir);
  ::chmod(open_dir.c_str(), 01777);
  auto r = run({GF_BINARY, "--backend", "sim", "leases", "--db", (open_dir / "gf.db").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find(open_dir.string() + ", a directory other users can write (mode 1777)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(open_dir / "gf.db"));

  const auto victim = dir / "victim";
  std::ofstream(victim) << "keep me\n";
  ASSERT_EQ(run({GF_BINARY, "--backend", "sim", "leases", "--db", db}).exit_code, 0);
  fs::remove(db + "-wal");
  fs::create_symlink(victim, db + "-wal");
  r = run({GF_BINARY, "--backend", "sim", "leases", "--db", db});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(db + "-wal is a symbolic link"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(victim), "keep me\n");
}

// Review of issue 12: `monitor --output FILE` wrote through a link planted at FILE (an std::ofstream).
// Now FILE is checked before CMD runs: a link is refused with exit 125, CMD never runs, the link's
// target keeps its contents; a plain FILE gets the report.
TEST_F(Files, MonitorOutputIsNotWrittenThroughALink) {
  const auto victim = dir / "victim";
  std::ofstream(victim) << "keep me\n";
  ::chmod(victim.c_str(), 0600);
  const auto link = dir / "report.json";
  fs::create_symlink(victim, link);
  const auto ran = dir / "ran";
  auto r =
      run({GF_BINARY, "--backend", "sim", "monitor", "-n", "0.1", "-o", link.string(), "--", "touch", ran.string()});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find(link.string() + " is a symbolic link"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ran)) << "the command ran although its report could not be written";
  EXPECT_EQ(slurp(victim), "keep me\n");
  EXPECT_TRUE(fs::is_symlink(link));

  const auto plain = dir / "plain.json";
  r = run({GF_BINARY, "--backend", "sim", "monitor", "-n", "0.1", "-o", plain.string(), "--", "touch", ran.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(ran));
  const auto doc = json::parse(slurp(plain), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << slurp(plain);
  EXPECT_EQ(doc["exit_code"], 0);
  struct stat st {};
  ASSERT_EQ(::lstat(plain.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0022, 0u) << "not writable by others";
}

// Control characters (issue 12, medium): text from processes and users reached ps, status, jobs, show
// and leases raw. On a terminal it is escaped; --json keeps it exact.
const std::string kEvil = "x\x1b]0;pwned\x07y";
const std::string kEvilShown = "x\\x1b]0;pwned\\x07y";

TEST_F(Files, ProcessTextIsEscapedInTextAndExactInJson) {
  const auto scenario = dir / "evil.json";
  json sc = {{"driver_version", "sim-test"},
             {"gpus", json::array({{{"name", "Sim A"}, {"memory_total_mib", 1000}}})},
             {"processes", json::array({{{"gpu", 0},
                                         {"pid", 4242},
                                         {"name", kEvil},
                                         {"user", "u\x1b[2J"},
                                         {"command",
                                          "cmd \x1b[2J\xc2\x9b"
                                          "31m"},
                                         {"used_memory_mib", 100}}})}};
  std::ofstream(scenario) << sc.dump();
  const std::string env = "GPUFLEET_SIM_SCENARIO=" + scenario.string();
  for (const char* verb : {"ps", "status"}) {
    auto r = run({env, GF_BINARY, "--backend", "sim", verb});
    EXPECT_EQ(r.exit_code, 0) << verb << ": " << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << verb << ": " << r.out;
    EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << verb << ": " << r.out;
    EXPECT_NE(r.out.find("u\\x1b[2J"), std::string::npos) << verb << ": " << r.out;
  }
  auto ps = run({env, GF_BINARY, "--backend", "sim", "ps"});
  EXPECT_NE(ps.out.find("cmd \\x1b[2J\\u009b31m"), std::string::npos) << ps.out;
  auto st = run({env, GF_BINARY, "--backend", "sim", "status"});
  EXPECT_NE(st.out.find(kEvilShown), std::string::npos) << st.out;

  auto pj = run({env, GF_BINARY, "--backend", "sim", "ps", "--json"});
  EXPECT_EQ(pj.exit_code, 0) << pj.err;
  EXPECT_NE(pj.out.find("\\u001b"), std::string::npos) << pj.out;  // JSON's own escape
  auto j = json::parse(pj.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << pj.out;
  EXPECT_NE(j.dump().find(json(kEvil).dump()), std::string::npos) << pj.out;
}

TEST_F(Files, JobAndLeaseNamesAreEscapedInTextAndExactInJson) {
  auto ran = run({GF_BINARY, "--backend", "sim", "run", "--gpus", "1", "--name", kEvil, "--db", db, "--", "true"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto jobs = run({GF_BINARY, "--backend", "sim", "jobs", "--db", db});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_EQ(jobs.out.find('\x1b'), std::string::npos) << jobs.out;
  EXPECT_NE(jobs.out.find(kEvilShown), std::string::npos) << jobs.out;

  auto jj = run({GF_BINARY, "--backend", "sim", "jobs", "--json", "--db", db});
  auto list = json::parse(jj.out, nullptr, false);
  ASSERT_TRUE(list.is_array() && !list.empty()) << jj.out;
  EXPECT_EQ(list[0].value("name", ""), kEvil) << jj.out;
  const std::string id = list[0].value("id", "");
  ASSERT_FALSE(id.empty()) << jj.out;

  auto show = run({GF_BINARY, "--backend", "sim", "show", id, "--db", db});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.out.find('\x1b'), std::string::npos) << show.out;
  EXPECT_NE(show.out.find(kEvilShown), std::string::npos) << show.out;
  auto sj = run({GF_BINARY, "--backend", "sim", "show", id, "--json", "--db", db});
  auto rec = json::parse(sj.out, nullptr, false);
  ASSERT_TRUE(rec.is_object()) << sj.out;
  EXPECT_EQ(rec.value("name", ""), kEvil) << sj.out;

  // A lease that lives while this test runs (alloc leases for its parent, us).
  auto alloc = run({GF_BINARY, "--backend", "sim", "alloc", "--gpus", "1", "--name", kEvil, "--db", db});
  ASSERT_EQ(alloc.exit_code, 0) << alloc.err;
  auto leases = run({GF_BINARY, "--backend", "sim", "leases", "--db", db});
  EXPECT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_EQ(leases.out.find('\x1b'), std::string::npos) << leases.out;
  EXPECT_NE(leases.out.find(kEvilShown), std::string::npos) << leases.out;
  auto lj = run({GF_BINARY, "--backend", "sim", "leases", "--json", "--db", db});
  auto lv = json::parse(lj.out, nullptr, false);
  ASSERT_TRUE(lv.is_object() && !lv["leases"].empty()) << lj.out;
  EXPECT_EQ(lv["leases"][0].value("name", ""), kEvil) << lj.out;
}

}  // namespace
