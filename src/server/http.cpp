#include "server/http.hpp"

namespace gf::server {

std::string_view to_string(Method m) noexcept {
  switch (m) {
    case Method::Get: return "GET";
    case Method::Head: return "HEAD";
    case Method::Post: return "POST";
    case Method::Put: return "PUT";
    case Method::Delete: return "DELETE";
    case Method::Patch: return "PATCH";
    case Method::Options: return "OPTIONS";
    case Method::Other: break;
  }
  return "OTHER";
}

Response json_response(unsigned status, const nlohmann::json& j) {
  Response r;
  r.status = status;
  // Replace invalid UTF-8 (a process name is whatever bytes the kernel holds) instead of throwing.
  r.body = std::make_shared<const std::string>(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return r;
}

Response shared_response(unsigned status, std::string content_type, std::shared_ptr<const std::string> body) {
  Response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

Response error_response(unsigned status, std::string_view code, std::string_view message) {
  return json_response(status, nlohmann::json{{"error", code}, {"message", message}});
}

unsigned http_status(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Invalid:
    case ErrorKind::Usage: return 400;
    case ErrorKind::Permission: return 403;
    case ErrorKind::NotFound: return 404;
    case ErrorKind::Unavailable: return 409;
    case ErrorKind::Unsupported: return 415;
    case ErrorKind::NotReady: return 503;
    case ErrorKind::Failed: break;
  }
  return 500;
}

std::string_view default_error_code(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Invalid:
    case ErrorKind::Usage: return "bad_request";
    case ErrorKind::Permission: return "forbidden";
    case ErrorKind::NotFound: return "not_found";
    case ErrorKind::Unavailable: return "unavailable";
    case ErrorKind::Unsupported: return "unsupported_media_type";
    case ErrorKind::NotReady: return "unavailable";
    case ErrorKind::Failed: break;
  }
  return "internal_error";
}

Response error_response(const Error& e, std::string_view code) {
  return error_response(http_status(e.kind), code.empty() ? default_error_code(e.kind) : code, e.message);
}

namespace {
int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool url_decode(std::string_view in, std::string& out, bool form) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && form) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return true;
}

bool parse_query(std::string_view query, std::map<std::string, std::string>& out) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    std::string key, value;
    if (!url_decode(pair.substr(0, eq), key, true)) return false;
    if (eq != std::string_view::npos && !url_decode(pair.substr(eq + 1), value, true)) return false;
    out[std::move(key)] = std::move(value);
  }
  return true;
}

}  // namespace gf::server
