#include "launch/unix_http.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <system_error>

namespace gf::launch {
namespace {

constexpr std::chrono::milliseconds kConnectTimeout{5000};

TransportError connect_error(const std::string& socket_path, const platform::TransportError& e) {
  std::string reason =
      e.os_errno != 0 ? std::error_code(static_cast<int>(e.os_errno), std::generic_category()).message() : e.message;
  std::string hint;
  if (e.os_errno == ENOENT || e.os_errno == ECONNREFUSED) {
    hint = " (is the Docker engine running? set DOCKER_HOST=unix:///path/to/docker.sock if it listens elsewhere)";
  } else if (e.os_errno == EACCES || e.os_errno == EPERM) {
    hint = " (add your user to the 'docker' group, or run as root)";
  }
  return {TransportFailure::Unreachable,
          fmt::format("cannot reach the Docker engine at {}: {}{}", socket_path, reason, hint)};
}

}  // namespace

HttpOutcome perform_unix_http(const std::string& socket_path, const HttpRequest& request) {
  platform::HttpRequest rq;
  rq.method = request.method;
  rq.url = request.url;
  rq.unix_socket = socket_path;
  rq.body = request.json_body;
  rq.content_type = "application/json";
  rq.connect_timeout = kConnectTimeout;
  rq.timeout = request.timeout;
  rq.cancel = request.cancel;
  rq.max_body_bytes = 0;  // log streams go through on_body; inspect answers are small
  rq.on_body = request.on_body;
  auto out = platform::http_perform(rq);
  if (out.ok()) {
    auto& r = out.response();
    HttpResponse resp;
    resp.status = r.status;
    resp.body = std::move(r.body);
    resp.content_type = std::move(r.content_type);
    resp.api_version = r.header("api-version");
    return resp;
  }
  const auto& e = out.error();
  switch (e.kind) {
    case platform::TransportFailure::Cancelled: return TransportError{TransportFailure::Cancelled, "docker: cancelled"};
    case platform::TransportFailure::Unreachable: return connect_error(socket_path, e);
    case platform::TransportFailure::TimedOut:
      return TransportError{TransportFailure::TimedOut, fmt::format("docker: request {}", e.message)};
    default: break;
  }
  if (e.message.starts_with("libcurl") || e.message.find("libcurl4") != std::string::npos)
    return TransportError{TransportFailure::Other, "docker: " + e.message};
  return TransportError{TransportFailure::Other,
                        fmt::format("docker: request to the engine at {} failed: {}", socket_path, e.message)};
}

}  // namespace gf::launch
