#include "server/http.hpp"

#include <algorithm>

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

std::string body_text(const Response& r) {
  std::string out = r.body ? *r.body : std::string();
  if (r.tail) out += *r.tail;
  return out;
}

Response encoded_response(const Request& req, unsigned status, std::string content_type,
                          std::shared_ptr<const std::string> plain, std::shared_ptr<const std::string> gz) {
  const bool use_gzip = req.accepts_gzip && gz;
  Response r = shared_response(status, std::move(content_type), use_gzip ? std::move(gz) : std::move(plain));
  r.gzip = use_gzip;
  r.negotiated = true;
  return r;
}

namespace {

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// The weight of one coding's parameters ("q=0.5"): 1 when none; -1 when malformed. Only q counts.
int weight_of(std::string_view params) noexcept {
  int q = 1000;
  while (!params.empty()) {
    const auto semi = params.find(';');
    const auto p = trim_ows(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view{} : params.substr(semi + 1);
    if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
    // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
    const auto v = p.substr(2);
    if (v.empty() || (v[0] != '0' && v[0] != '1') || v.size() > 5 || (v.size() > 1 && v[1] != '.')) return -1;
    int milli = (v[0] - '0') * 1000;
    int scale = 100;
    for (std::size_t i = 2; i < v.size(); ++i, scale /= 10) {
      if (v[i] < '0' || v[i] > '9') return -1;
      milli += (v[i] - '0') * scale;
    }
    if (milli > 1000) return -1;
    q = milli;
  }
  return q;
}

}  // namespace

bool accepts_gzip(std::string_view accept_encoding) noexcept {
  int gzip = -1, star = -1;  // the q of each, -1: not named
  while (!accept_encoding.empty()) {
    const auto comma = accept_encoding.find(',');
    const auto item = accept_encoding.substr(0, comma);
    accept_encoding = comma == std::string_view::npos ? std::string_view{} : accept_encoding.substr(comma + 1);
    const auto semi = item.find(';');
    const auto coding = trim_ows(item.substr(0, semi));
    if (coding.empty()) continue;
    const int q = weight_of(semi == std::string_view::npos ? std::string_view{} : item.substr(semi + 1));
    if (q < 0) return false;  // malformed: the plain text, which every client reads
    if (iequal(coding, "gzip") || iequal(coding, "x-gzip")) {
      gzip = std::max(gzip, q);
    } else if (coding == "*") {
      star = std::max(star, q);
    }
  }
  return gzip >= 0 ? gzip > 0 : star > 0;
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
