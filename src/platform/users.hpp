#pragma once
// Unix accounts, for the agent socket's peers: a uid's name and whether it belongs to a group.
// Thread-safe (the _r lookups).
#include <cstdint>
#include <string>

namespace gf::platform {

// The account name of uid, or the number as text when it has none.
std::string user_name(std::uint32_t uid);
// True when uid's account has `group` as its primary or a supplementary group (getgrouplist).
// False when the group or the account does not exist, or group is empty.
bool user_in_group(std::uint32_t uid, const std::string& group);
// True when gid is uid's own private group: named like uid's account and listing no member but it (the
// user-private-group scheme, where a umask of 002 makes a user's directories 0775). Another account
// whose primary group it is would not be seen: that is the scheme's own assumption.
bool is_private_group(std::uint32_t gid, std::uint32_t uid);

}  // namespace gf::platform
