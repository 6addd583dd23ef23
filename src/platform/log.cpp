#include "platform/log.hpp"

#include <unistd.h>

namespace gf::platform {

std::string escape_control(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out;
}

void log_line(std::string_view component, std::string_view message) {
  std::string line = "gpufleet: ";
  line += escape_control(component);
  line += ": ";
  line += escape_control(message);
  line += '\n';
  // One write: lines from several threads do not interleave. A failed log write has nowhere to go.
  std::size_t off = 0;
  while (off < line.size()) {
    const auto n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace gf::platform
