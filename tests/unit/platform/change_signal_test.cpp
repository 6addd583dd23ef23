// The store's wake-up file `<db>.changed` (issue 12, critical finding): notify() used to open it
// following links, truncate it and chmod it 0666, so a user who could write the store's directory
// planted it as a link to any root-owned file and had the root agent wreck that file.
#include "platform/change_signal.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/subprocess.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

namespace gf::platform {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct ChangeSignalTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path base = tmp.path();
};

TEST_F(ChangeSignalTest, NotifyWakesAWaiterAndCreatesAPrivateRegularFile) {
  const auto marker = (base / "gf.db.changed").string();
  ChangeSignal waiter(marker);
  ChangeSignal writer(marker);
  writer.notify();
  EXPECT_TRUE(waiter.wait(10s));
  struct stat st {};
  ASSERT_EQ(::lstat(marker.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0644u);  // never 0666: nobody else needs to write it
  EXPECT_EQ(st.st_uid, ::geteuid());
  // A second notify rewrites our own file and wakes again.
  writer.notify();
  EXPECT_TRUE(waiter.wait(10s));
}

// The attack as reported: a store directory the second user can write (0777, not sticky, so that the
// kernel's protected_symlinks does not hide the bug), the marker planted by that user as a link to a
// root-owned 0600 file elsewhere; then the agent (root) notifies, as every lease operation does.
TEST_F(ChangeSignalTest, AMarkerPlantedAsALinkToARootFileLeavesThatFileAlone) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const fs::path store_dir = base / "store";
  const fs::path secret_dir = base / "secret";
  fs::create_directories(store_dir);
  fs::create_directories(secret_dir);
  ::chmod(base.c_str(), 0755);
  ::chmod(store_dir.c_str(), 0777);
  const fs::path victim = secret_dir / "victim";
  std::ofstream(victim) << "root's data\n";
  ::chmod(victim.c_str(), 0600);
  const auto marker = store_dir / "gf.db.changed";
  auto ln = run_process(b->as({"ln", "-s", victim.string(), marker.string()}), {});
  ASSERT_TRUE(ln && ln->exit_code == 0) << (ln ? ln->err : ln.error().message);
  struct stat lst {};
  ASSERT_EQ(::lstat(marker.c_str(), &lst), 0);
  ASSERT_TRUE(S_ISLNK(lst.st_mode));
  ASSERT_EQ(lst.st_uid, b->uid);

  ChangeSignal(marker.string()).notify();

  EXPECT_EQ(test::slurp(victim), "root's data\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_size, 12);
}

// A regular file the other user made there is not ours: not written, not chmod-ed.
TEST_F(ChangeSignalTest, AMarkerOwnedBySomeoneElseIsNotWritten) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  ::chmod(base.c_str(), 0777);
  const auto marker = base / "gf.db.changed";
  std::ofstream(marker) << "theirs";
  ASSERT_EQ(::chown(marker.c_str(), b->uid, b->gid), 0);
  ::chmod(marker.c_str(), 0644);
  ChangeSignal(marker.string()).notify();
  EXPECT_EQ(test::slurp(marker), "theirs");
  struct stat st {};
  ASSERT_EQ(::stat(marker.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_uid, b->uid);
}

// A FIFO planted there would block an open for writing: skipped without hanging.
TEST_F(ChangeSignalTest, AFifoAsMarkerIsSkippedWithoutBlocking) {
  const auto marker = base / "gf.db.changed";
  ASSERT_EQ(::mkfifo(marker.c_str(), 0666), 0);
  ChangeSignal(marker.string()).notify();  // returning at all is the assertion's precondition
  struct stat st {};
  ASSERT_EQ(::lstat(marker.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

}  // namespace
}  // namespace gf::platform
