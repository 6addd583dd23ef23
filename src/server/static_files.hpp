#pragma once
// The dashboard's files: what GET or HEAD of a path outside the API answers.
#include <string>
#include <string_view>

#include "server/http.hpp"

namespace gf::server {

// The dashboard's Content-Security-Policy: its own scripts, styles and connections only (an injected
// script could neither run inline nor send the token elsewhere), no framing; images also from data:
// URLs (the page's empty icon).
inline constexpr std::string_view kDashboardCsp = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

// The file under static_dir that req.path names (security.hpp's resolve_static), with its content type
// and caching (Vite's content-hashed /assets/ forever, the rest checked every time); 404 when there is
// none (or no static_dir), 405 for a method other than GET and HEAD, 500 when it cannot be read.
Response static_file_response(const std::string& static_dir, const Request& req);

}  // namespace gf::server
