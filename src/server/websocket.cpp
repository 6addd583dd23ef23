// The WebSocket connections: /ws (WsHub's clients) and Socket.IO over WebSocket (a SioSession's
// transport), each over a WsLink (the WebSocket itself, server/ws_link.cpp). The HTTP session decides
// each upgrade (server/http_session.cpp) and hands the stream over here.
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <boost/asio/post.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "server/beast_server.hpp"
#include "server/ws_link.hpp"

namespace gf::server {

namespace {

// RFC 6455's close codes used here.
constexpr std::uint16_t kCloseNormal = 1000;
constexpr std::uint16_t kCloseGoingAway = 1001;
constexpr std::uint16_t kCloseTryAgainLater = 1013;

// ---------------------------------------------------------------------------------------------------
// WebSocket session

class WsSession final : public WsClient, public WsConnection, public std::enable_shared_from_this<WsSession> {
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
    WsLink::Options o;
    o.handshake_timeout = std::chrono::seconds(10);
    o.idle_timeout = std::chrono::seconds(60);  // a peer that answers no ping for this long is closed
    o.keep_alive_pings = true;
    o.read_limit = srv_->opts.ws_message_limit;
    o.server_header = srv_->opts.server_header;
    o.subprotocol = std::move(subprotocol);
    // A peer that sends Close leaves now: its place and its updates are freed at once, not when the
    // closing handshake's TCP teardown ends (up to the handshake timeout when the peer lingers).
    ws_.on_close_frame([this] { leave(); });
    period_ = period;
    ws_.accept(req, o, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // WsClient: called from any thread (the hub's); the work happens on the I/O thread.
  void send(Text text, bool droppable) override {
    asio::post(ws_.executor(), [self = shared_from_this(), text = std::move(text), droppable]() mutable {
      self->enqueue(std::move(text), droppable);
    });
  }

  void force_close() override { abort(); }

  void close_going_away() override {
    if (closing_) return;
    closing_ = true;
    ws_.close(kCloseGoingAway, {}, [self = shared_from_this()](beast::error_code) {});
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
      ws_.close(kCloseTryAgainLater, "too many WebSocket clients", [self = shared_from_this()](beast::error_code) {});
      return;
    }
    id_ = joined->id;
    enqueue(joined->greeting, false);
    do_read();
  }

  void do_read() {
    ws_.read([self = shared_from_this()](beast::error_code ec, std::string text, bool) {
      self->on_read(ec, std::move(text));
    });
  }

  void on_read(beast::error_code ec, std::string text) {
    if (ec) {
      abort();
      return;
    }
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
    ws_.write(std::move(*next), [self = shared_from_this()](beast::error_code ec) {
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
    ws_.abort();
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  WsLink ws_;
  OutboundQueue queue_;
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

class SioWsSession final : public WsConnection, public std::enable_shared_from_this<SioWsSession> {
 public:
  SioWsSession(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream, std::shared_ptr<SioSession> session)
      : srv_(std::move(srv)), ws_(std::move(stream)), session_(std::move(session)) {
    ++srv_->connections;
  }
  ~SioWsSession() override {
    detach();
    --srv_->connections;
  }

  // `fresh`: a session opened on this WebSocket (it gets the open packet first); else an upgrade.
  void start(http::request<http::empty_body> req, bool fresh) {
    WsLink::Options o;
    o.handshake_timeout = std::chrono::seconds(10);
    // Engine.IO pings every ping_interval; a peer silent for longer than its deadline is gone.
    o.idle_timeout = srv_->sio->options().ping_interval + srv_->sio->options().ping_timeout;
    o.keep_alive_pings = false;
    o.read_limit = srv_->sio->options().max_payload;
    o.server_header = srv_->opts.server_header;
    fresh_ = fresh;
    if (fresh) direct_.push_back(std::make_shared<const std::string>(session_->open_packet()));
    ws_.accept(req, o, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  void force_close() override { abort(); }
  // A drain closes Socket.IO sessions through SocketIo::close_all; after the loop, force_close.
  void close_going_away() override { abort(); }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) {
      if (fresh_) session_->close();  // an upgrade's session goes on polling
      return;
    }
    std::weak_ptr<SioWsSession> weak = weak_from_this();
    auto exec = ws_.executor();
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
    // Until the session is connected (and so authorised), a message is a CONNECT at most: a few KiB.
    const auto& so = srv_->sio->options();
    ws_.set_read_limit(session_->connected() ? so.max_payload : so.unconnected_payload);
    ws_.read([self = shared_from_this()](beast::error_code ec, std::string text, bool binary) {
      self->on_read(ec, std::move(text), binary);
    });
  }

  void on_read(beast::error_code ec, std::string text, bool binary) {
    if (ec) {
      abort();
      return;
    }
    if (binary) {  // no binary packets: the session ends (docs/socketio.md)
      session_->close();
      abort();
      return;
    }
    if (auto reply = session_->on_packet(text, SioTransport::WebSocket)) {
      // The open packet and one "3probe" are all that come here; more is a client that sends faster
      // than it reads, and it must not make the agent hold its backlog.
      if (direct_.size() >= kMaxDirect) {
        session_->close();
        abort();
        return;
      }
      direct_.push_back(std::make_shared<const std::string>(std::move(*reply)));
    }
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
        ws_.close(kCloseNormal, {}, [self = shared_from_this()](beast::error_code) {});
      }
      return;
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    ws_.write(std::move(*next), [self = shared_from_this()](beast::error_code ec) {
      self->writing_ = false;
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
    ws_.abort();
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  WsLink ws_;
  std::shared_ptr<SioSession> session_;
  bool fresh_ = false;
  bool attached_ = false;
  static constexpr std::size_t kMaxDirect = 4;
  std::deque<Text> direct_;
  bool accepted_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::chrono::steady_clock::time_point write_started_{};
};

}  // namespace

std::shared_ptr<WsConnection> start_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                               http::request<http::empty_body> req,
                                               std::optional<std::chrono::milliseconds> period,
                                               std::string subprotocol) {
  // Not make_shared: a session's memory goes back when it ends, not when the last weak_ptr to its
  // control block (the server's list) is pruned.
  auto ws = std::shared_ptr<WsSession>(new WsSession(std::move(srv), std::move(stream)));
  ws->start(std::move(req), period, std::move(subprotocol));
  return ws;
}

std::shared_ptr<WsConnection> start_sio_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                                   std::shared_ptr<SioSession> session,
                                                   http::request<http::empty_body> req, bool fresh) {
  auto ws = std::shared_ptr<SioWsSession>(new SioWsSession(std::move(srv), std::move(stream), std::move(session)));
  ws->start(std::move(req), fresh);
  return ws;
}

}  // namespace gf::server
