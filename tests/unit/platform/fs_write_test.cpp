// platform::write_file_atomic and make_dirs: the routine every file the agent writes goes through
// (issue 12: `--port-file F` used to write through `F.tmp`, following a link planted there).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/fs.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

namespace gf::platform {
namespace {

namespace fs = std::filesystem;

struct FsWrite : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path base = tmp.path();
};

TEST_F(FsWrite, WritesTheContentWithTheModeAskedForAndLeavesNoTemporary) {
  const auto f = base / "port";
  const auto old = ::umask(0077);
  auto w = write_file_atomic(f.string(), "1234\n", 0644);
  ::umask(old);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(test::slurp(f), "1234\n");
  struct stat st {};
  ASSERT_EQ(::lstat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(std::distance(fs::directory_iterator(base), fs::directory_iterator()), 1);
}

// Links planted at the old temporary name and at the target itself: neither link's target is touched;
// the target name ends up a regular file of ours.
TEST_F(FsWrite, PlantedLinksAreNeverWrittenThrough) {
  const auto victim = base / "victim";
  std::ofstream(victim) << "keep";
  const auto f = base / "port";
  fs::create_symlink(victim, base / "port.tmp");
  fs::create_symlink(victim, f);
  auto w = write_file_atomic(f.string(), "80\n");
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(test::slurp(victim), "keep");
  EXPECT_FALSE(fs::is_symlink(f));
  EXPECT_EQ(test::slurp(f), "80\n");
}

TEST_F(FsWrite, AMissingDirectoryIsAnErrorNamingTheFile) {
  const auto f = base / "nope" / "port";
  auto w = write_file_atomic(f.string(), "1\n");
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find(f.string()), std::string::npos) << w.error().message;
}

TEST_F(FsWrite, MakeDirsGivesOnlyTheNewDirectoriesTheMode) {
  ::chmod(base.c_str(), 0755);
  const auto deep = base / "a" / "b";
  const auto old = ::umask(0);
  auto r = make_dirs(deep.string(), 0700);
  ::umask(old);
  ASSERT_TRUE(r) << r.error().message;
  struct stat st {};
  ASSERT_EQ(::stat((base / "a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(deep.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(base.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // existed: left alone
  std::ofstream(base / "file") << "x";
  EXPECT_FALSE(make_dirs((base / "file" / "sub").string(), 0700));
}

}  // namespace
}  // namespace gf::platform
