// The store file and its directory (issue 12): a store path that is a link to another user's database
// used to be written, a store owned by another user was opened by root, and new stores were 0644.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/subprocess.hpp"
#include "platform/users.hpp"
#include "store/node_store.hpp"
#include "store/sqlite.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;

struct StoreFiles : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path base = tmp.path();
};

TEST_F(StoreFiles, AFreshStoreIsPrivateInAPrivateDirectory) {
  const auto db = base / "state" / "gpufleet" / "gf.db";
  const auto old = ::umask(0022);
  auto s = Db::open(db.string());
  ::umask(old);
  ASSERT_TRUE(s) << s.error().message;
  struct stat st {};
  ASSERT_EQ(::lstat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(db.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(db.parent_path().parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(StoreFiles, AStoreThatIsASymlinkIsRefusedAndItsTargetUntouched) {
  const auto target = base / "someone-elses.db";
  {
    auto t = Db::open(target.string());
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_TRUE(t->exec("CREATE TABLE mine(x INTEGER); INSERT INTO mine VALUES (42);"));
  }
  const auto before = test::slurp(target);
  const auto link = base / "gf.db";
  fs::create_symlink(target, link);
  auto s = NodeStore::open(link.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(link.string()), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("symbolic link"), std::string::npos) << s.error().message;
  EXPECT_EQ(test::slurp(target), before);
}

// Root opening a store that another user owns would write where that user steers it (links for the
// -wal/-shm files, a database crafted to mislead): refused, naming the file and its owner.
TEST_F(StoreFiles, AStoreOwnedByAnotherUserIsRefused) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto db = base / "gf.db";
  {
    auto t = Db::open(db.string());
    ASSERT_TRUE(t) << t.error().message;
  }
  ASSERT_EQ(::chown(db.c_str(), b->uid, b->gid), 0);
  auto s = Db::open(db.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(db.string()), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("gf-test-b"), std::string::npos) << s.error().message;
  EXPECT_EQ(s.error().kind, ErrorKind::Permission);
}

// The wake-up file through the store (issue 12, the critical finding): a user who could write the
// store's directory planted `<db>.changed` as a link to a root-owned file (the directory has since
// been made private, or the store would be refused: see below); a lease taken and released by the
// (root) store must leave that file as it was.
TEST_F(StoreFiles, ALeaseOperationDoesNotWriteThroughAPlantedWakeUpLink) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto store_dir = base / "store";
  const auto secret_dir = base / "secret";
  fs::create_directories(store_dir);
  fs::create_directories(secret_dir);
  ::chmod(base.c_str(), 0755);
  ::chmod(store_dir.c_str(), 0777);  // writable by the other user, not sticky
  const auto victim = secret_dir / "victim";
  std::ofstream(victim) << "root's data\n";
  ::chmod(victim.c_str(), 0600);
  const auto db = store_dir / "gf.db";
  auto ln = platform::run_process(b->as({"ln", "-s", victim.string(), db.string() + ".changed"}), {});
  ASSERT_TRUE(ln && ln->exit_code == 0) << (ln ? ln->err : ln.error().message);
  ::chmod(store_dir.c_str(), 0755);

  auto s = NodeStore::open(db.string(), [](const core::LeaseOwner&) { return true; });
  ASSERT_TRUE(s) << s.error().message;
  core::LeaseRequest req;
  req.job_id = "job";
  req.name = "name";
  req.owner.pid = static_cast<std::uint32_t>(::getpid());
  req.owner.start_time = 1;
  req.owner.user = "root";
  std::vector<core::LeasedGpu> gpus{{0, "GPU-a"}};
  auto l = (*s)->acquire(req, [gpus](const auto&, const auto&) -> Result<std::optional<std::vector<core::LeasedGpu>>> {
    return std::optional<std::vector<core::LeasedGpu>>(gpus);
  });
  ASSERT_TRUE(l && *l);
  ASSERT_TRUE((*s)->release((*l)->id, "done"));

  EXPECT_EQ(test::slurp(victim), "root's data\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// Review of issue 12: a store directory other users can write lets them plant the files SQLite
// creates next to the store by name (-wal, -shm, -journal), following links. Refused whether or not
// the directory is sticky, naming the directory and its mode, before anything is created in it.
TEST_F(StoreFiles, AStoreInADirectoryOthersCanWriteIsRefused) {
  for (const unsigned mode : {0777u, 01777u}) {
    const auto dir = base / ("open-" + std::to_string(mode));
    fs::create_directories(dir);
    ASSERT_EQ(::chmod(dir.c_str(), static_cast<mode_t>(mode)), 0);
    const auto db = dir / "gf.db";
    auto s = Db::open(db.string());
    ASSERT_FALSE(s) << std::oct << mode;
    EXPECT_EQ(s.error().kind, ErrorKind::Permission);
    EXPECT_NE(s.error().message.find(dir.string() + ", a directory other users can write"), std::string::npos)
        << s.error().message;
    char text[8];
    std::snprintf(text, sizeof text, "%04o", mode);
    EXPECT_NE(s.error().message.find(text), std::string::npos) << s.error().message;
    EXPECT_FALSE(fs::exists(db)) << "nothing is created in a refused directory";
  }
  const auto mine = base / "private";
  fs::create_directories(mine);
  ASSERT_EQ(::chmod(mine.c_str(), 0755), 0);
  EXPECT_TRUE(Db::open((mine / "gf.db").string()));
}

// Group-writable: refused when the group has other users in it, accepted when it is the owner's own
// private group (0775 is what a umask of 002 makes under the user-private-group scheme).
TEST_F(StoreFiles, AGroupWritableDirectoryIsRefusedUnlessTheGroupIsTheOwnersOwn) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto shared = base / "team";
  fs::create_directories(shared);
  ASSERT_EQ(::chown(shared.c_str(), 0, b->gid), 0);  // root's directory, gf-test-b's group may write
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  auto s = Db::open((shared / "gf.db").string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("other users can write (mode 0775)"), std::string::npos) << s.error().message;

  const auto own = base / "own-group";
  fs::create_directories(own);
  ASSERT_EQ(::chown(own.c_str(), b->uid, b->gid), 0);
  ASSERT_EQ(::chmod(own.c_str(), 0775), 0);
  if (!platform::is_private_group(b->gid, b->uid)) GTEST_SKIP() << "gf-test-b has no private group here";
  // Opened as gf-test-b itself (the directory is its own): a child that drops to its uid.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(b->gid) != 0 || ::setuid(b->uid) != 0) ::_exit(2);
    ::_exit(Db::open((own / "gf.db").string()) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "gf-test-b could not open a store in its own 0775 "
                                                                "directory of its private group";
}

// A directory another user owns (even one only they can write) could be opened up by them at any time.
TEST_F(StoreFiles, AStoreInADirectoryAnotherUserOwnsIsRefused) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto dir = base / "theirs";
  fs::create_directories(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chown(dir.c_str(), b->uid, b->gid), 0);
  auto s = Db::open((dir / "gf.db").string());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().kind, ErrorKind::Permission);
  EXPECT_NE(s.error().message.find("owned by gf-test-b"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find(dir.string()), std::string::npos) << s.error().message;
}

// The -wal, -shm and -journal files next to the store: a link there (to someone's database, or to a
// file root owns) is refused, naming it, and its target is left as it was.
TEST_F(StoreFiles, APlantedWalLinkIsRefusedAndItsTargetUntouched) {
  const auto db = base / "gf.db";
  {
    auto t = Db::open(db.string());
    ASSERT_TRUE(t) << t.error().message;
  }
  const auto victim = base / "victim";
  std::ofstream(victim) << "keep me\n";
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const auto planted = base / (std::string("gf.db") + suffix);
    fs::remove(planted);
    fs::create_symlink(victim, planted);
    auto s = Db::open(db.string());
    ASSERT_FALSE(s) << suffix;
    EXPECT_EQ(s.error().kind, ErrorKind::Permission);
    EXPECT_NE(s.error().message.find(planted.string() + " is a symbolic link"), std::string::npos) << s.error().message;
    EXPECT_EQ(test::slurp(victim), "keep me\n");
    fs::remove(planted);
  }
  const auto fifo = base / "gf.db-shm";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto s = Db::open(db.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(fifo.string() + " is not a regular file"), std::string::npos) << s.error().message;
  fs::remove(fifo);
  EXPECT_TRUE(Db::open(db.string())) << "with the planted files gone the store opens again";
}

// A regular -wal that another user made (before the directory was private, or by a store moved in):
// SQLite would replay it into the store. Refused, naming the file and its owner; left as it was.
TEST_F(StoreFiles, AWalOwnedByAnotherUserIsRefused) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto db = base / "gf.db";
  {
    auto t = Db::open(db.string());
    ASSERT_TRUE(t) << t.error().message;
  }
  const auto wal = base / "gf.db-wal";
  std::ofstream(wal) << "forged frames";
  ASSERT_EQ(::chown(wal.c_str(), b->uid, b->gid), 0);
  auto s = NodeStore::open(db.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(wal.string() + " is owned by gf-test-b"), std::string::npos) << s.error().message;
  EXPECT_EQ(test::slurp(wal), "forged frames");
}

}  // namespace
}  // namespace gf::store
