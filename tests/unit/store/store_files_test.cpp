// The store file and its directory (issue 12): a store path that is a link to another user's database
// used to be written, a store owned by another user was opened by root, and new stores were 0644.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/subprocess.hpp"
#include "store/node_store.hpp"
#include "store/sqlite.hpp"
#include "support/test_users.hpp"

namespace gf::store {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct StoreFiles : ::testing::Test {
  fs::path base;
  void SetUp() override {
    base = fs::temp_directory_path() / ("gf-storefiles-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base);
    fs::create_directories(base);
  }
  void TearDown() override { fs::remove_all(base); }
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
  const auto before = slurp(target);
  const auto link = base / "gf.db";
  fs::create_symlink(target, link);
  auto s = NodeStore::open(link.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(link.string()), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find("symbolic link"), std::string::npos) << s.error().message;
  EXPECT_EQ(slurp(target), before);
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

// The wake-up file through the store (issue 12, the critical finding): a user who can write the
// store's directory plants `<db>.changed` as a link to a root-owned file; a lease taken and released
// by the (root) store must leave that file as it was.
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

  EXPECT_EQ(slurp(victim), "root's data\n");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace gf::store
