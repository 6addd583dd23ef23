#pragma once
// URLs as they may be shown: in documents, error messages, logs and on the dashboard. A URL given by
// the operator may carry credentials in its userinfo ("http://user:password@host/"); those go to
// libcurl with the request and nowhere else. Pure functions, thread-safe.
#include <string>
#include <string_view>

namespace gf::platform {

// `url` without its userinfo (user name and password alike): "http://u:pw@host:9090/x" →
// "http://host:9090/x". Text without "://" comes back as it is. When an '@' sits after the host part
// (a path with an '@', or a password with an unescaped '/', '?' or '#'), what is userinfo cannot be
// told from what is not, and everything after "scheme://" is replaced by "(hidden)".
std::string url_for_display(std::string_view url);

// Every URL inside free text (an error message, say) passed through url_for_display. A URL starts
// at its scheme and ends at white space, a quote, '<', '>' or the end of the text.
std::string redact_urls(std::string_view text);

// Whether the URL carries userinfo (or might: see url_for_display).
bool url_has_userinfo(std::string_view url);

// Whether the URL is plain http:// (scheme compared without case): what is sent travels unencrypted.
bool url_is_plain_http(std::string_view url);

}  // namespace gf::platform
