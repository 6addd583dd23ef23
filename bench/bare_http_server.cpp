// The ceiling for bench/http_bench.sh: the smallest Boost.Beast HTTP/1.1 server that answers GET of a few
// paths with fixed bytes held in memory. One io thread (as the agent has), keep-alive, no routing beyond an
// exact path match, no logging. Whatever the agent does per request on top of this (taking a snapshot,
// encoding JSON or Prometheus text, routing, auth) is the difference the benchmark measures.
//
//   gf_bare_http_server --serve /path=FILE:content-type [--serve ...] [--serve-gzip /path=FILE ...]
//                       [--listen 127.0.0.1:0] [--port-file F]
//
// --serve-gzip gives a path a second body, already gzip-encoded: a request whose Accept-Encoding
// mentions gzip gets it, with Content-Encoding: gzip and Vary: Accept-Encoding (the agent's own
// compressed bytes, fetched just before: the ceiling for its gzip answers).
//
// The bound port is written to F (atomically: a temporary file renamed into place) once the server listens.
// SIGTERM or SIGINT stops it.

// Boost 1.74's HTTP parser trips GCC 12's -Wmaybe-uninitialized (a false positive in basic_parser.hpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "core/text.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// Each served path keeps its body and one response whose body is a view of it (built once, with
// Content-Length and Content-Type set); every request for the path writes that same response.
struct Resource {
  std::string bytes;
  http::response<http::span_body<const char>> response;
  std::string gz_bytes;  // empty: no gzip body
  http::response<http::span_body<const char>> gz_response;
};
using Resources = std::map<std::string, std::unique_ptr<Resource>, std::less<>>;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Resources& resources) : socket_(std::move(socket)), resources_(resources) {}

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(64 * 1024);
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->answer();
    });
  }

  void answer() {
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    std::string_view target(req.target().data(), req.target().size());
    if (const auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    const auto it = resources_.find(target);
    if (req.method() == http::verb::get && it != resources_.end()) {
      const auto ae = req.find(http::field::accept_encoding);
      const bool gz = !it->second->gz_bytes.empty() && ae != req.end() &&
                      std::string_view(ae->value().data(), ae->value().size()).find("gzip") != std::string_view::npos;
      http::async_write(socket_, gz ? it->second->gz_response : it->second->response,
                        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->after_write(ec); });
      return;
    }
    error_ = std::make_unique<http::response<http::string_body>>(
        req.method() == http::verb::get ? http::status::not_found : http::status::method_not_allowed, 11);
    error_->set(http::field::content_type, "text/plain");
    error_->body() = "not found\n";
    error_->keep_alive(keep_alive_);
    error_->prepare_payload();
    http::async_write(socket_, *error_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->error_.reset();
      self->after_write(ec);
    });
  }

  void after_write(beast::error_code ec) {
    if (ec || !keep_alive_) return close();
    read();
  }

  void close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  const Resources& resources_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<http::response<http::string_body>> error_;
  bool keep_alive_ = true;
};

void accept(tcp::acceptor& acceptor, const Resources& resources) {
  acceptor.async_accept([&acceptor, &resources](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), resources)->start();
    }
    if (acceptor.is_open()) accept(acceptor, resources);
  });
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "gf_bare_http_server: " << why << "\n"
            << "usage: gf_bare_http_server --serve /path=FILE:content-type [--serve ...] [--listen HOST:PORT] "
               "[--port-file FILE]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Resources resources;
  std::string listen = "127.0.0.1:0";
  std::string port_file;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--serve") {
      const std::string spec = value();
      const auto eq = spec.find('=');
      const auto colon = spec.rfind(':');
      if (spec.empty() || spec[0] != '/' || eq == std::string::npos || colon == std::string::npos || colon < eq)
        usage("bad --serve " + spec + " (want /path=FILE:content-type)");
      const std::string path = spec.substr(0, eq);
      const std::string file = spec.substr(eq + 1, colon - eq - 1);
      const std::string type = spec.substr(colon + 1);
      std::ifstream in(file, std::ios::binary);
      if (!in) usage("cannot read " + file);
      auto r = std::make_unique<Resource>();
      r->bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      r->response.version(11);
      r->response.result(http::status::ok);
      r->response.set(http::field::content_type, type);
      r->response.body() = http::span_body<const char>::value_type(r->bytes.data(), r->bytes.size());
      r->response.prepare_payload();
      resources[path] = std::move(r);
    } else if (arg == "--serve-gzip") {
      const std::string spec = value();
      const auto eq = spec.find('=');
      if (eq == std::string::npos) usage("bad --serve-gzip " + spec + " (want /path=FILE)");
      const auto it = resources.find(spec.substr(0, eq));
      if (it == resources.end()) usage("--serve-gzip " + spec + ": --serve the path first");
      std::ifstream in(spec.substr(eq + 1), std::ios::binary);
      if (!in) usage("cannot read " + spec.substr(eq + 1));
      auto& r = *it->second;
      r.gz_bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (r.gz_bytes.empty()) usage("--serve-gzip " + spec + ": empty file");
      r.gz_response.version(11);
      r.gz_response.result(http::status::ok);
      r.gz_response.set(http::field::content_type, r.response[http::field::content_type]);
      r.gz_response.set(http::field::content_encoding, "gzip");
      r.gz_response.set(http::field::vary, "Accept-Encoding");
      r.gz_response.body() = http::span_body<const char>::value_type(r.gz_bytes.data(), r.gz_bytes.size());
      r.gz_response.prepare_payload();
    } else if (arg == "--listen") {
      listen = value();
    } else if (arg == "--port-file") {
      port_file = value();
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (resources.empty()) usage("nothing to serve");
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) usage("bad --listen " + listen);

  asio::io_context ioc(1);
  beast::error_code ec;
  const auto address = asio::ip::make_address(listen.substr(0, colon), ec);
  if (ec) usage("bad address in --listen " + listen);
  const auto listen_port = gf::core::parse_uint(std::string_view(listen).substr(colon + 1), 0, 65535);
  if (!listen_port) usage("bad port in --listen " + listen);
  tcp::acceptor acceptor(ioc, tcp::endpoint(address, static_cast<unsigned short>(*listen_port)));
  acceptor.listen(asio::socket_base::max_listen_connections);
  const unsigned port = acceptor.local_endpoint().port();
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    { std::ofstream(tmp) << port << "\n"; }
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) usage("cannot write " + port_file);
  }
  std::cerr << "gf_bare_http_server: listening on " << address.to_string() << ":" << port << ", " << resources.size()
            << " path(s)\n";

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](beast::error_code, int) {
    acceptor.close();
    ioc.stop();
  });
  accept(acceptor, resources);
  ioc.run();
  return 0;
}
