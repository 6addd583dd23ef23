#include "platform/procfs.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gf_test_paths.hpp"

namespace gf::platform {
namespace {

const std::string kHost = std::string(GF_FIXTURES_DIR) + "/proc/host";

TEST(ContainerId, DockerSystemdScope) {
  auto id = parse_container_id(
      "0::/system.slice/docker-3f4e5d6c7b8a9f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766.scope\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, "3f4e5d6c7b8a");
}

TEST(ContainerId, CgroupV1Docker) {
  auto id = parse_container_id(
      "12:memory:/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
      "11:cpu:/docker/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n");
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, "0123456789ab");
}

TEST(ContainerId, KubernetesPodUidWinsInBothLayouts) {
  auto systemd = parse_container_id(
      "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b3c4d_5e6f_7a8b_9c0d_1e2f3a4b5c6d.slice/"
      "cri-containerd-aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899.scope\n");
  ASSERT_TRUE(systemd);
  EXPECT_EQ(*systemd, "k8s-pod:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
  auto cgroupfs = parse_container_id(
      "0::/kubepods/burstable/pod1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d/"
      "aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899\n");
  ASSERT_TRUE(cgroupfs);
  EXPECT_EQ(*cgroupfs, "k8s-pod:1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d");
}

TEST(ContainerId, HostProcessesAndJunk) {
  EXPECT_FALSE(parse_container_id("0::/user.slice/user-1000.slice/session-2.scope\n"));
  EXPECT_FALSE(parse_container_id(""));
  EXPECT_FALSE(parse_container_id(std::string(63, 'a')));  // too short for an id
  EXPECT_FALSE(parse_container_id(std::string(65, 'a')));  // too long: not an id
}

TEST(NsPid, Parses) {
  EXPECT_EQ(parse_nspid("Name:\tx\nNSpid:\t4242\t17\nOther:\t1\n"), (std::vector<std::uint32_t>{4242, 17}));
  EXPECT_EQ(parse_nspid("NSpid:\t5\n"), (std::vector<std::uint32_t>{5}));
  EXPECT_TRUE(parse_nspid("Name:\tx\n").empty());
  EXPECT_TRUE(parse_nspid("Name:\tx\nNSpid:\tabc\n").empty());
}

TEST(ProcReader, ReadsFixtureProcess) {
  ProcReader r(kHost);
  auto p = r.read(4242);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name, "python3");
  EXPECT_EQ(p->user, "root");
  EXPECT_EQ(p->command, "python3 train.py --epochs 3");
  ASSERT_TRUE(p->container);
  EXPECT_EQ(*p->container, "3f4e5d6c7b8a");
  EXPECT_EQ(p->nspid, (std::vector<std::uint32_t>{4242, 17}));
  EXPECT_EQ(p->start_time_ticks, 123456u);
  EXPECT_FALSE(r.read(1));  // not in the fixture
}

TEST(ProcReader, NamespaceDetection) {
  EXPECT_FALSE(ProcReader(kHost).in_child_pid_namespace());
  EXPECT_TRUE(ProcReader(std::string(GF_FIXTURES_DIR) + "/proc/container").in_child_pid_namespace());
}

TEST(ProcReader, RealProcSeesItself) {
  ProcReader r;
  auto me = r.read(static_cast<std::uint32_t>(::getpid()));
  ASSERT_TRUE(me);
  EXPECT_NE(me->command.find("gf_test_platform"), std::string::npos);
  EXPECT_TRUE(r.start_time(static_cast<std::uint32_t>(::getpid())));
  // The uid an HTTP lease for a pid is owned by (issue 20, finding 12).
  EXPECT_EQ(me->uid, std::optional<std::uint32_t>(::getuid()));
}

TEST(StartTime, ParsesField22AfterTheLastParenthesis) {
  // A command name may hold spaces and parentheses.
  EXPECT_EQ(parse_start_time("7 (a) b (c)) S 1 7 7 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3\n"), 987654u);
  EXPECT_FALSE(parse_start_time("7 (a) S 1 2 3\n"));  // too few fields
  EXPECT_FALSE(parse_start_time("no parenthesis at all"));
  EXPECT_FALSE(parse_start_time(""));
}

TEST(ProcHandle, FixtureProcessIsHeldOnlyWithItsStartTime) {
  ProcReader r(kHost);
  auto h = r.hold(4242, 123456);
  ASSERT_TRUE(h.valid());
  EXPECT_TRUE(h.alive());
  EXPECT_FALSE(r.hold(4242, 123457).valid());  // another process with that pid
  EXPECT_FALSE(r.hold(1, 0).valid());          // not in the fixture
  ProcHandle moved = std::move(h);
  EXPECT_TRUE(moved.alive());
  EXPECT_FALSE(ProcHandle().alive());
}

TEST(ProcHandle, TellsWhenTheVeryProcessHasGone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ProcReader r;
  const auto pid = static_cast<std::uint32_t>(child);
  const auto start = r.start_time(pid);
  ASSERT_TRUE(start);
  auto h = r.hold(pid, *start);
  ASSERT_TRUE(h.valid());
  EXPECT_TRUE(h.alive());
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // reaped: its pid may now be anyone's
  EXPECT_FALSE(h.alive());
}

}  // namespace
}  // namespace gf::platform
