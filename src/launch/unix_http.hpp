#pragma once
// One HTTP/1.1 request to the Docker engine over its unix socket: platform::http_perform with the
// engine's headers and error messages. Internal to gf_launch. Each call opens and closes its own
// connection, so calls from different threads on different requests are independent.
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "platform/http_client.hpp"

namespace gf::launch {

struct HttpRequest {
  std::string method = "GET";  // GET, POST, DELETE
  std::string url;             // http://localhost/v1.41/... — the host is ignored on a unix socket
  std::optional<std::string> json_body;
  std::optional<std::chrono::milliseconds> timeout;  // whole request; empty: no limit
  const std::atomic<bool>* cancel = nullptr;         // polled every ~50 ms while the request is open
  // Receives a successful (< 300) body as it arrives, with the response Content-Type, instead of it
  // being kept in HttpResponse::body. Error bodies are always kept (capped) to build the error message.
  std::function<void(std::string_view content_type, std::string_view chunk)> on_body;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty when on_body took it
  std::string content_type;
  std::string api_version;  // the Api-Version header, if any
};

enum class TransportFailure { Unreachable, TimedOut, Cancelled, Other };

struct TransportError {
  TransportFailure kind = TransportFailure::Other;
  std::string message;  // one line, already naming the socket
};

// Either a response (any HTTP status) or why no response came.
class HttpOutcome {
 public:
  HttpOutcome(HttpResponse r) : response_(std::move(r)) {}  // NOLINT: implicit like Result
  HttpOutcome(TransportError e) : error_(std::move(e)) {}   // NOLINT
  bool ok() const noexcept { return response_.has_value(); }
  HttpResponse& response() { return *response_; }
  const TransportError& error() const { return *error_; }

 private:
  std::optional<HttpResponse> response_;
  std::optional<TransportError> error_;
};

HttpOutcome perform_unix_http(const std::string& socket_path, const HttpRequest& request);

// Percent-encodes a query value (container names, ids).
using platform::url_escape;

}  // namespace gf::launch
