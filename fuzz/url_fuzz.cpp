// libFuzzer target for the URL display functions (platform/url.hpp): they take operator-given URLs and
// the free text of libcurl's errors, and decide what of them a reader may see. A URL shown must never
// carry userinfo, whatever the input. Crashes, sanitizer reports and the traps below are findings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "platform/url.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace p = gf::platform;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const std::string shown = p::url_for_display(text);
  check(!p::url_has_userinfo(shown));                    // nothing of the userinfo is left
  check(p::url_for_display(shown) == shown);             // and showing again changes nothing
  if (!p::url_has_userinfo(text)) check(shown == text);  // a URL without userinfo is shown as given
  check(shown.size() <= text.size() + 16);               // "(hidden)" at most

  const std::string redacted = p::redact_urls(text);
  check(p::redact_urls(redacted) == redacted);  // every URL in it is already shown safely
  if (text.find("://") == std::string_view::npos) check(redacted == text);
  return 0;
}
