#pragma once
// Small string_view helpers shared by the DRM backends' parsers (amdgpu, intel), beside core/text.hpp's
// trim and iequals. All are noexcept and allocation-free, so the parsers built on them stay safe on any
// input (parse_decimal is typed and allocates no error, unlike core::parse_uint: it runs per fdinfo key).
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

namespace gf::backends::drm::text {

// Splits off the next line (without its '\n') from the front of text.
constexpr std::string_view next_line(std::string_view& text) noexcept {
  const std::size_t nl = text.find('\n');
  const std::string_view line = text.substr(0, nl);
  text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  return line;
}

// A whole-string decimal of type T. from_chars reports overflow instead of wrapping, refuses blanks
// and '+', and accepts '-' only for signed T — matching the kernel's "%d"/"%u"/"%llu" output.
template <class T>
std::optional<T> parse_decimal(std::string_view s) noexcept {
  T v{};
  if (s.empty()) return std::nullopt;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// The leading decimal digits of s, and what follows them.
constexpr std::pair<std::string_view, std::string_view> split_number(std::string_view s) noexcept {
  std::size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  return {s.substr(0, n), s.substr(n)};
}

}  // namespace gf::backends::drm::text
