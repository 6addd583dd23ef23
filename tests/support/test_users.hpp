#pragma once
// Unix users for the shared-node tests (issue 12): a test that reproduces an attack by one user on
// another needs a second, unprivileged account. When the suite runs as root the accounts are created
// once (useradd, no home, no login shell) and reused; otherwise the caller skips with the reason.
//
//   std::string why;
//   auto b = gf::test::test_user("gf-test-b", &why);
//   if (!b) GTEST_SKIP() << why;
//   auto out = gf::platform::run_process(b->as({GF_BINARY, "leases"}), {});
#include <grp.h>
#include <pwd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace gf::test {

struct TestUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  // argv run as this user: setpriv drops to the uid and gid with no supplementary groups.
  std::vector<std::string> as(std::vector<std::string> argv) const {
    std::vector<std::string> out{"setpriv", "--reuid=" + std::to_string(uid), "--regid=" + std::to_string(gid),
                                 "--clear-groups", "--"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
};

inline std::optional<TestUser> lookup_user(const std::string& name) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &res) != 0 || !res) return std::nullopt;
  return TestUser{name, res->pw_uid, res->pw_gid};
}

// The user `name` (it must start with "gf-test-"), created when missing. nullopt, with *why saying so,
// when the suite does not run as root or the account cannot be made.
inline std::optional<TestUser> test_user(const std::string& name, std::string* why) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (name.rfind("gf-test-", 0) != 0) {
    if (why) *why = "test users are named gf-test-*";
    return std::nullopt;
  }
  if (::geteuid() != 0) {
    if (why) *why = "needs root to create the second Unix user " + name + " (run the suite as root)";
    return std::nullopt;
  }
  if (auto u = lookup_user(name)) return u;
  const std::string cmd = "useradd --system --no-create-home --shell /usr/sbin/nologin " + name + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  if (auto u = lookup_user(name)) return u;
  if (why) *why = "cannot create the Unix user " + name + " (useradd exit " + std::to_string(rc) + ")";
  return std::nullopt;
}

// The group `name` (it must start with "gf-test-"), created when missing, with `members` (test users)
// added to it as supplementary members in /etc/group (what getgrouplist reads). false, with *why
// saying so, when not root or groupadd/gpasswd fail.
inline bool test_group(const std::string& name, const std::vector<std::string>& members, std::string* why) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (name.rfind("gf-test-", 0) != 0) {
    if (why) *why = "test groups are named gf-test-*";
    return false;
  }
  if (::geteuid() != 0) {
    if (why) *why = "needs root to create the Unix group " + name + " (run the suite as root)";
    return false;
  }
  ::group gr{};
  ::group* res = nullptr;
  char buf[16384];
  if (getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &res) != 0 || !res) {
    const int rc = std::system(("groupadd --system " + name + " >/dev/null 2>&1").c_str());
    if (getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &res) != 0 || !res) {
      if (why) *why = "cannot create the Unix group " + name + " (groupadd exit " + std::to_string(rc) + ")";
      return false;
    }
  }
  for (const auto& m : members) {
    if (m.rfind("gf-test-", 0) != 0) {
      if (why) *why = "only test users join test groups";
      return false;
    }
    bool already = false;
    for (char** p = res->gr_mem; p && *p; ++p) already |= m == *p;
    if (already) continue;
    // Retried: another test process may hold /etc/group's lock for a moment.
    const int rc = std::system(("for i in 1 2 3 4 5 6 7 8 9 10; do gpasswd -a " + m + " " + name +
                                " >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1")
                                   .c_str());
    if (rc != 0) {
      if (why) *why = "cannot add " + m + " to " + name + " (gpasswd exit " + std::to_string(rc) + ")";
      return false;
    }
  }
  return true;
}

}  // namespace gf::test
