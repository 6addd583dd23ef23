#include "platform/users.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

namespace gf::platform {

std::string user_name(std::uint32_t uid) {
  passwd pw{};
  passwd* res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &res) != 0 || !res || !res->pw_name)
    return std::to_string(uid);
  return res->pw_name;
}

bool user_in_group(std::uint32_t uid, const std::string& group) {
  if (group.empty()) return false;
  std::vector<char> buf(16384);
  ::group gr{};
  ::group* gres = nullptr;
  if (::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &gres) != 0 || !gres) return false;
  const gid_t want = gres->gr_gid;
  passwd pw{};
  passwd* res = nullptr;
  std::vector<char> pbuf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, pbuf.data(), pbuf.size(), &res) != 0 || !res) return false;
  if (res->pw_gid == want) return true;
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  if (::getgrouplist(res->pw_name, res->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(res->pw_name, res->pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<std::size_t>(i)] == want) return true;
  return false;
}

bool is_private_group(std::uint32_t gid, std::uint32_t uid) {
  std::vector<char> buf(16384);
  ::group gr{};
  ::group* gres = nullptr;
  if (::getgrgid_r(static_cast<gid_t>(gid), &gr, buf.data(), buf.size(), &gres) != 0 || !gres || !gres->gr_name)
    return false;
  passwd pw{};
  passwd* res = nullptr;
  std::vector<char> pbuf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, pbuf.data(), pbuf.size(), &res) != 0 || !res || !res->pw_name)
    return false;
  const std::string user = res->pw_name;
  if (user != gres->gr_name) return false;
  for (char** m = gres->gr_mem; m && *m; ++m)
    if (user != *m) return false;
  return true;
}

}  // namespace gf::platform
