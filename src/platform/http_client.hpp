#pragma once
// One HTTP client for everything gpufleet asks of other servers: the Docker engine (unix socket), the
// Kubernetes API server (TLS, bearer token or client certificate), Prometheus and other gpufleet agents.
// libcurl underneath, loaded on first use (no curl type leaks out of http_client.cpp).
// Thread-safety: the functions may be called from any number of threads at once; each call uses its
// own connection(s), so calls never interfere.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gf::platform {

struct TlsOptions {
  std::string ca_file;           // PEM bundle to verify the server with; empty: the system's
  std::string ca_pem;            // the same, in memory (kubeconfig's certificate-authority-data, decoded)
  std::string client_cert_file;  // client certificate (PEM), file or memory
  std::string client_cert_pem;
  std::string client_key_file;  // its private key (PEM), file or memory
  std::string client_key_pem;
  bool insecure_skip_verify = false;  // accept any server certificate (kubeconfig's insecure-skip-tls-verify)
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // http://… or https://…
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;  // sent with Content-Type content_type
  std::string content_type = "application/json";
  std::string bearer_token;  // Authorization: Bearer …, when not empty
  std::string unix_socket;   // connect to this socket instead (the host is ignored)
  TlsOptions tls;
  std::chrono::milliseconds connect_timeout{5000};
  std::optional<std::chrono::milliseconds> timeout;  // the whole request; empty: no limit
  // Bodies beyond this many bytes fail the request ("response larger than …"): a peer cannot make us
  // hold an unbounded answer. 0: no limit (only for callers streaming through on_body).
  std::size_t max_body_bytes = 64u << 20;
  const std::atomic<bool>* cancel = nullptr;  // polled every ~50 ms while the request is open
  // Receives a successful (< 300) body as it arrives instead of HttpResponse::body. Error bodies are
  // always kept (up to 64 KiB) to build the error message.
  std::function<void(std::string_view content_type, std::string_view chunk)> on_body;
};

struct HttpResponse {
  long status = 0;
  std::string body;  // empty when on_body took it
  std::string content_type;
  // Response headers the callers need, by lower-case name (content-type, api-version, …): the last
  // value of each.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(std::string_view lower_name) const;
};

enum class TransportFailure { Unreachable, TimedOut, Cancelled, Tls, TooLarge, Other };

struct TransportError {
  TransportFailure kind = TransportFailure::Other;
  std::string message;  // one line: what failed and why (curl's words), without the caller's context
  long os_errno = 0;    // connect(2)'s errno when the connection failed, else 0
};

// Either a response (any HTTP status) or why no response came.
class HttpOutcome {
 public:
  HttpOutcome(HttpResponse r) : response_(std::move(r)) {}  // NOLINT: implicit like Result
  HttpOutcome(TransportError e) : error_(std::move(e)) {}   // NOLINT
  bool ok() const noexcept { return response_.has_value(); }
  HttpResponse& response() { return *response_; }
  const HttpResponse& response() const { return *response_; }
  const TransportError& error() const { return *error_; }

 private:
  std::optional<HttpResponse> response_;
  std::optional<TransportError> error_;
};

HttpOutcome http_perform(const HttpRequest& request);

// Several requests at once on one thread (curl's multi interface), at most max_parallel connections
// open; the outcomes in the requests' order. A slow or dead peer costs its own timeout, not the others'.
std::vector<HttpOutcome> http_perform_all(const std::vector<HttpRequest>& requests, std::size_t max_parallel = 32);

// Percent-encodes a query value (RFC 3986: unreserved characters pass, the rest is %XX).
std::string url_escape(std::string_view s);

}  // namespace gf::platform
