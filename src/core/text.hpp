#pragma once
// The small text helpers every room needs, written once: trimming, ASCII lower case, bounded unsigned
// decimals (std::from_chars, never stoll), the one duration grammar ("90s", "15m", "2h", "7d") and the
// message of the exception being handled. Pure, no locale, no allocation beyond the returned string.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace gf::core {

// Without leading and trailing spaces, tabs, carriage returns and newlines.
std::string_view trim(std::string_view s) noexcept;
// ASCII letters in lower case; other bytes as they are (header names, units, model names).
std::string lower(std::string_view s);
// True when `s` equals `t` ignoring ASCII case.
bool iequals(std::string_view s, std::string_view t) noexcept;

// An unsigned decimal made of digits only (no sign, no space, no "0x"), from `min` to `max` inclusive.
// The error names neither the source nor the key: callers add their context with with_context().
Result<std::uint64_t> parse_uint(std::string_view s, std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);

// The one duration grammar: digits and a unit, s (seconds), m (minutes), h (hours) or d (days), and,
// when the caller allows it, bare digits as seconds. Zero is refused; at most `max`.
enum class BareNumber : bool { Refused, Seconds };
Result<std::chrono::seconds> parse_duration(std::string_view s, BareNumber bare = BareNumber::Refused,
                                            std::chrono::seconds max = std::chrono::hours(24 * 365 * 200));

// The message of the exception being handled, for a catch (...) block: what() of a std::exception,
// "an exception that is not a std::exception" otherwise. Call it only inside a handler.
std::string current_exception_message();

}  // namespace gf::core
