#include "wire/time.hpp"

#include <fmt/format.h>

#include <ctime>

namespace gf::wire {

std::string iso8601(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long long frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

namespace {

constexpr int kFirstYear = 1970;
constexpr int kEndYear = 2200;

// The `n` digits at `at` as a number; false when one of them is not a digit or the text ends first.
bool fixed_digits(std::string_view s, std::size_t at, std::size_t n, int& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

Result<std::chrono::system_clock::time_point> parse_iso8601(std::string_view t) {
  using namespace std::chrono;
  auto bad = [&] {
    return make_error(ErrorKind::Invalid, fmt::format("'{}' is not an ISO 8601 UTC time", t.substr(0, 64)));
  };
  int Y = 0, M = 0, D = 0, h = 0, m = 0, s = 0;
  if (!(fixed_digits(t, 0, 4, Y) && t.size() > 19 && t[4] == '-' && fixed_digits(t, 5, 2, M) && t[7] == '-' &&
        fixed_digits(t, 8, 2, D) && t[10] == 'T' && fixed_digits(t, 11, 2, h) && t[13] == ':' &&
        fixed_digits(t, 14, 2, m) && t[16] == ':' && fixed_digits(t, 17, 2, s)))
    return bad();
  std::size_t at = 19;
  nanoseconds frac{0};
  if (t[at] == '.') {
    const std::size_t start = ++at;
    long long ns = 0;
    while (at < t.size() && t[at] >= '0' && t[at] <= '9' && at - start < 9) ns = ns * 10 + (t[at++] - '0');
    const std::size_t n = at - start;
    if (n == 0) return bad();
    for (std::size_t i = n; i < 9; ++i) ns *= 10;
    frac = nanoseconds(ns);
  }
  const std::string_view zone = t.substr(at);
  if (zone != "Z" && zone != "+00:00") return bad();
  const year_month_day ymd{year(Y), month(static_cast<unsigned>(M)), day(static_cast<unsigned>(D))};
  if (!ymd.ok() || Y < kFirstYear || Y >= kEndYear || h > 23 || m > 59 || s > 60) return bad();
  return time_point_cast<system_clock::duration>(sys_days(ymd) + hours(h) + minutes(m) + seconds(s) + frac);
}

}  // namespace gf::wire
