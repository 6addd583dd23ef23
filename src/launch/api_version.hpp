#pragma once
// Docker Engine API versions ("1.41") as comparable numbers. Internal to gf_launch.
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

namespace gf::launch {

// "1.41" → {1, 41}; anything else → nullopt.
inline std::optional<std::pair<int, int>> parse_api_version(std::string_view v) {
  const auto dot = v.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == v.size()) return std::nullopt;
  int major = 0;
  int minor = 0;
  const char* end = v.data() + v.size();
  const auto a = std::from_chars(v.data(), v.data() + dot, major);
  const auto b = std::from_chars(v.data() + dot + 1, end, minor);
  if (a.ec != std::errc{} || a.ptr != v.data() + dot || b.ec != std::errc{} || b.ptr != end) return std::nullopt;
  return std::pair{major, minor};
}

}  // namespace gf::launch
