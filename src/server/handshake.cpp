#include "server/handshake.hpp"

#include <algorithm>
#include <charconv>

#include "server/security.hpp"

namespace gf::server {

bool period_from_query(const std::map<std::string, std::string>& query,
                       std::optional<std::chrono::milliseconds>& period) {
  period.reset();
  auto it = query.find("period_ms");
  if (it == query.end()) return true;
  const std::string& v = it->second;
  const bool digits =
      !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return false;
  long long ms = 0;
  std::from_chars(v.data(), v.data() + v.size(), ms);
  period = std::chrono::milliseconds(ms);
  return true;
}

std::vector<std::string> offered_subprotocols(std::string_view header) {
  std::vector<std::string> protocols;
  for (std::size_t pos = 0; pos <= header.size();) {
    const auto comma = std::min(header.find(',', pos), header.size());
    std::string_view p = header.substr(pos, comma - pos);
    while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
    while (!p.empty() && p.back() == ' ') p.remove_suffix(1);
    if (!p.empty()) protocols.emplace_back(p);
    pos = comma + 1;
  }
  return protocols;
}

bool ws_token_ok(std::string_view authorization, const std::vector<std::string>& protocols, std::string_view token) {
  if (bearer_ok(authorization, token)) return true;
  constexpr std::string_view kPrefix = "gpufleet.bearer.";
  return std::any_of(protocols.begin(), protocols.end(), [&](const std::string& p) {
    return p.rfind(kPrefix, 0) == 0 && bearer_ok("Bearer " + p.substr(kPrefix.size()), token);
  });
}

}  // namespace gf::server
