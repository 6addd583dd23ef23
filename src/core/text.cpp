#include "core/text.hpp"

#include <charconv>
#include <exception>
#include <limits>

namespace gf::core {

std::string_view trim(std::string_view s) noexcept {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

namespace {
constexpr char lower_ascii(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower_ascii(c);
  return out;
}

bool iequals(std::string_view s, std::string_view t) noexcept {
  if (s.size() != t.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (lower_ascii(s[i]) != lower_ascii(t[i])) return false;
  return true;
}

Result<std::uint64_t> parse_uint(std::string_view s, std::uint64_t min, std::uint64_t max) {
  auto range = [&] {
    return make_error(ErrorKind::Invalid, "expected a whole number from " + std::to_string(min) + " to " +
                                              std::to_string(max) + ", got '" + std::string(s.substr(0, 40)) + "'");
  };
  // from_chars accepts a leading '-' for signed types only, but say it plainly: digits and nothing else.
  if (s.empty() || s.front() < '0' || s.front() > '9') return range();
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < min || v > max) return range();
  return v;
}

Result<std::chrono::seconds> parse_duration(std::string_view s, BareNumber bare, std::chrono::seconds max) {
  auto bad = [&] {
    return make_error(ErrorKind::Invalid, "'" + std::string(s.substr(0, 40)) +
                                              "': expected a duration like 90s, 15m, 2h or 7d" +
                                              (bare == BareNumber::Seconds ? " or a number of seconds" : ""));
  };
  if (s.empty()) return bad();
  const char u = s.back();
  long long mult = 1;
  bool unit = true;
  switch (u) {
    case 's': mult = 1; break;
    case 'm': mult = 60; break;
    case 'h': mult = 3600; break;
    case 'd': mult = 86400; break;
    default:
      if (bare != BareNumber::Seconds) return bad();
      unit = false;
  }
  const std::string_view digits = unit ? s.substr(0, s.size() - 1) : s;
  auto n = parse_uint(digits, 0, static_cast<std::uint64_t>(std::numeric_limits<long long>::max()));
  if (!n) return bad();
  if (*n == 0)
    return make_error(ErrorKind::Invalid, "'" + std::string(s.substr(0, 40)) + "': a duration must be positive");
  const auto limit = static_cast<std::uint64_t>(max.count() / mult);
  if (*n > limit)
    return make_error(ErrorKind::Invalid, "'" + std::string(s.substr(0, 40)) + "': a duration must be at most " +
                                              std::to_string(max.count()) + " s");
  return std::chrono::seconds(static_cast<long long>(*n) * mult);
}

std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace gf::core
