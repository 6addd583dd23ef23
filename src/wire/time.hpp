#pragma once
// Times on the wire: ISO 8601 in UTC, written one way (iso8601) and read by one strict parser
// (parse_iso8601) — the agent client, the fleet's agent source and the history route's since/until all
// read with it. Pure, locale-free.
#include <chrono>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace gf::wire {

// "2025-03-04T23:02:50.123456Z" (UTC, microseconds).
std::string iso8601(std::chrono::system_clock::time_point t);

// YYYY-MM-DDTHH:MM:SS[.f…](Z|+00:00): every field its fixed number of digits, 1 to 9 digits of a second,
// a date that exists, hours to 23, minutes to 59, seconds to 60 (a leap second), years 1970 to 2199 (a
// nanosecond system_clock ends in 2262). Anything else, spaces included, is an error:
// "'<text>' is not an ISO 8601 UTC time" (the text cut to 64 bytes).
Result<std::chrono::system_clock::time_point> parse_iso8601(std::string_view text);

}  // namespace gf::wire
