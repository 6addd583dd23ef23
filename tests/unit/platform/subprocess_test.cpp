#include "platform/subprocess.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <fstream>

#include "platform/child.hpp"
#include "platform/fs.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::platform {
namespace {

using namespace std::chrono_literals;

TEST(RunProcess, CapturesOutputAndExitCode) {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 7"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 7);
  EXPECT_FALSE(r->timed_out);
}

TEST(RunProcess, NoShellInterpretation) {
  auto r = run_process({"echo", "$HOME; rm -rf /"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "$HOME; rm -rf /\n");
}

TEST(RunProcess, TimeoutKillsTheWholeGroup) {
  const auto t0 = std::chrono::steady_clock::now();
  // The grandchild keeps the pipe open: only killing the group lets us return.
  auto r = run_process({"sh", "-c", "sleep 30 & sleep 30"}, RunOptions{200ms});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
  EXPECT_LT(took, 10s);
}

TEST(RunProcess, MissingProgramIsAnError) {
  auto r = run_process({"/nonexistent/gpufleet-nothing"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not found"), std::string::npos);
  EXPECT_FALSE(run_process({}));
}

TEST(RunProcess, OutputIsBounded) {
  auto r = run_process({"sh", "-c", "head -c 100000 /dev/zero"}, RunOptions{5s, 1000});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_EQ(r->exit_code, 0);
}

TEST(FindExecutable, PathLookup) {
  EXPECT_TRUE(find_executable("sh"));
  EXPECT_FALSE(find_executable("gpufleet-definitely-not-here"));
  EXPECT_FALSE(find_executable(""));
}

TEST(Child, ExitCodesAndErrors) {
  auto pid = spawn_inheriting({"sh", "-c", "exit 42"});
  ASSERT_TRUE(pid);
  EXPECT_EQ(wait_exit_code(*pid), 42);
  auto sig = spawn_inheriting({"sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(sig);
  EXPECT_EQ(wait_exit_code(*sig), 128 + 15);
  auto missing = spawn_inheriting({"gpufleet-no-such-command"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, gf::ErrorKind::NotFound);  // ENOENT
  // A file that exists but may not be executed (no x bit) is a Permission error.
  const test::TempDir dir;
  const std::string plain = test::write_file(dir / "not-executable", "#!/bin/sh\n");
  auto refused = spawn_inheriting({plain});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, gf::ErrorKind::Permission) << refused.error().message;
}

TEST(Fs, UnderRootAndReaders) {
  EXPECT_EQ(under_root("/", "/sys/class"), "/sys/class");
  EXPECT_EQ(under_root("", "/sys/class"), "/sys/class");
  EXPECT_EQ(under_root("/tmp/x/", "/sys/class"), "/tmp/x/sys/class");
  EXPECT_FALSE(read_file("/nonexistent/file"));
  EXPECT_FALSE(read_int("/nonexistent/file"));
  const std::string status = std::string(GF_FIXTURES_DIR) + "/proc/host/4242/comm";
  EXPECT_EQ(read_line(status).value_or(""), "python3");
  EXPECT_FALSE(read_int(status));  // not a number
}

}  // namespace
}  // namespace gf::platform

namespace gf::platform {
namespace {

TEST(RunProcess, AProgramThatClosesItsOutputAndHangsIsStillKilled) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_process({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, RunOptions{std::chrono::milliseconds(300)});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
}  // namespace gf::platform
