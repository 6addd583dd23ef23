// libFuzzer target for the pods/exec stream decoder (cluster/exec_protocol.hpp): the binary WebSocket
// messages an API server (and through it a container) sends, and the Status on the error channel.
// Input: byte 0 picks v4 (even) or v5 (odd) and the output bound; then messages, each a length byte
// followed by that many bytes. Crashes, sanitizer reports and the invariant traps below are findings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/exec_protocol.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace cl = gf::cluster;
  if (size == 0) return 0;
  const bool v5 = (data[0] & 1) != 0;
  const std::size_t bound = 1 + (data[0] >> 1);  // 1..128 bytes per stream
  cl::ExecStreams streams(v5, bound);
  std::size_t at = 1;
  while (at < size) {
    const std::size_t len = data[at++];
    const std::size_t take = len < size - at ? len : size - at;
    const std::string_view message(reinterpret_cast<const char*>(data) + at, take);
    at += take;
    if (!streams.feed(message)) break;  // a broken stream is abandoned, as the client does
    check(streams.out().size() <= bound && streams.err().size() <= bound);
  }
  if (auto st = streams.finish()) {
    check(!st->success || st->exit_code == 0);
    check(!st->exit_code || (*st->exit_code >= 0 && *st->exit_code <= 255));
    for (const char c : st->message) check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F);
    for (const char c : st->reason) check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7F);
  }
  // The whole input as one Status, too.
  (void)cl::parse_exec_status(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
