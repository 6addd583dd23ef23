// An HTTP/1.1 connection: reads a request's header (bounded), answers what it can refuse from the
// header alone, reads an authorised request's body, runs its route (on a worker when it may block),
// serves the dashboard's files, Socket.IO's handshake and long-polling, and decides each WebSocket
// upgrade before handing the stream to server/websocket.cpp.
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "platform/log.hpp"
#include "server/beast_server.hpp"
#include "server/handshake.hpp"
#include "server/static_files.hpp"

namespace gf::server {

namespace websocket = beast::websocket;

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

// Appends "Name: value\r\n"; a CR or LF in either (never in ours; a handler's value could carry one) is
// dropped, so no header line can end early.
void append_field(std::string& out, std::string_view name, std::string_view value) {
  for (const std::string_view part : {name, std::string_view(": "), value}) {
    // A loop, not find_first_of (libstdc++'s calls memchr per character).
    if (std::none_of(part.begin(), part.end(), [](char c) { return c == '\r' || c == '\n'; })) {
      out += part;
      continue;
    }
    for (const char c : part)
      if (c != '\r' && c != '\n') out += c;
  }
  out += "\r\n";
}

bool is_api_path(std::string_view p) {
  return p == "/metrics" || p == "/api" || p.rfind("/api/", 0) == 0 || p == "/ws";
}

class HttpSession final : public HttpConnection, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(std::shared_ptr<HttpServer::Impl> srv, tcp::socket&& socket, std::string address)
      : srv_(std::move(srv)), stream_(std::move(socket)), address_(std::move(address)) {
    ++srv_->connections;
    // reply() writes without blocking, then asynchronously what did not fit.
    beast::error_code ignored;
    stream_.socket().non_blocking(true, ignored);
  }
  ~HttpSession() override {
    srv_->release_address(address_);
    --srv_->connections;
  }

  void start() { do_read(); }

  void force_close() override {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  void close_if_idle() override {
    if (busy_) return;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  bool idle() const override { return !busy_ && !evicted_ && stream_.socket().is_open(); }
  std::chrono::steady_clock::time_point idle_since() const override { return idle_since_; }
  void evict() override {
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
    if (ec) return header_error(ec);
    busy_ = true;
    ++requests_;
    auto& msg = header_parser_->get();
    // A body announced and not read leaves the connection unusable for a next request: whoever
    // answers without reading it closes the connection.
    unread_body_ = !header_parser_->is_done();
    keep_alive_ = msg.keep_alive() && !srv_->draining;
    head_ = msg.method() == http::verb::head;
    if (auto refused = read_head(msg)) return answer(std::move(*refused));

    if (srv_->sio && (req_.path == "/socket.io/" || req_.path == "/socket.io")) return socketio();
    if (websocket::is_upgrade(msg)) return upgrade();
    if (srv_->draining) return answer(shutting_down());
    if (!is_api_path(req_.path)) return serve_static();
    auto d = decide(srv_->router, req_, srv_->opts.token, srv_->opts.auth_read, srv_->opts.read_token);
    if (d.answer) return answer(std::move(*d.answer));
    route_ = d.route;
    if (!unread_body_) return run_route();
    read_body(srv_->opts.body_limit);  // authorised: now the body
  }

  // A header that could not be read whole: answered (and closed) when the client may understand why.
  void header_error(beast::error_code ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      reply(error_response(431, "request_header_fields_too_large",
                           "the request's header is larger than " + std::to_string(srv_->opts.header_limit) + " bytes"),
            false, false);
    } else if (ec == http::error::body_limit) {
      reply(error_response(413, "payload_too_large",
                           "the request body is larger than " + std::to_string(srv_->opts.body_limit) + " bytes"),
            false, false);
    } else if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      reply(error_response(400, "bad_request", "malformed HTTP request: " + ec.message()), false, false);
    } else {
      close();
    }
  }

  // Fills req_ from the header: the refusal when its target or its Host is not acceptable.
  std::optional<Response> read_head(const http::request<http::empty_body>& msg) {
    req_.method = method_of(msg.method());
    req_.target = std::string(msg.target());
    const auto q = req_.target.find('?');
    if (!url_decode(std::string_view(req_.target).substr(0, q), req_.path, false) || req_.path.empty() ||
        req_.path.front() != '/' ||
        (q != std::string::npos && !parse_query(std::string_view(req_.target).substr(q + 1), req_.query)))
      return error_response(400, "bad_request", "malformed request target");
    // DNS rebinding: a page whose name was re-pointed at this machine still sends its own name.
    const auto host = msg.find(http::field::host);
    if (host == msg.end() && msg.version() >= 11)
      return error_response(400, "bad_request", "an HTTP/1.1 request needs a Host header");
    if (host != msg.end()) {
      // A client sends the same Host on every request of a connection: checked once. Nothing is kept
      // before the first allowed one, so an empty Host is checked (and refused) every time.
      const std::string_view value(host->value().data(), host->value().size());
      if (allowed_host_.empty() || value != allowed_host_) {
        if (!host_allowed(value, srv_->host_names))
          return error_response(421, "misdirected_request",
                                "this agent does not answer to the host name '" + std::string(value) +
                                    "' (use its address, localhost, or add the name with --allow-host)");
        allowed_host_.assign(value);
      }
    }
    if (auto it = msg.find(http::field::authorization); it != msg.end()) req_.authorization = std::string(it->value());
    if (auto it = msg.find(http::field::content_type); it != msg.end()) req_.content_type = std::string(it->value());
    if (auto it = msg.find(http::field::accept_encoding); it != msg.end())
      req_.accepts_gzip = accepts_gzip(std::string_view(it->value().data(), it->value().size()));
    return std::nullopt;
  }

  // The body, within `limit` and request_timeout. The parser takes over what the header parser read;
  // the buffer only passes chunks on to the body string.
  void read_body(std::size_t limit) {
    body_parser_.emplace(std::move(*header_parser_));
    header_parser_.reset();
    body_parser_->body_limit(limit);
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

  // The handshake's view of the request (after on_header filled req_).
  RequestHead request_head(bool upgrade) const {
    const auto& msg = header_parser_->get();
    RequestHead h{req_.method, req_.path, req_.query, req_.authorization, {}, {}, upgrade};
    if (auto it = msg.find(http::field::origin); it != msg.end()) h.origin = std::string(it->value());
    if (auto it = msg.find(http::field::sec_websocket_protocol); it != msg.end())
      h.subprotocols = std::string(it->value());
    return h;
  }

  HandshakePolicy handshake_policy() const {
    return {srv_->draining,       srv_->opts.host, srv_->port, &srv_->opts.allowed_origins,
            srv_->opts.auth_read, &srv_->tokens};
  }

  // A WebSocket session gets the socket as the acceptor made it: its own operations are asynchronous
  // (they work either way), any synchronous one (a close) must not see would_block.
  void blocking_again() {
    beast::error_code ignored;
    stream_.socket().non_blocking(false, ignored);
  }

  void upgrade() {
    head_ = false;
    const bool full = !srv_->ws || srv_->ws->clients() + srv_->ws_pending.load() >= srv_->ws->max_clients();
    auto d = srv_->ws
                 ? decide_ws(request_head(true), handshake_policy(), full)
                 : std::variant<Response, WsAccept>(error_response(404, "not_found", "WebSocket is served at /ws"));
    if (auto* refused = std::get_if<Response>(&d)) return reply(std::move(*refused), false, false);
    auto& accept = std::get<WsAccept>(d);
    blocking_again();
    srv_->ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    srv_->ws_sessions.push_back(start_ws_session(srv_, std::move(stream_), header_parser_->release(), accept.period,
                                                 std::move(accept.subprotocol)));
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
    sio_refuse(std::move(r), upgrade);
  }
  // An upgrade refused is answered and closed; a polling request's connection may go on.
  void sio_refuse(Response r, bool upgrade) {
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
    const bool upgrade = websocket::is_upgrade(header_parser_->get());
    auto d = decide_socketio(request_head(upgrade), handshake_policy());
    sio_cors_ = std::move(d.cors);
    if (auto* answered = std::get_if<Response>(&d.outcome)) return sio_refuse(std::move(*answered), upgrade);
    const auto& accept = std::get<SioAccept>(d.outcome);
    if (upgrade) return sio_websocket(accept);
    if (accept.sid.empty()) {
      if (req_.method != Method::Get) return sio_fail(400, "bad_request", "a new session starts with a GET", false);
      auto opened = srv_->sio->open({address_, accept.authorized, accept.period, SioTransport::Polling},
                                    std::chrono::steady_clock::now());
      if (!opened) return sio_fail(503, "too_many_clients", opened.error().message, false);
      return answer(sio_text(200, (*opened)->open_packet()));
    }
    auto session = sio_session(accept.sid);
    if (!session) return sio_fail(400, "unknown_session", "no such Engine.IO session", false);
    if (req_.method == Method::Post) return sio_post(std::move(session));
    sio_poll(std::move(session));
  }

  // A WebSocket for a new session (no sid) or an upgrade of a polling one.
  void sio_websocket(const SioAccept& accept) {
    std::shared_ptr<SioSession> session;
    const bool fresh = accept.sid.empty();
    if (fresh) {
      auto opened = srv_->sio->open({address_, accept.authorized, accept.period, SioTransport::WebSocket},
                                    std::chrono::steady_clock::now());
      if (!opened) return sio_fail(503, "too_many_clients", opened.error().message, true);
      session = std::move(*opened);
    } else {
      session = sio_session(accept.sid);
      if (!session || session->on_websocket())
        return sio_fail(400, "unknown_session", "no such Engine.IO session for an upgrade", true);
    }
    blocking_again();
    srv_->sio_ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    srv_->sio_ws_sessions.push_back(
        start_sio_ws_session(srv_, std::move(stream_), std::move(session), header_parser_->release(), fresh));
  }

  // A POST: its body (packets) is read, within the session's limit, then handed over (sio_payload).
  void sio_post(std::shared_ptr<SioSession> session) {
    sio_post_ = std::move(session);
    if (!unread_body_) {
      req_.body.clear();
      return sio_payload();
    }
    // Until the session is connected (and so authorised), a body is a CONNECT at most: a few KiB.
    const auto& so = srv_->sio->options();
    const std::size_t limit =
        std::min(srv_->opts.body_limit, sio_post_->connected() ? so.max_payload : so.unconnected_payload);
    // The header parser already took Content-Length against the server's own limit; this one is smaller.
    if (const auto length = header_parser_->content_length(); length && *length > limit) {
      sio_post_->close();
      sio_post_.reset();
      reply(error_response(413, "payload_too_large", "the body is larger than " + std::to_string(limit) + " bytes"),
            false, false);
      return;
    }
    read_body(limit);
  }

  // A GET: answered now when something is queued, else when the session wakes it (a packet, the next
  // ping at the latest, or the session's end).
  void sio_poll(std::shared_ptr<SioSession> session) {
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

  void serve_static() { answer(static_file_response(srv_->opts.static_dir, req_)); }

  // The answer: its header written here (the fields are few and known: Beast's serializer cost more per
  // request than the rest of a cached route), then the header, body and tail in one write.
  void reply(Response r, bool keep_alive, bool head) {
    auto& h = head_text_;
    h.clear();
    h += "HTTP/1.1 ";
    h += std::to_string(r.status);
    h += ' ';
    const auto reason = http::obsolete_reason(static_cast<http::status>(r.status));
    h.append(reason.data(), reason.size());
    h += "\r\n";
    append_field(h, "Server", srv_->opts.server_header);
    append_field(h, "Content-Type", r.content_type);
    h += "X-Content-Type-Options: nosniff\r\n";
    if (r.gzip) h += "Content-Encoding: gzip\r\n";
    if (r.negotiated) h += "Vary: Accept-Encoding\r\n";
    bool has_cache_control = false;
    for (const auto& [k, v] : r.headers) {
      append_field(h, k, v);
      has_cache_control = has_cache_control || beast::iequals(k, "Cache-Control");
    }
    if (!has_cache_control) h += "Cache-Control: no-store\r\n";
    if (!keep_alive) h += "Connection: close\r\n";
    const std::size_t length = (r.body ? r.body->size() : 0) + (r.tail ? r.tail->size() : 0);
    if (r.status >= 200 && r.status != 204 && r.status != 304) {  // those have no body and say no length
      h += "Content-Length: ";
      h += std::to_string(length);
      h += "\r\n";
    }
    h += "\r\n";
    if (!head) {
      body_ = std::move(r.body);
      tail_ = std::move(r.tail);
    }
    const auto buf = [](const std::shared_ptr<const std::string>& t) {
      return t ? asio::const_buffer(t->data(), t->size()) : asio::const_buffer();
    };
    std::array<asio::const_buffer, 3> out{asio::const_buffer(h.data(), h.size()), buf(body_), buf(tail_)};
    header_parser_.reset();
    body_parser_.reset();
    // Most answers fit in the socket's send buffer: written now, in one non-blocking sendmsg, with no
    // asynchronous operation and no timer to arm and cancel. What does not fit (a slow or stalled
    // reader, a large body) is written asynchronously, within request_timeout.
    beast::error_code ec;
    std::size_t sent = stream_.socket().write_some(out, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      ec = {};
      sent = 0;
    }
    if (ec || sent == asio::buffer_size(out)) return written(ec, keep_alive);
    for (auto& b : out) {
      const std::size_t n = std::min(sent, b.size());
      b += n;
      sent -= n;
    }
    stream_.expires_after(srv_->opts.request_timeout);
    asio::async_write(stream_, out, [self = shared_from_this(), keep_alive](beast::error_code e, std::size_t) {
      self->written(e, keep_alive);
    });
  }

  // An answer sent (or failed): the next request, or the end of the connection.
  void written(beast::error_code ec, bool keep_alive) {
    body_.reset();
    tail_.reset();
    if (ec || !keep_alive || srv_->draining) {
      if (!ec && unread_body_) {
        linger();
        return;
      }
      close();
      return;
    }
    do_read();
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
  std::string allowed_host_;                        // the last Host value found allowed on this connection
  std::string head_text_;                           // the answer's header, its capacity kept between answers
  std::shared_ptr<const std::string> body_, tail_;  // the answer's texts until written
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

}  // namespace

std::shared_ptr<HttpConnection> start_http_session(std::shared_ptr<HttpServer::Impl> srv, tcp::socket&& socket,
                                                   std::string address) {
  // Not make_shared: a session's memory goes back when it ends, not when the last weak_ptr to its
  // control block (the server's list) is pruned.
  auto s = std::shared_ptr<HttpSession>(new HttpSession(std::move(srv), std::move(socket), std::move(address)));
  s->start();
  return s;
}

}  // namespace gf::server
