#pragma once
// A minimal stderr log line for the loops (the project has no logging library): "gpufleet: <component>:
// <message>". Control characters in the message (it may carry text a driver or another process wrote)
// are written as \xNN, so the line cannot move a terminal's cursor or end early. Thread-safe: one
// write(2) per line.
#include <string>
#include <string_view>

namespace gf::platform {

// Text that a process or another user controls (command lines, job and lease names, user names), made
// safe to show on a terminal: C0 controls and DEL as \xNN, the UTF-8 C1 controls U+0080..U+009F (which
// a UTF-8 terminal obeys like ESC sequences) as \u00NN. Everything else, other UTF-8 included, is kept.
// Only for text output: --json keeps the exact text (JSON escapes what it must).
std::string printable(std::string_view text);
// The same for text of any length from outside (a server's answer, a pod's name): its first max_bytes
// bytes, then "…" when it was longer.
std::string printable(std::string_view text, std::size_t max_bytes);

// printable(), with '\\' also written as "\\\\" so that a log line reads back unambiguously.
std::string escape_control(std::string_view text);

void log_line(std::string_view component, std::string_view message);

}  // namespace gf::platform
