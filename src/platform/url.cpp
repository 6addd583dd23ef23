// URLs for display (see url.hpp).
#include "platform/url.hpp"

#include <algorithm>
#include <cctype>

#include "core/text.hpp"

namespace gf::platform {
namespace {

bool scheme_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
}

struct Split {
  std::size_t authority = 0;                // where the authority starts (after "://")
  std::size_t end = 0;                      // where it ends (the first '/', '?' or '#', or the size)
  std::size_t at = std::string_view::npos;  // the last '@' inside it
  bool ambiguous = false;                   // an '@' after the authority
};

// RFC 3986's split: the authority runs from "://" to the first '/', '?' or '#', and its userinfo up
// to the last '@' in it (an '@' cannot be part of a host). `scheme_end` is the position of "://".
Split split(std::string_view url, std::size_t scheme_end) {
  Split s;
  s.authority = scheme_end + 3;
  s.end = std::min(url.find_first_of("/?#", s.authority), url.size());
  const auto at = url.substr(s.authority, s.end - s.authority).rfind('@');
  if (at != std::string_view::npos) s.at = s.authority + at;
  s.ambiguous = url.find('@', s.end) != std::string_view::npos;
  return s;
}

}  // namespace

std::string url_for_display(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url);
  const Split s = split(url, scheme_end);
  if (s.ambiguous) return std::string(url.substr(0, s.authority)) + "(hidden)";
  if (s.at == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, s.authority)) + std::string(url.substr(s.at + 1));
}

std::string redact_urls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  for (std::size_t pos = text.find("://"); pos != std::string_view::npos; pos = text.find("://", pos + 3)) {
    if (pos < copied) continue;
    std::size_t start = pos;
    while (start > copied && scheme_char(text[start - 1])) --start;
    std::size_t end = pos + 3;
    while (end < text.size()) {
      const char c = text[end];
      if (std::isspace(static_cast<unsigned char>(c)) != 0 || c == '"' || c == '\'' || c == '<' || c == '>') break;
      ++end;
    }
    out.append(text.substr(copied, start - copied));
    out += url_for_display(text.substr(start, end - start));
    copied = end;
    pos = end > 3 ? end - 3 : end;  // the loop adds 3 back: the next search starts at `end`
  }
  out.append(text.substr(copied));
  return out;
}

bool url_has_userinfo(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const Split s = split(url, scheme_end);
  return s.ambiguous || s.at != std::string_view::npos;
}

bool url_is_plain_http(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  return url.size() >= kHttp.size() && core::iequals(url.substr(0, kHttp.size()), kHttp);
}

}  // namespace gf::platform
