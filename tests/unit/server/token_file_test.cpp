// The agent's token file (issue 12): it used to be read following links and trusted whoever owned it;
// a dangling or unreadable one made load_or_create_token call itself forever (SIGSEGV at start).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "server/security.hpp"
#include "support/temp_dir.hpp"
#include "support/test_users.hpp"

namespace gf::server {
namespace {

namespace fs = std::filesystem;

struct TokenFile : ::testing::Test {
  test::TempDir tmp;
  fs::path base;
  std::string saved_env;
  bool had_env = false;
  void SetUp() override {
    base = tmp.path();
    if (const char* e = std::getenv("GPUFLEET_TOKEN")) {
      had_env = true;
      saved_env = e;
    }
    ::unsetenv("GPUFLEET_TOKEN");
  }
  void TearDown() override {
    if (had_env) ::setenv("GPUFLEET_TOKEN", saved_env.c_str(), 1);
  }
  fs::path good(const std::string& name, const std::string& text = "s3cret\n") {
    const auto p = base / name;
    std::ofstream(p) << text;
    ::chmod(p.c_str(), 0600);
    return p;
  }
  // The error for `p`, which must name it; an accepted file is a failed test.
  std::string refused(const fs::path& p) {
    bool created = true;
    auto t = load_or_create_token(p.string(), &created);
    EXPECT_FALSE(t) << p << " was accepted";
    EXPECT_FALSE(created);
    if (t) return "";
    EXPECT_NE(t.error().message.find(p.string()), std::string::npos) << t.error().message;
    EXPECT_EQ(t.error().message.find('\n'), std::string::npos) << t.error().message;
    return t.error().message;
  }
};

TEST_F(TokenFile, ANewTokenIsCreatedPrivateInAPrivateDirectory) {
  const auto p = base / "etc" / "agent.token";
  bool created = false;
  auto t = load_or_create_token(p.string(), &created);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(created);
  EXPECT_EQ(t->size(), 64u);
  struct stat st {};
  ASSERT_EQ(::lstat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(p.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // Read back the second time.
  auto again = load_or_create_token(p.string(), &created);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(created);
  EXPECT_EQ(*again, *t);
}

// Three agents sharing one token file start at once (the CI failure of stop 16): one creates it, the
// others must read the same token, never a file created but not yet written ("is empty").
TEST_F(TokenFile, AgentsStartingAtOnceAllGetTheOneToken) {
  for (int round = 0; round < 50; ++round) {
    const auto p = base / ("agent-" + std::to_string(round) + ".token");
    constexpr int kAgents = 6;
    std::vector<std::string> got(kAgents);
    std::vector<int> made(kAgents, 0);
    std::vector<std::thread> agents;
    for (int i = 0; i < kAgents; ++i)
      agents.emplace_back([&, i] {
        bool created = false;
        auto t = load_or_create_token(p.string(), &created);
        got[static_cast<std::size_t>(i)] = t ? *t : "error: " + t.error().message;
        made[static_cast<std::size_t>(i)] = created ? 1 : 0;
      });
    for (auto& a : agents) a.join();
    int creators = 0;
    for (int i = 0; i < kAgents; ++i) {
      EXPECT_EQ(got[static_cast<std::size_t>(i)].size(), 64u) << got[static_cast<std::size_t>(i)];
      EXPECT_EQ(got[static_cast<std::size_t>(i)], got[0]);
      creators += made[static_cast<std::size_t>(i)];
    }
    EXPECT_EQ(creators, 1);
  }
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(base))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(TokenFile, AGoodFileIsRead) {
  auto t = load_or_create_token(good("agent.token", "abc \r\nsecond line\n").string(), nullptr);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(*t, "abc");
}

TEST_F(TokenFile, ADanglingSymlinkIsAnErrorNotARecursion) {
  const auto p = base / "agent.token";
  fs::create_symlink(base / "nowhere", p);
  EXPECT_NE(refused(p).find("symbolic link"), std::string::npos);
  EXPECT_FALSE(fs::exists(base / "nowhere"));  // nothing created through the link
}

TEST_F(TokenFile, ASymlinkToAGoodFileIsRefused) {
  const auto target = good("real.token");
  const auto p = base / "agent.token";
  fs::create_symlink(target, p);
  EXPECT_NE(refused(p).find("symbolic link"), std::string::npos);
}

TEST_F(TokenFile, ADirectoryIsRefused) {
  const auto p = base / "agent.token";
  fs::create_directories(p);
  EXPECT_NE(refused(p).find("not a regular file"), std::string::npos);
}

TEST_F(TokenFile, AnEmptyFileIsRefused) {
  EXPECT_NE(refused(good("agent.token", "")).find("empty"), std::string::npos);
}

TEST_F(TokenFile, AFileWritableByOthersIsRefused) {
  const auto p = good("agent.token");
  ::chmod(p.c_str(), 0666);
  EXPECT_NE(refused(p).find("writable by others"), std::string::npos);
  ::chmod(p.c_str(), 0620);
  EXPECT_NE(refused(p).find("writable by others"), std::string::npos);
}

TEST_F(TokenFile, AFileOwnedByAnotherUserIsRefused) {
  std::string why;
  const auto b = gf::test::test_user("gf-test-b", &why);
  if (!b) GTEST_SKIP() << why;
  const auto p = good("agent.token");
  ASSERT_EQ(::chown(p.c_str(), b->uid, b->gid), 0);
  EXPECT_NE(refused(p).find("owned by uid " + std::to_string(b->uid)), std::string::npos);
}

// Unreadable: as root every permission bit is bypassed, so the test drops to the second user, who
// owns a file it may not read (mode 0200 by its owner).
TEST_F(TokenFile, AnUnreadableFileIsAnError) {
  const auto p = good("agent.token");
  ::chmod(p.c_str(), 0200);
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file; the unreadable case runs in the integration test";
  EXPECT_NE(refused(p).find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace gf::server
