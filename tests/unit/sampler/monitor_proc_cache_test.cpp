// The monitor's cache of /proc details per GPU process: a process is read once while it lives, and a pid
// taken by another process is read anew (its /proc/<pid> is another directory), whether the process is
// told by its held directory or, past the monitor's cap on held directories, by its start time.
#include "sampler/monitor.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/fake_clock.hpp"
#include "support/files.hpp"
#include "support/scripted_backend.hpp"
#include "support/temp_dir.hpp"

namespace gf::sampler {
namespace {

struct ProcCacheTest : ::testing::Test {
  std::shared_ptr<test::ScriptedBackend::State> st = std::make_shared<test::ScriptedBackend::State>();
  test::FakeClock clock;
  test::TempDir tmp;
  std::filesystem::path proc = tmp / "proc";

  // /proc/<pid> of a process named `name` that started at `start` (clock ticks): replaced as a whole, as
  // the kernel gives a new process a new directory.
  void spawn(std::uint32_t pid, const std::string& name, unsigned long long start) {
    const auto dir = proc / std::to_string(pid);
    std::filesystem::remove_all(dir);
    test::write_file(dir / "stat", std::to_string(pid) + " (" + name + ") S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " +
                                       std::to_string(start) + " 1000 100\n");
    test::write_file(dir / "status", "Name:\t" + name + "\nUid:\t0\t0\t0\t0\nNSpid:\t" + std::to_string(pid) + "\n");
    test::write_file(dir / "comm", name + "\n");
    test::write_file(dir / "cmdline", name + std::string(1, '\0') + "--run" + std::string(1, '\0'));
    test::write_file(dir / "cgroup", "0::/user.slice\n");
  }
  void reap(std::uint32_t pid) { std::filesystem::remove_all(proc / std::to_string(pid)); }

  std::unique_ptr<Monitor> make(std::size_t max_held = 512) {
    test::write_file(proc / "self" / "status", "Name:\tgf\nNSpid:\t1\n");
    MonitorOptions o;
    o.proc_root = proc.string();
    o.max_held_processes = max_held;
    return std::make_unique<Monitor>(std::make_unique<test::ScriptedBackend>(st), clock, o);
  }
  // One GPU running `pids`; the snapshot's process names in that order.
  std::vector<std::string> names(Monitor& m, const std::vector<std::uint32_t>& pids,
                                 std::string* visibility = nullptr) {
    auto g = test::make_gpu(0, 50);
    for (auto pid : pids) {
      core::GpuProcess p;
      p.pid = pid;
      g.processes.push_back(p);
    }
    st->next.gpus = {g};
    auto s = m.snapshot(false);
    EXPECT_TRUE(s);
    std::vector<std::string> out;
    if (!s) return out;
    for (const auto& p : (*s)->gpus[0].processes) out.push_back(p.name);
    if (visibility) *visibility = (*s)->process_visibility.message;
    return out;
  }
};

TEST_F(ProcCacheTest, AReusedPidIsReadAnewAndAGoneOneIsSaidToBeInvisible) {
  spawn(300, "first", 100);
  spawn(301, "other", 100);
  auto m = make();
  EXPECT_EQ(names(*m, {300, 301}), (std::vector<std::string>{"first", "other"}));
  // What a process shows is read once: a later change of its files in place is not seen (a process's
  // comm and command line are kept from its first sighting).
  test::write_file(proc / "301" / "comm", "renamed\n");
  EXPECT_EQ(names(*m, {300, 301}), (std::vector<std::string>{"first", "other"}));
  // Pid 300 ends and another process gets the pid.
  spawn(300, "second", 200);
  EXPECT_EQ(names(*m, {300, 301}), (std::vector<std::string>{"second", "other"}));
  // Pid 300 ends with nothing in its place: not visible, and said so.
  reap(300);
  std::string why;
  EXPECT_EQ(names(*m, {300, 301}, &why), (std::vector<std::string>{"", "other"}));
  EXPECT_NE(why.find("1 of 2"), std::string::npos) << why;
  // Back under the same pid: read again.
  spawn(300, "third", 300);
  EXPECT_EQ(names(*m, {300}), (std::vector<std::string>{"third"}));
}

TEST_F(ProcCacheTest, PastTheCapOnHeldDirectoriesStartTimesTellProcessesApart) {
  // More GPU processes than the monitor holds directories for.
  std::vector<std::uint32_t> pids;
  for (std::uint32_t pid = 1000; pid < 1010; ++pid) {
    spawn(pid, "a" + std::to_string(pid), 10);
    pids.push_back(pid);
  }
  auto m = make(4);
  auto first = names(*m, pids);
  ASSERT_EQ(first.size(), pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) EXPECT_EQ(first[i], "a" + std::to_string(pids[i]));
  // Every pid taken by a new process: each is read anew, held or not.
  for (auto pid : pids) spawn(pid, "b" + std::to_string(pid), 20);
  auto second = names(*m, pids);
  ASSERT_EQ(second.size(), pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) EXPECT_EQ(second[i], "b" + std::to_string(pids[i]));
}

}  // namespace
}  // namespace gf::sampler
