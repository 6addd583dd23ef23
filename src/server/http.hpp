#pragma once
// The server's own request/response types: what handlers see. No Beast type appears here, so the
// REST handlers, the router and their tests compile without the HTTP library.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.hpp"

namespace gf::server {

enum class Method { Get, Head, Post, Put, Delete, Patch, Options, Other };
std::string_view to_string(Method m) noexcept;

struct Request {
  Method method = Method::Get;
  std::string target;                         // as sent: path and query
  std::string path;                           // decoded path, without the query
  std::map<std::string, std::string> query;   // decoded query parameters (last one wins)
  std::map<std::string, std::string> params;  // path parameters ({index}), filled by the router
  std::string content_type;
  std::string authorization;
  std::string body;
  bool writer = false;        // set by decide(): the request carries the agent's (write) token
  bool accepts_gzip = false;  // its Accept-Encoding lets the answer be gzip-encoded (accepts_gzip())
};

struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::shared_ptr<const std::string> body;  // shared: a cached document is served without a copy
  // Sent right after body when set: a document made of a shared part and a per-request part (/metrics)
  // goes out as it is, without joining the two.
  std::shared_ptr<const std::string> tail;
  bool gzip = false;        // body (and tail) are gzip-encoded: Content-Encoding: gzip
  bool negotiated = false;  // the encoding followed Accept-Encoding: Vary: Accept-Encoding
  std::vector<std::pair<std::string, std::string>> headers;
};

// body followed by tail: the whole answer as the client gets it (before any decoding).
std::string body_text(const Response& r);

// A JSON body (compact).
Response json_response(unsigned status, const nlohmann::json& j);
// A body shared with a cache.
Response shared_response(unsigned status, std::string content_type, std::shared_ptr<const std::string> body);
// A body offered as it is and gzip-encoded (the same document, each made once): the one the request
// accepts, marked as negotiated. gz may be null (not made for this request: the plain one is sent).
Response encoded_response(const Request& req, unsigned status, std::string content_type,
                          std::shared_ptr<const std::string> plain, std::shared_ptr<const std::string> gz);

// Whether an Accept-Encoding value (RFC 9110 12.5.3) accepts gzip: "gzip" or "x-gzip", else "*", with
// a q-value above 0. Absent (empty), "identity", or anything malformed: false.
bool accepts_gzip(std::string_view accept_encoding) noexcept;

// {"error": code, "message": message}.
Response error_response(unsigned status, std::string_view code, std::string_view message);

// The one mapping from an error's kind to an HTTP status, used by every REST handler:
// Invalid, Usage 400; Permission 403; NotFound 404; Unavailable 409 (not enough GPUs now: retry
// later, nothing is wrong with the request or the server); Unsupported 415; Failed 500; NotReady 503.
unsigned http_status(ErrorKind kind) noexcept;
// The error code of the body when the handler names none: "bad_request", "forbidden", "not_found",
// "unavailable", "unsupported_media_type", "internal_error", "unavailable" (NotReady).
std::string_view default_error_code(ErrorKind kind) noexcept;
// {"error": code, "message": e.message} with the status of e's kind; code empty: the kind's default.
Response error_response(const Error& e, std::string_view code = {});
// The same for an error made on the spot.
inline Response error_response(ErrorKind kind, std::string_view message, std::string_view code = {}) {
  return error_response(make_error(kind, std::string(message)), code);
}

// Splits "a=1&b=x%20y" into decoded pairs; false when an escape is malformed.
bool parse_query(std::string_view query, std::map<std::string, std::string>& out);
// Percent-decodes (and '+' → ' ' when form is set); nullopt-like: false on a malformed escape.
bool url_decode(std::string_view in, std::string& out, bool form);

}  // namespace gf::server
