// libFuzzer target for Accept-Encoding negotiation (server::accepts_gzip: a header any client sends) and
// for wire/gzip's members, read back with zlib's inflate. Crashes, sanitizer reports and the traps below
// are findings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http.hpp"
#include "wire/gzip.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const bool gzip = gf::server::accepts_gzip(text);
  // Another coding listed first, or an empty element after, changes nothing.
  check(gf::server::accepts_gzip("identity, " + std::string(text)) == gzip);
  check(gf::server::accepts_gzip(std::string(text) + ",") == gzip);

  // The input as a document: a whole member, and a member split where its first byte says.
  if (size <= 8192) {
    check(gf::wire::gunzip(gf::wire::gzip(text, 1)) == text);
    const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
    const auto head = gf::wire::gzip_head(text.substr(0, cut), 1);
    check(gf::wire::gunzip(head.bytes + gf::wire::gzip_tail(head, text.substr(cut))) == text);
  }
  return 0;
}
