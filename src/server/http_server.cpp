// The Beast transport. Everything that touches a socket is here, on one I/O thread; the HTTP-free
// parts (routing, access, fan-out, static paths) live in router/ws_hub/security and are tested alone.
#include "server/http_server.hpp"

#include <utility>  // before asio (GCC 12, see STACK.md)

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <fstream>
#include <iterator>
#include <list>
#include <optional>
#include <sstream>

#include "server/security.hpp"

namespace gf::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace {

Method method_of(http::verb v) {
  switch (v) {
    case http::verb::get: return Method::Get;
    case http::verb::head: return Method::Head;
    case http::verb::post: return Method::Post;
    case http::verb::put: return Method::Put;
    case http::verb::delete_: return Method::Delete;
    case http::verb::patch: return Method::Patch;
    case http::verb::options: return Method::Options;
    default: return Method::Other;
  }
}

bool is_api_path(std::string_view p) {
  return p == "/metrics" || p == "/api" || p.rfind("/api/", 0) == 0 || p == "/ws";
}

}  // namespace

class HttpSession;
class WsSession;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(const Router& r, WsHub* w, ServerOptions o)
      : router(r), ws(w), opts(std::move(o)), acceptor(ioc), pool(o.workers ? o.workers : 1), signals(ioc) {}

  const Router& router;
  WsHub* ws;
  ServerOptions opts;
  asio::io_context ioc{1};
  tcp::acceptor acceptor;
  asio::thread_pool pool;
  asio::signal_set signals;
  unsigned short port = 0;
  std::atomic<std::size_t> connections{0};
  // WebSocket handshakes under way: counted against the client cap with the joined clients, so a burst
  // of upgrades never gets past it (each one beyond it gets 503 before the handshake).
  std::atomic<std::size_t> ws_pending{0};
  bool draining = false;  // I/O thread only
  // Live sessions (I/O thread only), so that a drain can close the idle ones.
  std::list<std::weak_ptr<HttpSession>> http_sessions;
  std::list<std::weak_ptr<WsSession>> ws_sessions;

  void accept();
  void begin_drain();
  // Starts a drain and ends the loop once no connection is left, or at the drain timeout.
  void drain();
  void check_drained(std::shared_ptr<asio::steady_timer> timer, std::chrono::steady_clock::time_point deadline);
  // After the loop: closes what is left and runs the completions, so no session outlives the server.
  void finish();
};

// ---------------------------------------------------------------------------------------------------
// WebSocket session

class WsSession final : public WsClient, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream)
      : srv_(std::move(srv)), ws_(std::move(stream)), queue_(srv_->opts.ws_queue) {
    ++srv_->connections;
    ++srv_->ws_pending;
  }
  ~WsSession() override {
    settle();
    if (id_) srv_->ws->remove(*id_);
    --srv_->connections;
  }

  void start(http::request<http::string_body> req, std::optional<std::chrono::milliseconds> period,
             std::string subprotocol) {
    beast::get_lowest_layer(ws_).expires_never();  // the websocket stream keeps its own timeouts
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(10);
    t.idle_timeout = std::chrono::seconds(60);  // a peer that answers no ping for this long is closed
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.read_message_max(srv_->opts.ws_message_limit);
    const std::string server = srv_->opts.server_header;
    ws_.set_option(websocket::stream_base::decorator([server, subprotocol](websocket::response_type& res) {
      res.set(http::field::server, server);
      if (!subprotocol.empty()) res.set(http::field::sec_websocket_protocol, subprotocol);
    }));
    // A peer that sends Close leaves now: its place and its updates are freed at once, not when the
    // closing handshake's TCP teardown ends (up to the handshake timeout when the peer lingers).
    ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
      if (kind == websocket::frame_type::close) leave();
    });
    period_ = period;
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // WsClient: called from any thread (the hub's); the work happens on the I/O thread.
  void send(Text text, bool droppable) override {
    asio::post(ws_.get_executor(), [self = shared_from_this(), text = std::move(text), droppable]() mutable {
      self->enqueue(std::move(text), droppable);
    });
  }

  void force_close() { abort(); }

  void close_going_away() {
    if (closing_) return;
    closing_ = true;
    ws_.async_close(websocket::close_code::going_away, [self = shared_from_this()](beast::error_code) {});
  }

 private:
  // The handshake is over (either way): it no longer holds a place of its own.
  void settle() {
    if (pending_) {
      pending_ = false;
      --srv_->ws_pending;
    }
  }

  void on_accept(beast::error_code ec) {
    if (ec) {
      settle();
      return;
    }
    auto joined = srv_->ws->add(weak_from_this(), period_);
    settle();  // after add(): the place passes from the handshake to the client without a gap
    if (!joined) {
      closing_ = true;
      ws_.async_close(websocket::close_reason(websocket::close_code::try_again_later, "too many WebSocket clients"),
                      [self = shared_from_this()](beast::error_code) {});
      return;
    }
    id_ = joined->id;
    enqueue(joined->greeting, false);
    do_read();
  }

  void do_read() {
    ws_.async_read(rbuf_, [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      abort();
      return;
    }
    const std::string text = beast::buffers_to_string(rbuf_.data());
    rbuf_.consume(rbuf_.size());
    if (id_)
      if (auto reply = srv_->ws->on_message(*id_, text)) enqueue(std::move(*reply), false);
    do_read();
  }

  void enqueue(Text text, bool droppable) {
    if (closing_ || !id_) return;
    const auto now = std::chrono::steady_clock::now();
    // A client that has not taken a message for this long is stalled: it must not hold memory or
    // slow anyone down.
    if (writing_ && now - write_started_ > srv_->opts.ws_stall_timeout) {
      abort();
      return;
    }
    if (!queue_.push(std::move(text), droppable)) {
      abort();
      return;
    }
    if (!writing_) write_next();
  }

  void write_next() {
    auto next = queue_.pop();
    if (!next || closing_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    current_ = std::move(*next);
    ws_.text(true);
    ws_.async_write(asio::buffer(*current_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) {
        self->abort();
        return;
      }
      self->write_next();
    });
  }

  void leave() {
    if (id_) {
      srv_->ws->remove(*id_);
      id_.reset();
    }
    closing_ = true;
  }

  void abort() {
    leave();
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer rbuf_;
  OutboundQueue queue_;
  Text current_;
  bool writing_ = false;
  bool closing_ = false;
  std::chrono::steady_clock::time_point write_started_{};
  std::optional<std::uint64_t> id_;
  std::optional<std::chrono::milliseconds> period_;
  bool pending_ = true;
};

// ---------------------------------------------------------------------------------------------------
// HTTP session

class HttpSession final : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<HttpServer::Impl> srv, tcp::socket&& socket)
      : srv_(std::move(srv)), stream_(std::move(socket)) {
    ++srv_->connections;
  }
  ~HttpSession() { --srv_->connections; }

  void start() { do_read(); }

  void force_close() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  // Drain: a session waiting for a request is closed now; one handling a request finishes it first.
  void close_if_idle() {
    if (busy_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  void do_read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_->opts.header_limit));
    parser_->body_limit(srv_->opts.body_limit);
    buffer_.max_size(srv_->opts.header_limit + srv_->opts.body_limit + 4096);
    busy_ = false;
    // One deadline for the whole request: a client that trickles bytes (slowloris) or idles is closed.
    stream_.expires_after(srv_->opts.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::error::bad_descriptor) {
      close();
      return;
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      reply(error_response(431, "request_header_fields_too_large",
                           "the request's header is larger than " + std::to_string(srv_->opts.header_limit) + " bytes"),
            false, false);
      return;
    }
    if (ec == http::error::body_limit) {
      reply(error_response(413, "payload_too_large",
                           "the request body is larger than " + std::to_string(srv_->opts.body_limit) + " bytes"),
            false, false);
      return;
    }
    if (ec) {
      if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
        reply(error_response(400, "bad_request", "malformed HTTP request: " + ec.message()), false, false);
      } else {
        close();
      }
      return;
    }
    busy_ = true;
    auto& msg = parser_->get();
    const bool keep_alive = msg.keep_alive() && !srv_->draining;
    const bool head = msg.method() == http::verb::head;

    Request req;
    req.method = method_of(msg.method());
    req.target = std::string(msg.target());
    const auto q = req.target.find('?');
    if (!url_decode(std::string_view(req.target).substr(0, q), req.path, false) || req.path.empty() ||
        req.path.front() != '/' ||
        (q != std::string::npos && !parse_query(std::string_view(req.target).substr(q + 1), req.query))) {
      reply(error_response(400, "bad_request", "malformed request target"), false, head);
      return;
    }
    if (auto it = msg.find(http::field::authorization); it != msg.end()) req.authorization = std::string(it->value());
    if (auto it = msg.find(http::field::content_type); it != msg.end()) req.content_type = std::string(it->value());

    if (websocket::is_upgrade(msg)) {
      upgrade(std::move(req));
      return;
    }
    if (srv_->draining) {
      reply(error_response(503, "shutting_down", "the agent is stopping"), false, head);
      return;
    }
    req.body = std::move(msg.body());
    if (!is_api_path(req.path)) {
      serve_static(req, keep_alive, head);
      return;
    }
    auto d = decide(srv_->router, req, srv_->opts.token, srv_->opts.auth_read);
    if (d.answer) {
      reply(std::move(*d.answer), keep_alive, head);
      return;
    }
    const Route* route = d.route;
    if (!runs_blocking(route->exec, req)) {
      reply(invoke(*route, req), keep_alive, head);
      return;
    }
    asio::post(srv_->pool, [self = shared_from_this(), route, req = std::move(req), keep_alive, head]() mutable {
      Response r = invoke(*route, req);
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r), keep_alive, head]() mutable { self->reply(std::move(r), keep_alive, head); });
    });
  }

  void upgrade(Request req) {
    auto& msg = parser_->get();
    const bool head = false;
    if (req.path != "/ws" || !srv_->ws) {
      reply(error_response(404, "not_found", "WebSocket is served at /ws"), false, head);
      return;
    }
    if (srv_->draining) {
      reply(error_response(503, "shutting_down", "the agent is stopping"), false, head);
      return;
    }
    std::string origin;
    if (auto it = msg.find(http::field::origin); it != msg.end()) origin = std::string(it->value());
    if (!origin_allowed(origin, srv_->opts.host, srv_->port, srv_->opts.allowed_origins)) {
      reply(error_response(403, "forbidden_origin", "WebSocket Origin " + origin + " is not this agent's address"),
            false, head);
      return;
    }
    // Browsers cannot set headers on a WebSocket: they offer the token as a subprotocol
    // ("gpufleet.bearer.<token>") next to "gpufleet.v1", which is the one we select.
    std::string offered;
    if (auto it = msg.find(http::field::sec_websocket_protocol); it != msg.end()) offered = std::string(it->value());
    std::vector<std::string> protocols;
    for (std::size_t pos = 0; pos <= offered.size();) {
      const auto comma = std::min(offered.find(',', pos), offered.size());
      std::string p = offered.substr(pos, comma - pos);
      while (!p.empty() && p.front() == ' ') p.erase(p.begin());
      while (!p.empty() && p.back() == ' ') p.pop_back();
      if (!p.empty()) protocols.push_back(std::move(p));
      pos = comma + 1;
    }
    if (srv_->opts.auth_read && !bearer_ok(req.authorization, srv_->opts.token)) {
      const bool by_protocol = std::any_of(protocols.begin(), protocols.end(), [&](const std::string& p) {
        return p.rfind("gpufleet.bearer.", 0) == 0 && bearer_ok("Bearer " + p.substr(16), srv_->opts.token);
      });
      if (!by_protocol) {
        reply(error_response(401, "unauthorized", "this agent needs Authorization: Bearer <token> for reads"), false,
              head);
        return;
      }
    }
    const bool v1 = std::find(protocols.begin(), protocols.end(), "gpufleet.v1") != protocols.end();
    if (srv_->ws->clients() + srv_->ws_pending.load() >= srv_->ws->max_clients()) {
      reply(error_response(503, "too_many_clients", "the WebSocket client limit is reached"), false, head);
      return;
    }
    std::optional<std::chrono::milliseconds> period;
    if (auto it = req.query.find("period_ms"); it != req.query.end()) {
      const std::string& v = it->second;
      const bool digits =
          !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) {
        reply(error_response(400, "bad_request", "period_ms must be a whole number of milliseconds"), false, head);
        return;
      }
      period = std::chrono::milliseconds(std::stoll(v));
    }
    auto ws = std::make_shared<WsSession>(srv_, std::move(stream_));
    srv_->ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    srv_->ws_sessions.push_back(ws);
    ws->start(parser_->release(), period, v1 ? "gpufleet.v1" : "");
  }

  void serve_static(const Request& req, bool keep_alive, bool head) {
    if (req.method != Method::Get && req.method != Method::Head) {
      Response r = error_response(405, "method_not_allowed", "static files are GET only");
      r.headers.emplace_back("Allow", "GET, HEAD");
      reply(std::move(r), keep_alive, head);
      return;
    }
    if (srv_->opts.static_dir.empty()) {
      reply(
          error_response(
              404, "not_found",
              req.path == "/"
                  ? "no dashboard here: build it (make web) or start with --static DIR; the API is at /api/openapi.json"
                  : "no such file: " + req.path),
          keep_alive, head);
      return;
    }
    if (srv_->opts.auth_read && req.path != "/" && req.path.rfind("/assets/", 0) != 0 && req.path != "/index.html") {
      // The dashboard's own files hold no data; nothing else is served without the token.
    }
    auto file = resolve_static(srv_->opts.static_dir, req.path);
    if (!file) {
      reply(error_response(404, "not_found", "no such file: " + req.path), keep_alive, head);
      return;
    }
    std::ifstream in(*file, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      reply(error_response(500, "io_error", "cannot read " + req.path), keep_alive, head);
      return;
    }
    Response r = shared_response(200, std::string(content_type_for(*file)),
                                 std::make_shared<const std::string>(std::move(data)));
    // Vite names assets by content hash: they never change. index.html is checked every time.
    r.headers.emplace_back("Cache-Control",
                           req.path.rfind("/assets/", 0) == 0 ? "public, max-age=31536000, immutable" : "no-cache");
    reply(std::move(r), keep_alive, head);
  }

  void reply(Response r, bool keep_alive, bool head) {
    res_.emplace();
    auto& res = *res_;
    res.version(11);
    res.result(r.status);
    res.set(http::field::server, srv_->opts.server_header);
    res.set(http::field::content_type, r.content_type);
    res.set("X-Content-Type-Options", "nosniff");
    bool has_cache_control = false;
    for (const auto& [k, v] : r.headers) {
      res.set(k, v);
      has_cache_control = has_cache_control || beast::iequals(k, "Cache-Control");
    }
    if (!has_cache_control) res.set(http::field::cache_control, "no-store");
    body_ = r.body ? std::move(r.body) : std::make_shared<const std::string>();
    res.keep_alive(keep_alive);
    if (head) {
      res.content_length(body_->size());
    } else {
      res.body() = http::span_body<const char>::value_type(body_->data(), body_->size());
      res.prepare_payload();
    }
    stream_.expires_after(srv_->opts.request_timeout);
    http::async_write(stream_, res, [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
      self->res_.reset();
      self->body_.reset();
      if (ec || !keep_alive || self->srv_->draining) {
        self->close();
        return;
      }
      self->do_read();
    });
  }

  void close() {
    busy_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::span_body<const char>>> res_;
  std::shared_ptr<const std::string> body_;
  bool busy_ = false;
};

// ---------------------------------------------------------------------------------------------------

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (!ec) {
      if (self->connections.load() >= self->opts.max_connections) {
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        auto s = std::make_shared<HttpSession>(self, std::move(socket));
        // Forget sessions that ended, so the list stays the size of the live ones.
        self->http_sessions.remove_if([](const auto& w) { return w.expired(); });
        self->http_sessions.push_back(s);
        s->start();
      }
    }
    self->accept();
  });
}

void HttpServer::Impl::begin_drain() {
  if (draining) return;
  draining = true;
  beast::error_code ignored;
  acceptor.close(ignored);
  signals.cancel(ignored);
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->close_if_idle();
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->close_going_away();
}

HttpServer::HttpServer(const Router& router, WsHub* ws, ServerOptions options)
    : impl_(std::make_shared<Impl>(router, ws, std::move(options))) {}

HttpServer::~HttpServer() { impl_->pool.join(); }

Result<unsigned short> HttpServer::listen() {
  auto& i = *impl_;
  beast::error_code ec;
  const auto addr = asio::ip::make_address(i.opts.host, ec);
  if (ec) return make_error("cannot listen on '" + i.opts.host + "': not an IP address (use 127.0.0.1, 0.0.0.0 or ::)");
  const tcp::endpoint ep(addr, i.opts.port);
  i.acceptor.open(ep.protocol(), ec);
  if (!ec) i.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) i.acceptor.bind(ep, ec);
  if (!ec) i.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error("cannot listen on " + i.opts.host + ":" + std::to_string(i.opts.port) + ": " + ec.message());
  i.port = i.acceptor.local_endpoint().port();
  return i.port;
}

void HttpServer::run(bool handle_signals) {
  auto& i = *impl_;
  if (handle_signals) {
    i.signals.add(SIGINT);
    i.signals.add(SIGTERM);
    i.signals.async_wait([self = impl_](beast::error_code ec, int) {
      if (!ec) self->drain();
    });
  }
  i.accept();
  i.ioc.run();
  i.finish();
}

void HttpServer::stop() {
  asio::post(impl_->ioc, [self = impl_] { self->drain(); });
}

void HttpServer::Impl::drain() {
  if (draining) return;
  begin_drain();
  auto timer = std::make_shared<asio::steady_timer>(ioc);
  check_drained(timer, std::chrono::steady_clock::now() + opts.drain_timeout);
}

void HttpServer::Impl::check_drained(std::shared_ptr<asio::steady_timer> timer,
                                     std::chrono::steady_clock::time_point deadline) {
  if (connections.load() == 0 || std::chrono::steady_clock::now() >= deadline) {
    ioc.stop();
    return;
  }
  timer->expires_after(std::chrono::milliseconds(20));
  timer->async_wait(
      [self = shared_from_this(), timer, deadline](beast::error_code) { self->check_drained(timer, deadline); });
}

void HttpServer::Impl::finish() {
  if (ws) ws->close_all();  // no more messages are posted to sessions from the collection loop
  draining = true;
  beast::error_code ignored;
  acceptor.close(ignored);
  signals.cancel(ignored);
  ioc.restart();
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->force_close();
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->force_close();
  pool.join();  // blocking handlers still running post their replies, which fail on closed sockets
  ioc.poll();   // every completion runs: the sessions (and their references to us) are released
  http_sessions.clear();
  ws_sessions.clear();
}

std::size_t HttpServer::connections() const { return impl_->connections.load(); }

}  // namespace gf::server
