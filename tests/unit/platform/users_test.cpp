// platform::user_in_group, which decides who is an admin of the node's arbiter (admin_group, issue 12):
// a member of the group may set priorities above the ceiling and release others' leases, so a wrong
// "yes" is a privilege escalation and a wrong "no" locks the admins out.
#include "platform/users.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/test_users.hpp"

namespace gf::platform {
namespace {

std::string group_name(gid_t gid) {
  ::group gr{};
  ::group* res = nullptr;
  char buf[16384];
  if (::getgrgid_r(gid, &gr, buf, sizeof buf, &res) != 0 || !res) return {};
  return res->gr_name;
}

TEST(Users, NamesAndNumbers) {
  EXPECT_EQ(user_name(0), "root");
  EXPECT_EQ(user_name(4000000000u), "4000000000") << "a uid without an account is its number";
}

TEST(Users, NoGroupNoAccountOrEmptyNameIsNotAMember) {
  EXPECT_FALSE(user_in_group(::geteuid(), ""));
  EXPECT_FALSE(user_in_group(::geteuid(), "gf-no-such-group-here"));
  const std::string mine = group_name(::getegid());
  ASSERT_FALSE(mine.empty()) << "this process's group has no name";
  EXPECT_FALSE(user_in_group(4000000000u, mine)) << "a uid without an account belongs to nothing";
}

// The account's primary group (from the password database, not this process's credentials).
TEST(Users, ThePrimaryGroupCounts) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[16384];
  ASSERT_EQ(::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res), 0);
  ASSERT_NE(res, nullptr) << "this process's uid has no account";
  const std::string primary = group_name(res->pw_gid);
  ASSERT_FALSE(primary.empty());
  EXPECT_TRUE(user_in_group(::geteuid(), primary));
}

// Supplementary membership, as /etc/group lists it: gf-test-b is in gf-test-admins, gf-test-a is not.
TEST(Users, SupplementaryMembersAreMembersAndOthersAreNot) {
  std::string why;
  const auto a = test::test_user("gf-test-a", &why);
  const auto b = a ? test::test_user("gf-test-b", &why) : std::nullopt;
  if (!a || !b) GTEST_SKIP() << why;
  if (!test::test_group("gf-test-admins", {b->name}, &why)) GTEST_SKIP() << why;
  EXPECT_TRUE(user_in_group(b->uid, "gf-test-admins"));
  EXPECT_FALSE(user_in_group(a->uid, "gf-test-admins"));
  EXPECT_TRUE(user_in_group(b->uid, group_name(b->gid)));
  if (a->gid != b->gid) {
    EXPECT_FALSE(user_in_group(b->uid, group_name(a->gid))) << "a's own group is not b's";
  }
}

// The user-private-group scheme: gf-test-b's own group (useradd makes one named after it) is private
// to it; the same group is not private to gf-test-a, and a group with a member is no one's.
TEST(Users, PrivateGroupIsTheAccountsOwnAndNoOneElses) {
  std::string why;
  const auto a = test::test_user("gf-test-a", &why);
  const auto b = a ? test::test_user("gf-test-b", &why) : std::nullopt;
  if (!a || !b) GTEST_SKIP() << why;
  if (!test::test_group("gf-test-admins", {b->name}, &why)) GTEST_SKIP() << why;
  if (group_name(b->gid) != b->name) GTEST_SKIP() << "useradd made no group named after gf-test-b here";
  EXPECT_TRUE(is_private_group(b->gid, b->uid));
  EXPECT_FALSE(is_private_group(b->gid, a->uid));
  ::group gr{};
  ::group* res = nullptr;
  char buf[16384];
  ASSERT_EQ(::getgrnam_r("gf-test-admins", &gr, buf, sizeof buf, &res), 0);
  ASSERT_NE(res, nullptr);
  EXPECT_FALSE(is_private_group(res->gr_gid, b->uid)) << "not named after gf-test-b";
  EXPECT_FALSE(is_private_group(4000000000u, b->uid));
}

}  // namespace
}  // namespace gf::platform
