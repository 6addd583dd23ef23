#pragma once
// A minimal stderr log line for the loops (the project has no logging library): "gpufleet: <component>:
// <message>". Control characters in the message (it may carry text a driver or another process wrote)
// are written as \xNN, so the line cannot move a terminal's cursor or end early. Thread-safe: one
// write(2) per line.
#include <string>
#include <string_view>

namespace gf::platform {

// The message with every byte below 0x20 and 0x7f written as \xNN, and '\\' as "\\\\".
std::string escape_control(std::string_view text);

void log_line(std::string_view component, std::string_view message);

}  // namespace gf::platform
