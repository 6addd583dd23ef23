// The Beast transport. Everything that touches a socket is here, on one I/O thread; the HTTP-free
// parts (routing, access, fan-out, static paths) live in router/ws_hub/security and are tested alone.
#include "server/http_server.hpp"

#include <utility>  // before asio (GCC 12, see STACK.md)

#include <malloc.h>
#include <sys/resource.h>

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
#include <deque>
#include <fstream>
#include <iterator>
#include <list>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "platform/log.hpp"
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
class SioWsSession;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(const Router& r, WsHub* w, ServerOptions o, SocketIo* s)
      : router(r),
        ws(w),
        sio(w ? s : nullptr),
        opts(std::move(o)),
        acceptor(ioc),
        pool(opts.workers ? opts.workers : 1),
        fresh_pool(1),
        signals(ioc) {
    host_names = machine_host_names();
    host_names.insert(host_names.end(), opts.allowed_hosts.begin(), opts.allowed_hosts.end());
  }

  const Router& router;
  WsHub* ws;
  SocketIo* sio;  // null: no /socket.io/
  ServerOptions opts;
  asio::io_context ioc{1};
  tcp::acceptor acceptor;
  asio::thread_pool pool;
  // Requests for a fresh driver reading: one thread, since the agent shares one reading among them
  // anyway; the store's requests on `pool` never queue behind them.
  asio::thread_pool fresh_pool;
  asio::signal_set signals;
  std::vector<std::string> host_names;  // allowed Host names (besides IP literals and localhost)
  // Open connections by client address. Sessions may end on a worker thread (the last reference is a
  // finished handler's), hence the lock.
  std::mutex addresses_mu;
  std::unordered_map<std::string, std::size_t> per_address;
  unsigned short port = 0;
  std::atomic<std::size_t> connections{0};
  // WebSocket handshakes under way: counted against the client cap with the joined clients, so a burst
  // of upgrades never gets past it (each one beyond it gets 503 before the handshake).
  std::atomic<std::size_t> ws_pending{0};
  bool draining = false;  // I/O thread only
  // Live sessions (I/O thread only), so that a drain can close the idle ones.
  std::list<std::weak_ptr<HttpSession>> http_sessions;
  std::list<std::weak_ptr<WsSession>> ws_sessions;
  std::list<std::weak_ptr<SioWsSession>> sio_ws_sessions;
  // Socket.IO's pings and timeouts, once a second.
  void start_sio_timer();
  asio::steady_timer sio_timer{ioc};

  void accept();
  // Every few seconds: forgets ended sessions and, after many connections closed since the last look,
  // hands the freed heap back to the kernel (glibc keeps it otherwise: a burst of 4 000 idle
  // connections would stay in the agent's RSS after they are gone).
  void start_trim_timer();
  asio::steady_timer trim_timer{ioc};
  std::size_t trim_high_water = 0;
  // Before the first connection: the reactor's per-socket states for as many sockets as may be open.
  void reserve_descriptor_states();
  // Closes the HTTP connection that has waited longest without a request in flight; false when none.
  bool evict_idle();
  void release_address(const std::string& address);
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

  void start(http::request<http::empty_body> req, std::optional<std::chrono::milliseconds> period,
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
// Socket.IO over WebSocket: moves Engine.IO packets between the socket and its SioSession (which
// decides everything else). Writes come from a local queue of immediate replies ("3probe", the open
// packet) and then from the session's queue.

class SioWsSession final : public std::enable_shared_from_this<SioWsSession> {
 public:
  SioWsSession(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream, std::shared_ptr<SioSession> session)
      : srv_(std::move(srv)), ws_(std::move(stream)), session_(std::move(session)) {
    ++srv_->connections;
  }
  ~SioWsSession() {
    detach();
    --srv_->connections;
  }

  // `fresh`: a session opened on this WebSocket (it gets the open packet first); else an upgrade.
  void start(http::request<http::empty_body> req, bool fresh) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(10);
    // Engine.IO pings every ping_interval; a peer silent for longer than its deadline is gone.
    t.idle_timeout = srv_->sio->options().ping_interval + srv_->sio->options().ping_timeout;
    t.keep_alive_pings = false;
    ws_.set_option(t);
    ws_.read_message_max(srv_->sio->options().max_payload);
    const std::string server = srv_->opts.server_header;
    ws_.set_option(websocket::stream_base::decorator(
        [server](websocket::response_type& res) { res.set(http::field::server, server); }));
    fresh_ = fresh;
    if (fresh) direct_.push_back(std::make_shared<const std::string>(session_->open_packet()));
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  void force_close() { abort(); }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) {
      if (fresh_) session_->close();  // an upgrade's session goes on polling
      return;
    }
    std::weak_ptr<SioWsSession> weak = weak_from_this();
    auto exec = ws_.get_executor();
    const bool attached = session_->attach_ws([weak, exec] {
      asio::post(exec, [weak] {
        if (auto self = weak.lock()) self->pump();
      });
    });
    if (!attached) {
      abort();
      return;
    }
    attached_ = true;
    accepted_ = true;
    pump();
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
    if (ws_.got_binary()) {  // no binary packets: the session ends (docs/socketio.md)
      session_->close();
      abort();
      return;
    }
    const std::string text = beast::buffers_to_string(rbuf_.data());
    rbuf_.consume(rbuf_.size());
    if (auto reply = session_->on_packet(text, SioTransport::WebSocket))
      direct_.push_back(std::make_shared<const std::string>(std::move(*reply)));
    pump();
    if (!closing_) do_read();
  }

  // Writes what is waiting, one message at a time; closes once the session has.
  void pump() {
    if (!accepted_ || closing_) return;
    if (writing_) {
      // A client that has not taken a message for this long is stalled: it must not hold memory.
      if (std::chrono::steady_clock::now() - write_started_ > srv_->opts.ws_stall_timeout) {
        session_->close();
        abort();
      }
      return;
    }
    std::optional<Text> next;
    if (!direct_.empty()) {
      next = std::move(direct_.front());
      direct_.pop_front();
    } else {
      next = session_->take_one();
    }
    if (!next) {
      if (session_->closed()) {
        closing_ = true;
        ws_.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code) {});
      }
      return;
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    current_ = std::move(*next);
    ws_.text(true);
    ws_.async_write(asio::buffer(*current_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->current_.reset();
      if (ec) {
        self->abort();
        return;
      }
      self->pump();
    });
  }

  // Only the WebSocket that attached detaches (another one may have been refused for the same sid).
  void detach() {
    if (!attached_) return;
    attached_ = false;
    session_->detach_ws();
  }

  void abort() {
    closing_ = true;
    detach();
    beast::error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<SioSession> session_;
  bool fresh_ = false;
  bool attached_ = false;
  beast::flat_buffer rbuf_;
  std::deque<Text> direct_;
  Text current_;
  bool accepted_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::chrono::steady_clock::time_point write_started_{};
};

// ---------------------------------------------------------------------------------------------------
// HTTP session

class HttpSession final : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<HttpServer::Impl> srv, tcp::socket&& socket, std::string address)
      : srv_(std::move(srv)), stream_(std::move(socket)), address_(std::move(address)) {
    ++srv_->connections;
  }
  ~HttpSession() {
    srv_->release_address(address_);
    --srv_->connections;
  }

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

  // Waiting for a request (a whole header has not come), and not already being closed.
  bool idle() const { return !busy_ && !evicted_ && stream_.socket().is_open(); }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  // Makes room for a newcomer at the connection cap.
  void evict() {
    evicted_ = true;
    force_close();
  }

 private:
  void do_read() {
    busy_ = false;
    unread_body_ = false;
    idle_since_ = std::chrono::steady_clock::now();
    body_parser_.reset();
    req_ = Request{};
    route_ = nullptr;
    sio_post_.reset();
    // Before a request is authorised, a connection holds this buffer (a few hundred bytes while idle,
    // at most about header_limit) and the header parser; nothing of a body.
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    buffer_.max_size(std::max(srv_->opts.header_limit + 1024, buffer_.size() + 1024));
    header_parser_.emplace();
    header_parser_->header_limit(static_cast<std::uint32_t>(srv_->opts.header_limit));
    header_parser_->body_limit(srv_->opts.body_limit);  // a Content-Length beyond it is refused at once
    // A trickling (slowloris) or silent client is closed: a new connection gets header_timeout (within
    // request_timeout) to send its header, a kept-alive one keep_alive_timeout to start the next.
    stream_.expires_after(requests_ == 0 ? std::min(srv_->opts.header_timeout, srv_->opts.request_timeout)
                                         : srv_->opts.keep_alive_timeout);
    http::async_read_header(stream_, buffer_, *header_parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  // Read errors that end the connection without an answer; true when handled.
  bool closed_by(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::error::bad_descriptor) {
      close();
      return true;
    }
    return false;
  }

  void on_header(beast::error_code ec) {
    if (closed_by(ec)) return;
    unread_body_ = true;  // until the header parsed: what the client still sends is read and dropped
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
    ++requests_;
    auto& msg = header_parser_->get();
    // A body announced and not read leaves the connection unusable for a next request: whoever
    // answers without reading it closes the connection.
    unread_body_ = !header_parser_->is_done();
    keep_alive_ = msg.keep_alive() && !srv_->draining;
    head_ = msg.method() == http::verb::head;

    req_.method = method_of(msg.method());
    req_.target = std::string(msg.target());
    const auto q = req_.target.find('?');
    if (!url_decode(std::string_view(req_.target).substr(0, q), req_.path, false) || req_.path.empty() ||
        req_.path.front() != '/' ||
        (q != std::string::npos && !parse_query(std::string_view(req_.target).substr(q + 1), req_.query))) {
      answer(error_response(400, "bad_request", "malformed request target"));
      return;
    }
    // DNS rebinding: a page whose name was re-pointed at this machine still sends its own name.
    const auto host = msg.find(http::field::host);
    if (host == msg.end() && msg.version() >= 11) {
      answer(error_response(400, "bad_request", "an HTTP/1.1 request needs a Host header"));
      return;
    }
    if (host != msg.end() &&
        !host_allowed(std::string_view(host->value().data(), host->value().size()), srv_->host_names)) {
      answer(error_response(421, "misdirected_request",
                            "this agent does not answer to the host name '" + std::string(host->value()) +
                                "' (use its address, localhost, or add the name with --allow-host)"));
      return;
    }
    if (auto it = msg.find(http::field::authorization); it != msg.end()) req_.authorization = std::string(it->value());
    if (auto it = msg.find(http::field::content_type); it != msg.end()) req_.content_type = std::string(it->value());

    if (srv_->sio && (req_.path == "/socket.io/" || req_.path == "/socket.io")) {
      socketio();
      return;
    }
    if (websocket::is_upgrade(msg)) {
      upgrade();
      return;
    }
    if (srv_->draining) {
      answer(error_response(503, "shutting_down", "the agent is stopping"));
      return;
    }
    if (!is_api_path(req_.path)) {
      serve_static();
      return;
    }
    auto d = decide(srv_->router, req_, srv_->opts.token, srv_->opts.auth_read);
    if (d.answer) {
      answer(std::move(*d.answer));
      return;
    }
    route_ = d.route;
    if (!unread_body_) {
      run_route();
      return;
    }
    // Authorised: now the body, within body_limit and request_timeout. The parser takes over what the
    // header parser read; the buffer only passes chunks on to the body string.
    body_parser_.emplace(std::move(*header_parser_));
    header_parser_.reset();
    body_parser_->body_limit(srv_->opts.body_limit);
    buffer_.max_size(std::max<std::size_t>(buffer_.size() + 1024, 64 * 1024));
    stream_.expires_after(srv_->opts.request_timeout);
    http::async_read(stream_, buffer_, *body_parser_,
                     [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_body(e); });
  }

  void on_body(beast::error_code ec) {
    if (closed_by(ec)) return;
    if (ec && sio_post_) {
      sio_post_->close();  // a bad or oversized payload ends the Engine.IO session
      sio_post_.reset();
    }
    if (ec == http::error::body_limit) {
      reply(error_response(413, "payload_too_large",
                           "the request body is larger than " + std::to_string(srv_->opts.body_limit) + " bytes"),
            false, false);
      return;
    }
    if (ec) {
      reply(error_response(400, "bad_request", "malformed HTTP request body: " + ec.message()), false, false);
      return;
    }
    unread_body_ = false;
    req_.body = std::move(body_parser_->get().body());
    body_parser_.reset();
    if (sio_post_) {
      sio_payload();
      return;
    }
    run_route();
  }

  void run_route() {
    const Route* route = route_;
    if (!runs_blocking(route->exec, req_)) {
      reply(invoke(*route, req_), keep_alive_, head_);
      return;
    }
    auto& pool = wants_fresh(req_) ? srv_->fresh_pool : srv_->pool;
    asio::post(pool, [self = shared_from_this(), route, req = std::move(req_), keep_alive = keep_alive_,
                      head = head_]() mutable {
      Response r = invoke(*route, req);
      asio::post(self->stream_.get_executor(),
                 [self, r = std::move(r), keep_alive, head]() mutable { self->reply(std::move(r), keep_alive, head); });
    });
  }

  // An answer decided from the header alone.
  void answer(Response r) { reply(std::move(r), keep_alive_ && !unread_body_, head_); }

  void upgrade() {
    auto& msg = header_parser_->get();
    head_ = false;
    if (req_.path != "/ws" || !srv_->ws) {
      reply(error_response(404, "not_found", "WebSocket is served at /ws"), false, false);
      return;
    }
    if (srv_->draining) {
      reply(error_response(503, "shutting_down", "the agent is stopping"), false, false);
      return;
    }
    std::string origin;
    if (auto it = msg.find(http::field::origin); it != msg.end()) origin = std::string(it->value());
    if (!origin_allowed(origin, srv_->opts.host, srv_->port, srv_->opts.allowed_origins)) {
      reply(error_response(403, "forbidden_origin", "WebSocket Origin " + origin + " is not this agent's address"),
            false, false);
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
    if (srv_->opts.auth_read && !bearer_ok(req_.authorization, srv_->opts.token)) {
      const bool by_protocol = std::any_of(protocols.begin(), protocols.end(), [&](const std::string& p) {
        return p.rfind("gpufleet.bearer.", 0) == 0 && bearer_ok("Bearer " + p.substr(16), srv_->opts.token);
      });
      if (!by_protocol) {
        reply(error_response(401, "unauthorized", "this agent needs Authorization: Bearer <token> for reads"), false,
              false);
        return;
      }
    }
    const bool v1 = std::find(protocols.begin(), protocols.end(), "gpufleet.v1") != protocols.end();
    if (srv_->ws->clients() + srv_->ws_pending.load() >= srv_->ws->max_clients()) {
      reply(error_response(503, "too_many_clients", "the WebSocket client limit is reached"), false, false);
      return;
    }
    std::optional<std::chrono::milliseconds> period;
    if (auto it = req_.query.find("period_ms"); it != req_.query.end()) {
      const std::string& v = it->second;
      const bool digits =
          !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) {
        reply(error_response(400, "bad_request", "period_ms must be a whole number of milliseconds"), false, false);
        return;
      }
      period = std::chrono::milliseconds(std::stoll(v));
    }
    auto ws = std::shared_ptr<WsSession>(new WsSession(srv_, std::move(stream_)));
    srv_->ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    srv_->ws_sessions.push_back(ws);
    ws->start(header_parser_->release(), period, v1 ? "gpufleet.v1" : "");
  }

  // ------------------------------------------------------------------------------------------------
  // Socket.IO at /socket.io/ (Engine.IO v4): the handshake, polling GET/POST, and the WebSocket
  // (fresh or an upgrade). Same Origin check, token rule and client cap as /ws.

  // A text answer for an Engine.IO client, with the CORS headers of an allowed cross-origin page.
  Response sio_text(unsigned status, std::string body) {
    Response r =
        shared_response(status, "text/plain; charset=UTF-8", std::make_shared<const std::string>(std::move(body)));
    r.headers.insert(r.headers.end(), sio_cors_.begin(), sio_cors_.end());
    return r;
  }
  void sio_fail(unsigned status, std::string_view code, std::string_view message, bool upgrade) {
    Response r = error_response(status, code, message);
    r.headers.insert(r.headers.end(), sio_cors_.begin(), sio_cors_.end());
    if (upgrade) {
      reply(std::move(r), false, false);
    } else {
      answer(std::move(r));
    }
  }

  // The session a request names, if it exists and belongs to this client's address.
  std::shared_ptr<SioSession> sio_session(const std::string& sid) {
    auto s = srv_->sio->find(sid);
    return s && s->address() == address_ ? s : nullptr;
  }

  void socketio() {
    auto& msg = header_parser_->get();
    const bool upgrade = websocket::is_upgrade(msg);
    sio_cors_.clear();
    if (srv_->draining) return sio_fail(503, "shutting_down", "the agent is stopping", upgrade);
    std::string origin;
    if (auto it = msg.find(http::field::origin); it != msg.end()) origin = std::string(it->value());
    // A page from another origin gets nothing: no session, and no CORS header that would let it read.
    if (!origin_allowed(origin, srv_->opts.host, srv_->port, srv_->opts.allowed_origins))
      return sio_fail(403, "forbidden_origin", "Origin " + platform::printable(origin) + " is not this agent's address",
                      upgrade);
    if (!origin.empty()) {
      sio_cors_.emplace_back("Access-Control-Allow-Origin", origin);
      sio_cors_.emplace_back("Access-Control-Allow-Credentials", "true");
      sio_cors_.emplace_back("Vary", "Origin");
    }
    if (req_.method == Method::Options && !upgrade) {
      Response r = sio_text(204, "");
      r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST");
      r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
      r.headers.emplace_back("Access-Control-Max-Age", "600");
      return answer(std::move(r));
    }
    if (req_.method != Method::Get && req_.method != Method::Post) {
      Response r = error_response(405, "method_not_allowed", "/socket.io/ takes GET and POST");
      r.headers.emplace_back("Allow", "GET, POST, OPTIONS");
      return answer(std::move(r));
    }
    const auto q = [&](const char* key) -> std::string {
      auto it = req_.query.find(key);
      return it == req_.query.end() ? std::string() : it->second;
    };
    if (q("EIO") != "4")
      return sio_fail(400, "unsupported_protocol", "only Engine.IO 4 is served (EIO=4: socket.io-client 3 and later)",
                      upgrade);
    const std::string transport = q("transport");
    if (transport != (upgrade ? "websocket" : "polling"))
      return sio_fail(
          400, "bad_request",
          upgrade ? "a WebSocket upgrade needs transport=websocket" : "this request needs transport=polling", upgrade);
    // The token as for /ws: Authorization or ?token= at the handshake; without either, the Socket.IO
    // CONNECT may carry it (auth {token}). A token that is offered and wrong is refused at once.
    bool authorized = !srv_->opts.auth_read;
    if (srv_->opts.auth_read) {
      const auto qt = req_.query.find("token");
      const bool offered = !req_.authorization.empty() || qt != req_.query.end();
      authorized = bearer_ok(req_.authorization, srv_->opts.token) ||
                   (qt != req_.query.end() && bearer_ok("Bearer " + qt->second, srv_->opts.token));
      if (offered && !authorized)
        return sio_fail(401, "unauthorized", "this agent needs a valid token for reads", upgrade);
    }
    std::optional<std::chrono::milliseconds> period;
    if (!period_query(period))
      return sio_fail(400, "bad_request", "period_ms must be a whole number of milliseconds", upgrade);
    const std::string sid = q("sid");

    if (upgrade) {
      std::shared_ptr<SioSession> session;
      bool fresh = sid.empty();
      if (fresh) {
        auto opened =
            srv_->sio->open({address_, authorized, period, SioTransport::WebSocket}, std::chrono::steady_clock::now());
        if (!opened) return sio_fail(503, "too_many_clients", opened.error().message, true);
        session = std::move(*opened);
      } else {
        session = sio_session(sid);
        if (!session || session->on_websocket())
          return sio_fail(400, "unknown_session", "no such Engine.IO session for an upgrade", true);
      }
      auto ws = std::shared_ptr<SioWsSession>(new SioWsSession(srv_, std::move(stream_), session));
      srv_->sio_ws_sessions.remove_if([](const auto& w) { return w.expired(); });
      srv_->sio_ws_sessions.push_back(ws);
      ws->start(header_parser_->release(), fresh);
      return;
    }
    if (sid.empty()) {
      if (req_.method != Method::Get) return sio_fail(400, "bad_request", "a new session starts with a GET", false);
      auto opened =
          srv_->sio->open({address_, authorized, period, SioTransport::Polling}, std::chrono::steady_clock::now());
      if (!opened) return sio_fail(503, "too_many_clients", opened.error().message, false);
      return answer(sio_text(200, (*opened)->open_packet()));
    }
    auto session = sio_session(sid);
    if (!session) return sio_fail(400, "unknown_session", "no such Engine.IO session", false);
    if (req_.method == Method::Post) {
      sio_post_ = std::move(session);
      if (!unread_body_) {
        req_.body.clear();
        return sio_payload();
      }
      body_parser_.emplace(std::move(*header_parser_));
      header_parser_.reset();
      body_parser_->body_limit(std::min(srv_->opts.body_limit, srv_->sio->options().max_payload));
      buffer_.max_size(std::max<std::size_t>(buffer_.size() + 1024, 64 * 1024));
      stream_.expires_after(srv_->opts.request_timeout);
      http::async_read(stream_, buffer_, *body_parser_,
                       [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_body(e); });
      return;
    }
    // GET: answered now when something is queued, else when the session wakes it (a packet, the
    // next ping at the latest, or the session's end).
    auto exec = stream_.get_executor();
    std::weak_ptr<SioSession> weak_session = session;
    const auto poll = session->begin_poll([self = shared_from_this(), exec, weak_session] {
      asio::post(exec, [self, weak_session] {
        auto s = weak_session.lock();
        self->answer(self->sio_text(200, s ? s->take_payload() : std::string("1")));
      });
    });
    if (poll == SioSession::Poll::Refused)
      return sio_fail(400, "bad_request", "another GET is pending for this session (or it uses WebSocket)", false);
    if (poll == SioSession::Poll::Ready) return answer(sio_text(200, session->take_payload()));
    // Waiting: the socket's timer is off until the answer is written (the session's ping bounds it).
    stream_.expires_never();
  }

  void sio_payload() {
    auto session = std::move(sio_post_);
    sio_post_.reset();
    auto r = session->on_payload(req_.body);
    if (!r) return answer(error_response(400, "bad_request", r.error().message));
    answer(sio_text(200, "ok"));
  }

  // ?period_ms=N as for /ws; false when it is malformed.
  bool period_query(std::optional<std::chrono::milliseconds>& period) {
    auto it = req_.query.find("period_ms");
    if (it == req_.query.end()) return true;
    const std::string& v = it->second;
    const bool digits =
        !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return false;
    period = std::chrono::milliseconds(std::stoll(v));
    return true;
  }

  void serve_static() {
    const Request& req = req_;
    if (req.method != Method::Get && req.method != Method::Head) {
      Response r = error_response(405, "method_not_allowed", "static files are GET only");
      r.headers.emplace_back("Allow", "GET, HEAD");
      answer(std::move(r));
      return;
    }
    if (srv_->opts.static_dir.empty()) {
      answer(error_response(
          404, "not_found",
          req.path == "/"
              ? "no dashboard here: build it (make web) or start with --static DIR; the API is at /api/openapi.json"
              : "no such file: " + req.path));
      return;
    }
    auto file = resolve_static(srv_->opts.static_dir, req.path);
    if (!file) {
      answer(error_response(404, "not_found", "no such file: " + req.path));
      return;
    }
    std::ifstream in(*file, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      answer(error_response(500, "io_error", "cannot read " + req.path));
      return;
    }
    Response r = shared_response(200, std::string(content_type_for(*file)),
                                 std::make_shared<const std::string>(std::move(data)));
    // Vite names assets by content hash: they never change. index.html is checked every time.
    r.headers.emplace_back("Cache-Control",
                           req.path.rfind("/assets/", 0) == 0 ? "public, max-age=31536000, immutable" : "no-cache");
    answer(std::move(r));
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
    header_parser_.reset();
    body_parser_.reset();
    stream_.expires_after(srv_->opts.request_timeout);
    http::async_write(stream_, res, [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
      self->res_.reset();
      self->body_.reset();
      if (ec || !keep_alive || self->srv_->draining) {
        if (!ec && self->unread_body_) {
          self->linger();
          return;
        }
        self->close();
        return;
      }
      self->do_read();
    });
  }

  // After an answer that left a body unread: stop sending, then read and drop what the client still
  // sends (briefly, a bounded amount) before closing. Closing with unread bytes makes the kernel reset
  // the connection, and the client could lose the answer.
  void linger() {
    unread_body_ = false;
    busy_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.consume(buffer_.size());
    buffer_.shrink_to_fit();
    buffer_.max_size(4096);
    lingered_ = 0;
    stream_.expires_after(std::chrono::seconds(2));
    linger_read();
  }

  void linger_read() {
    stream_.async_read_some(buffer_.prepare(1024), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->lingered_ += n;
      self->buffer_.consume(self->buffer_.size());
      if (ec || self->lingered_ > self->srv_->opts.body_limit) {
        self->close();
        return;
      }
      self->linger_read();
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
  std::string address_;  // the client's, for the per-address count
  beast::flat_buffer buffer_;
  // The header is read with a parser that holds no body; an authorised request's parser then takes
  // it over to read the body.
  std::optional<http::request_parser<http::empty_body>> header_parser_;
  std::optional<http::request_parser<http::string_body>> body_parser_;
  std::optional<http::response<http::span_body<const char>>> res_;
  std::shared_ptr<const std::string> body_;
  Request req_;
  const Route* route_ = nullptr;
  std::shared_ptr<SioSession> sio_post_;  // the session whose POST body is being read
  std::vector<std::pair<std::string, std::string>> sio_cors_;
  bool keep_alive_ = false;
  bool head_ = false;
  bool unread_body_ = false;
  bool busy_ = false;
  bool evicted_ = false;
  std::uint64_t requests_ = 0;
  std::size_t lingered_ = 0;
  std::chrono::steady_clock::time_point idle_since_{};
};

// ---------------------------------------------------------------------------------------------------

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (!ec) {
      beast::error_code aec;
      auto remote = socket.remote_endpoint(aec).address();
      if (remote.is_v6() && remote.to_v6().is_v4_mapped())
        remote = asio::ip::make_address_v4(asio::ip::v4_mapped, remote.to_v6());
      const std::string address = aec ? std::string("?") : remote.to_string();
      bool admitted = false;
      {
        std::lock_guard lock(self->addresses_mu);
        auto& n = self->per_address[address];
        if (n < self->opts.max_connections_per_address) {
          ++n;
          admitted = true;
        } else if (n == 0) {
          self->per_address.erase(address);
        }
      }
      // At the global cap the newcomer takes the place of the connection idle longest: a crowd of
      // silent sockets cannot lock out a client that has something to ask.
      if (admitted && self->connections.load() >= self->opts.max_connections && !self->evict_idle()) {
        self->release_address(address);
        admitted = false;
      }
      if (!admitted) {
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        // Not make_shared: a session's memory goes back when it ends, not when the last weak_ptr to its
        // control block (the list below) is pruned.
        auto s = std::shared_ptr<HttpSession>(new HttpSession(self, std::move(socket), address));
        // Forget sessions that ended, so the list stays the size of the live ones.
        self->http_sessions.remove_if([](const auto& w) { return w.expired(); });
        self->http_sessions.push_back(s);
        self->trim_high_water = std::max(self->trim_high_water, self->connections.load());
        s->start();
      }
    }
    self->accept();
  });
}

bool HttpServer::Impl::evict_idle() {
  std::shared_ptr<HttpSession> oldest;
  for (auto& w : http_sessions)
    if (auto s = w.lock(); s && s->idle() && (!oldest || s->idle_since() < oldest->idle_since())) oldest = s;
  if (!oldest) return false;
  oldest->evict();
  return true;
}

void HttpServer::Impl::release_address(const std::string& address) {
  std::lock_guard lock(addresses_mu);
  auto it = per_address.find(address);
  if (it == per_address.end()) return;
  if (--it->second == 0) per_address.erase(it);
}

void HttpServer::Impl::start_trim_timer() {
  trim_timer.expires_after(std::chrono::seconds(2));
  trim_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->draining) return;
    self->http_sessions.remove_if([](const auto& w) { return w.expired(); });
    self->ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    const std::size_t now = self->connections.load();
    self->trim_high_water = std::max(self->trim_high_water, now);
    if (self->trim_high_water >= now + 256) {
      ::malloc_trim(0);
      self->trim_high_water = now;
    }
    self->start_trim_timer();
  });
}

void HttpServer::Impl::begin_drain() {
  if (draining) return;
  draining = true;
  beast::error_code ignored;
  trim_timer.cancel();
  acceptor.close(ignored);
  signals.cancel(ignored);
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->close_if_idle();
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->close_going_away();
  sio_timer.cancel();
  if (sio) sio->close_all();  // pending polls answer "close", Socket.IO WebSockets close
}

void HttpServer::Impl::start_sio_timer() {
  if (!sio) return;
  sio_timer.expires_after(std::chrono::seconds(1));
  sio_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->draining) return;
    self->sio->tick(std::chrono::steady_clock::now());
    self->sio_ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    self->start_sio_timer();
  });
}

HttpServer::HttpServer(const Router& router, WsHub* ws, ServerOptions options, SocketIo* sio)
    : impl_(std::make_shared<Impl>(router, ws, std::move(options), sio)) {}

HttpServer::~HttpServer() {
  impl_->pool.join();
  impl_->fresh_pool.join();
}

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
  i.reserve_descriptor_states();
  return i.port;
}

void HttpServer::Impl::reserve_descriptor_states() {
  // Asio's epoll reactor keeps the state of every socket it has seen (~150 bytes) in a free list for
  // reuse and never frees it. Allocated one per accepted connection, in between that connection's own
  // (larger, freed) allocations, those states pin one heap page per connection of a burst: 4 000 idle
  // connections kept ~15 MiB after they closed, whatever malloc_trim did. Made here, all at once
  // before any connection, they sit together and the burst's pages can be given back. As many as
  // connections may be open, within what the descriptor limit leaves (sockets opened and closed now).
  rlimit rl{};
  std::size_t n = opts.max_connections + 64;  // + WebSocket handshakes, the acceptor, timers' fds
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    n = std::min<std::size_t>(n, rl.rlim_cur > 512 ? static_cast<std::size_t>(rl.rlim_cur) - 512 : 0);
  std::vector<tcp::socket> held;
  held.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    tcp::socket s(ioc);
    beast::error_code ec;
    s.open(tcp::v4(), ec);
    if (ec) break;
    held.push_back(std::move(s));
  }
  for (auto& s : held) {
    beast::error_code ec;
    s.close(ec);
  }
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
  i.start_trim_timer();
  i.start_sio_timer();
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
  if (sio) sio->close_all();
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
  for (auto& w : sio_ws_sessions)
    if (auto s = w.lock()) s->force_close();
  pool.join();  // blocking handlers still running post their replies, which fail on closed sockets
  fresh_pool.join();
  ioc.poll();  // every completion runs: the sessions (and their references to us) are released
  http_sessions.clear();
  ws_sessions.clear();
  sio_ws_sessions.clear();
}

std::size_t HttpServer::connections() const { return impl_->connections.load(); }

}  // namespace gf::server
