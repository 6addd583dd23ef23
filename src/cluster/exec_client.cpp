// pods/exec over a WebSocket (see exec_client.hpp). The only translation unit of gf_cluster with Beast,
// Asio's TLS and OpenSSL in it: one coroutine per call on an io_context of its own, run for at most the
// request's timeout (then the socket is closed and the coroutine unwinds).
#include "cluster/exec_client.hpp"

#include <utility>  // before asio (GCC 12, see STACK.md)

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/impl/src.hpp>  // Asio's TLS, compiled once, here (gf_beast has the rest)
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <exception>
#include <optional>
#include <variant>

#include "cluster/kube_client.hpp"
#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/log.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

struct ServerUrl {
  bool tls = false;
  std::string host;  // without brackets
  std::string port;
  std::string host_header;  // as in the URL ("[::1]:6443")
  std::string prefix;       // path prefix, no trailing slash
};

Result<ServerUrl> split_server(std::string_view url) {
  ServerUrl s;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return make_error("the server URL has no scheme");
  const std::string scheme = core::lower(url.substr(0, scheme_end));
  if (scheme == "https")
    s.tls = true;
  else if (scheme != "http")
    return make_error("the server URL's scheme is neither http nor https");
  std::string_view rest = url.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) s.prefix = std::string(rest.substr(slash));
  while (!s.prefix.empty() && s.prefix.back() == '/') s.prefix.pop_back();
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  s.host_header = std::string(authority);
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return make_error("the server URL has an unclosed [");
    s.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') s.port = std::string(authority.substr(close + 2));
  } else {
    const auto colon = authority.rfind(':');
    s.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) s.port = std::string(authority.substr(colon + 1));
  }
  if (s.host.empty()) return make_error("the server URL has no host");
  if (s.port.empty()) s.port = s.tls ? "443" : "80";
  return s;
}

// The TLS context as libcurl is set up from the same TlsOptions: the CA (file or PEM, else the
// system's), the client certificate and key, and verification of the server's name unless insecure.
Result<void> configure_tls(ssl::context& ctx, const platform::TlsOptions& t) {
  boost::system::error_code ec;
  auto fail = [&](const char* what) { return make_error(fmt::format("TLS setup: {}: {}", what, ec.message())); };
  if (t.insecure_skip_verify) {
    ctx.set_verify_mode(ssl::verify_none);
  } else {
    ctx.set_verify_mode(ssl::verify_peer, ec);
    if (!t.ca_pem.empty()) {
      ctx.add_certificate_authority(asio::buffer(t.ca_pem), ec);
      if (ec) return fail("certificate-authority-data");
    } else if (!t.ca_file.empty()) {
      ctx.load_verify_file(t.ca_file, ec);
      if (ec) return fail(("certificate-authority " + t.ca_file).c_str());
    } else {
      ctx.set_default_verify_paths(ec);
      if (ec) return fail("the system's CAs");
    }
  }
  if (!t.client_cert_pem.empty()) {
    ctx.use_certificate_chain(asio::buffer(t.client_cert_pem), ec);
    if (ec) return fail("client-certificate-data");
  } else if (!t.client_cert_file.empty()) {
    ctx.use_certificate_chain_file(t.client_cert_file, ec);
    if (ec) return fail(("client-certificate " + t.client_cert_file).c_str());
  }
  if (!t.client_key_pem.empty()) {
    ctx.use_private_key(asio::buffer(t.client_key_pem), ssl::context::pem, ec);
    if (ec) return fail("client-key-data");
  } else if (!t.client_key_file.empty()) {
    ctx.use_private_key_file(t.client_key_file, ssl::context::pem, ec);
    if (ec) return fail(("client-key " + t.client_key_file).c_str());
  }
  return {};
}

// What the coroutine ends with: the output, or an error line.
using Outcome = std::variant<ExecOutput, std::string>;

struct Call {
  const KubeConfig& config;
  const ExecRequest& rq;
  const ServerUrl& url;
  std::string target;
  std::string pod_name;  // "ns/pod" for messages
  std::string server;    // the server as shown
  std::string protocols;
};

template <class Ws>
asio::awaitable<Outcome> converse(Ws& ws, const Call& c) {
  ws.set_option(websocket::stream_base::decorator([&c](websocket::request_type& req) {
    req.set(http::field::user_agent, "gpufleet");
    req.set(http::field::sec_websocket_protocol, c.protocols);
    if (!c.config.bearer_token.empty()) req.set(http::field::authorization, "Bearer " + c.config.bearer_token);
  }));
  ws.read_message_max(c.rq.max_output_bytes + 128 * 1024);
  websocket::response_type res;
  beast::error_code ec;
  co_await ws.async_handshake(res, c.url.host_header, c.target, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    if (res.result_int() != 0 && res.result_int() != 101) {
      const std::string path = c.target.substr(0, c.target.find('?'));
      co_return describe_status_error(c.config, res.result_int(), "GET", path, res.body(),
                                      "get and create on pods/exec in the pod's namespace") +
          " (exec upgrade)";
    }
    co_return fmt::format("the exec upgrade for pod {} at {} failed: {}", c.pod_name, c.server, ec.message());
  }
  const std::string chosen(res[http::field::sec_websocket_protocol]);
  const bool v5 = chosen == kExecProtocolV5;
  bool offered = false;
  for (const auto& p : c.rq.protocols) offered = offered || p == chosen;
  if (!offered || (chosen != kExecProtocolV5 && chosen != kExecProtocolV4))
    co_return fmt::format("the API server at {} chose the exec subprotocol \"{}\" for pod {} (offered: {})", c.server,
                          platform::printable(chosen, 60), c.pod_name, c.protocols);
  ExecStreams streams(v5, c.rq.max_output_bytes);
  beast::flat_buffer buffer;
  while (true) {
    co_await ws.async_read(buffer, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    const auto message = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    if (!ws.got_binary())
      co_return fmt::format("pod {}: the API server sent a text message on a binary exec stream", c.pod_name);
    if (auto fed = streams.feed(message); !fed)
      co_return fmt::format("pod {}: malformed exec stream: {}", c.pod_name, fed.error().message);
  }
  // A closing handshake or the connection's end both end the stream; the Status says how it went.
  if (ec != websocket::error::closed && !streams.got_status())
    co_return fmt::format("pod {}: the exec stream broke before the command's status: {}", c.pod_name, ec.message());
  auto status = streams.finish();
  if (!status) co_return fmt::format("pod {}: {}", c.pod_name, status.error().message);
  ExecOutput out;
  out.protocol = chosen;
  out.out = streams.out();
  out.err = streams.err();
  out.out_truncated = streams.out_truncated();
  out.err_truncated = streams.err_truncated();
  out.status = std::move(*status);
  if (ec != websocket::error::closed) co_return out;
  beast::error_code ignored;
  co_await ws.async_close(websocket::close_code::normal, asio::redirect_error(asio::use_awaitable, ignored));
  co_return out;
}

asio::awaitable<Outcome> run_call(tcp::socket& socket, tcp::resolver& resolver, ssl::context* tls_ctx,
                                  std::optional<ssl::stream<tcp::socket&>>& tls, const Call& c) {
  beast::error_code ec;
  const auto endpoints =
      co_await resolver.async_resolve(c.url.host, c.url.port, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return fmt::format("cannot resolve the API server at {}: {}", c.server, ec.message());
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return fmt::format("cannot reach the API server at {} (from {}): {}", c.server, c.config.source, ec.message());
  socket.set_option(tcp::no_delay(true), ec);
  if (tls_ctx == nullptr) {
    websocket::stream<tcp::socket&> ws(socket);
    co_return co_await converse(ws, c);
  }
  tls.emplace(socket, *tls_ctx);
  boost::system::error_code name_ec;
  asio::ip::make_address(c.url.host, name_ec);
  if (name_ec) SSL_set_tlsext_host_name(tls->native_handle(), c.url.host.c_str());  // SNI for names only
  if (!c.config.tls.insecure_skip_verify) tls->set_verify_callback(ssl::host_name_verification(c.url.host));
  co_await tls->async_handshake(ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
  if (ec)
    co_return fmt::format("TLS with the API server at {} failed (from {}): {}", c.server, c.config.source,
                          ec.message());
  websocket::stream<ssl::stream<tcp::socket&>&> ws(*tls);
  co_return co_await converse(ws, c);
}

}  // namespace

std::string exec_target(std::string_view prefix, const ExecRequest& rq) {
  std::string t = fmt::format("{}/api/v1/namespaces/{}/pods/{}/exec?", prefix, platform::url_escape(rq.namespace_),
                              platform::url_escape(rq.pod));
  for (const auto& arg : rq.command) t += "command=" + platform::url_escape(arg) + "&";
  if (!rq.container.empty()) t += "container=" + platform::url_escape(rq.container) + "&";
  t += "stdout=true&stderr=true";
  return t;
}

Result<ExecOutput> exec_in_pod(const KubeConfig& config, const ExecRequest& rq) {
  const std::string server = platform::printable(platform::url_for_display(config.server));
  auto url = split_server(config.server);
  if (!url) return make_error(fmt::format("the API server URL {}: {}", server, url.error().message));
  if (rq.command.empty()) return make_error("exec: no command");
  Call c{config, rq, *url, exec_target(url->prefix, rq), platform::printable(rq.namespace_ + "/" + rq.pod, 320),
         server, {}};
  for (const auto& p : rq.protocols) c.protocols += (c.protocols.empty() ? "" : ", ") + p;

  asio::io_context ioc(1);
  std::optional<ssl::context> tls_ctx;
  if (url->tls) {
    tls_ctx.emplace(ssl::context::tls_client);
    if (auto t = configure_tls(*tls_ctx, config.tls); !t)
      return make_error(fmt::format("{} (from {})", t.error().message, config.source));
  }
  tcp::socket socket(ioc);
  tcp::resolver resolver(ioc);
  std::optional<ssl::stream<tcp::socket&>> tls;
  std::optional<Outcome> outcome;
  // The deadline of the whole exchange: closing the socket ends every pending operation with an error,
  // so the coroutine always finishes and run() returns with nothing left that points at this frame.
  asio::steady_timer deadline(ioc);
  bool timed_out = false;
  deadline.expires_after(rq.timeout);
  deadline.async_wait([&](beast::error_code ec) {
    if (ec) return;
    timed_out = true;
    resolver.cancel();
    beast::error_code ignored;
    socket.close(ignored);
  });
  asio::co_spawn(ioc, run_call(socket, resolver, tls_ctx ? &*tls_ctx : nullptr, tls, c),
                 [&](std::exception_ptr e, Outcome o) {
                   deadline.cancel();
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& x) {
                       outcome = std::string("exec failed: ") + x.what();
                     }
                   } else {
                     outcome = std::move(o);
                   }
                 });
  ioc.run();
  if (timed_out || !outcome)
    return make_error(fmt::format("pod {}: no end of the exec within {} ms (the API server at {})", c.pod_name,
                                  rq.timeout.count(), server));
  if (auto* e = std::get_if<std::string>(&*outcome)) return make_error(std::move(*e));
  return std::get<ExecOutput>(std::move(*outcome));
}

}  // namespace gf::cluster
