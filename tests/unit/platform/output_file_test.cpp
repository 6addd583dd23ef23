// platform::OutputFile, behind `gpufleet monitor --output FILE` (review of issue 12): it used to be an
// std::ofstream, which follows a link planted at FILE and truncates whatever it points to, as root too.
#include "platform/output_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

namespace gf::platform {
namespace {

namespace fs = std::filesystem;

struct OutputFileTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path base = tmp.path();
};

TEST_F(OutputFileTest, DevFdNamesTheStreamAlreadyOpenAndAppendsToIt) {
  // /dev/fd/N is a link (to /proc/self/fd/N) that O_NOFOLLOW would refuse: it is written through a
  // duplicate of N instead, and a file opened for appending is not truncated.
  const auto f = base / "log.json";
  { std::ofstream(f) << "before\n"; }
  const int fd = ::open(f.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  {
    auto out = OutputFile::open("/dev/fd/" + std::to_string(fd));
    ASSERT_TRUE(out) << out.error().message;
    ASSERT_TRUE(out->write("after\n"));
  }
  ::close(fd);
  EXPECT_EQ(test::slurp(f), "before\nafter\n");
  const int ro = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  EXPECT_FALSE(OutputFile::open("/dev/fd/" + std::to_string(ro)));  // not open for writing
  ::close(ro);
  EXPECT_FALSE(OutputFile::open("/dev/fd/9999"));  // no such descriptor
  EXPECT_TRUE(OutputFile::open("/dev/stdout"));
}

TEST_F(OutputFileTest, ANewFileIsCreatedWithTheModeLessTheUmask) {
  const auto f = base / "report.json";
  const auto old = ::umask(0022);
  auto o = OutputFile::open(f.string(), 0644);
  ::umask(old);
  ASSERT_TRUE(o) << o.error().message;
  ASSERT_TRUE(o->write("{}\n"));
  EXPECT_EQ(test::slurp(f), "{}\n");
  struct stat st {};
  ASSERT_EQ(::lstat(f.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

// An existing file of ours is replaced whole, as `>` would: longer old contents leave nothing behind.
TEST_F(OutputFileTest, AnExistingFileOfOursIsOverwrittenWhole) {
  const auto f = base / "report.json";
  std::ofstream(f) << "a much longer report from an earlier run\n";
  auto o = OutputFile::open(f.string());
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(test::slurp(f), "a much longer report from an earlier run\n") << "opening changes nothing";
  ASSERT_TRUE(o->write("short\n"));
  EXPECT_EQ(test::slurp(f), "short\n");
}

// The finding: a link at FILE (to a file root owns, say) is refused, naming FILE; its target keeps its
// contents, and the link stays a link.
TEST_F(OutputFileTest, ALinkIsRefusedAndItsTargetUntouched) {
  const auto victim = base / "victim";
  std::ofstream(victim) << "keep me\n";
  const auto link = base / "report.json";
  fs::create_symlink(victim, link);
  auto o = OutputFile::open(link.string());
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().kind, ErrorKind::Permission);
  EXPECT_NE(o.error().message.find(link.string() + " is a symbolic link"), std::string::npos) << o.error().message;
  EXPECT_EQ(test::slurp(victim), "keep me\n");
  EXPECT_TRUE(fs::is_symlink(link));
  // A dangling link is not a way to create a file elsewhere either.
  const auto dangling = base / "new.json";
  fs::create_symlink(base / "elsewhere", dangling);
  EXPECT_FALSE(OutputFile::open(dangling.string()));
  EXPECT_FALSE(fs::exists(base / "elsewhere"));
}

// A second hard link to a file of ours (how a link is planted where symbolic ones are not followed).
TEST_F(OutputFileTest, AFileWithAnotherHardLinkIsRefused) {
  const auto victim = base / "victim";
  std::ofstream(victim) << "keep me\n";
  const auto f = base / "report.json";
  fs::create_hard_link(victim, f);
  auto o = OutputFile::open(f.string());
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().message.find("hard link"), std::string::npos) << o.error().message;
  EXPECT_EQ(test::slurp(victim), "keep me\n");
}

// A FIFO with no reader would hold the open for ever: an error at once. /dev/null is fine.
TEST_F(OutputFileTest, AFifoWithoutAReaderIsAnErrorAndDevNullIsFine) {
  const auto fifo = base / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto o = OutputFile::open(fifo.string());
  EXPECT_FALSE(o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "the open blocked";
  auto null = OutputFile::open("/dev/null");
  ASSERT_TRUE(null) << null.error().message;
  EXPECT_TRUE(null->write("anything"));
  const auto dir = base / "adir";
  fs::create_directories(dir);
  EXPECT_FALSE(OutputFile::open(dir.string()));
}

// Root writing a file that another user owns (planted where root's report goes) is refused, naming the
// owner; the file keeps its contents.
TEST_F(OutputFileTest, AFileOwnedByAnotherUserIsRefused) {
  std::string why;
  const auto b = test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto f = base / "report.json";
  std::ofstream(f) << "theirs\n";
  ASSERT_EQ(::chown(f.c_str(), b->uid, b->gid), 0);
  auto o = OutputFile::open(f.string());
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().kind, ErrorKind::Permission);
  EXPECT_NE(o.error().message.find("owned by gf-test-b"), std::string::npos) << o.error().message;
  EXPECT_EQ(test::slurp(f), "theirs\n");
}

}  // namespace
}  // namespace gf::platform
