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

}  // namespace gf::platform
