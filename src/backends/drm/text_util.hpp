#pragma once
// Small string_view helpers shared by the DRM backends' parsers (amdgpu, intel). All are
// noexcept and allocation-free, so the parsers built on them stay safe on any input.
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

namespace gf::backends::drm::text {

constexpr bool is_blank(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

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

constexpr char lower_ascii(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool iequals_ascii(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower_ascii(a[i]) != lower_ascii(b[i])) return false;
  return true;
}

}  // namespace gf::backends::drm::text
