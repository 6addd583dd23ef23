#include "platform/log.hpp"

#include <unistd.h>

namespace gf::platform {

namespace {

std::string escape(std::string_view text, bool backslash) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == '\\' && backslash) {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F in UTF-8
      out += "\\u00";
      out += kHex[next >> 4];
      out += kHex[next & 0xf];
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text) { return escape(text, false); }

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out = escape(text.substr(0, max_bytes), false);
  if (text.size() > max_bytes) out += "…";
  return out;
}

std::string escape_control(std::string_view text) { return escape(text, true); }

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
