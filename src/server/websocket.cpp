// The WebSocket connections: one class (LiveSocket) for both kinds, over a WsLink (the WebSocket itself,
// server/ws_link.cpp). Its messages come from one of two sources:
//   /ws           a WsHub client: the hub's messages (sent from the hub's threads) and the replies to
//                 the client's requests wait in the connection's own queue;
//   Socket.IO     a SioSession's transport: the session queues its packets and wakes the connection;
//                 the connection's queue holds only its immediate replies (the open packet, "3probe").
// The HTTP session decides each upgrade (server/handshake.hpp, server/http_session.cpp) and hands the
// stream over here.
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/beast_server.hpp"
#include "server/ws_link.hpp"

namespace gf::server {

namespace {

// RFC 6455's close codes used here.
constexpr std::uint16_t kCloseNormal = 1000;
constexpr std::uint16_t kCloseGoingAway = 1001;
constexpr std::uint16_t kCloseTryAgainLater = 1013;

// The fan-out's pace. A reading's update goes to every client at once: from the hub's thread, one
// handler per client posted to the I/O thread, which runs them in order. 10 000 of them are ~150 ms of
// that thread's work, and an HTTP request that comes meanwhile waited behind all of them (a gpu-metrics
// GET at p99 130-300 ms with 10 000 /ws clients). Off the I/O thread, a sender waits while this many
// handlers are still queued (until half have run), so a request waits behind a few milliseconds of them at most; the
// fan-out takes as long as before, in the same order (a client's updates stay a period apart). Never on the I/O thread
// itself, and never longer than kPaceWaitMax per message: the I/O thread may be stopping, or waiting for this very tick
// (the last client of a period leaving unsubscribes its group, which waits for a tick in flight).
// 256 queued handlers were ~8 ms of the I/O thread with 10 000 /ws clients (gpu-metrics GET p99 8.8 ms); 64 are
// ~2 ms, for ~300 wake-ups of the sender per reading (bench/RESULTS.md, issue 24 goal 2, permessage-deflate).
constexpr int kPaceBacklog = 64;
constexpr auto kPaceWaitMax = std::chrono::milliseconds(50);

class FanoutPace {
 public:
  // Before posting a handler (from any thread).
  void before_post(asio::io_context& ioc) {
    if (queued_.load(std::memory_order_relaxed) >= kPaceBacklog && !ioc.get_executor().running_in_this_thread()) {
      const auto now = std::chrono::steady_clock::now();
      // After a wait that ran out (an I/O thread that stopped, or stalls), no wait for a second.
      if (now.time_since_epoch().count() >= unpaced_until_.load(std::memory_order_relaxed)) {
        // Woken when the I/O thread has run the backlog down to half (done()), so a sender refills it
        // in bursts, not a handler at a time.
        std::unique_lock lock(mu_);
        const auto give_up = now + kPaceWaitMax;
        if (!drained_.wait_until(lock, give_up, [&] { return queued_.load() <= kPaceBacklog / 2; }))
          unpaced_until_ = (give_up + std::chrono::seconds(1)).time_since_epoch().count();
      }
    }
    queued_.fetch_add(1, std::memory_order_relaxed);
  }
  // When that handler runs (or is destroyed unrun).
  void done() {
    if (queued_.fetch_sub(1) == kPaceBacklog / 2 + 1) {
      // Under the waiter's lock, so a sender between its check and its wait cannot miss this.
      const std::lock_guard lock(mu_);
      drained_.notify_all();
    }
  }

 private:
  std::atomic<int> queued_{0};
  std::atomic<std::chrono::steady_clock::rep> unpaced_until_{0};
  std::mutex mu_;
  std::condition_variable drained_;
};

FanoutPace& fanout_pace() {
  static FanoutPace pace;  // one for the process: every server's fan-outs share its I/O time
  return pace;
}

// Counts a posted handler out of the pace when it runs or is dropped.
struct Paced {
  Paced() = default;
  Paced(Paced&& o) noexcept : armed(std::exchange(o.armed, false)) {}
  Paced(const Paced&) = delete;
  Paced& operator=(const Paced&) = delete;
  Paced& operator=(Paced&&) = delete;
  ~Paced() {
    if (armed) fanout_pace().done();
  }
  bool armed = true;
};

// A Socket.IO connection's own queue: the open packet and one "3probe" are all that come there; more is
// a client that sends faster than it reads, and it must not make the agent hold its backlog.
constexpr std::size_t kMaxSioReplies = 4;
// The largest /ws message a client may send (inflated too): its commands are a few hundred bytes at most.
constexpr std::size_t kWsCommandLimit = 4096;
// A permessage-deflate connection writes up to this many waiting messages at once (WsLink's gather write).
constexpr std::size_t kWriteBatch = 8;

class LiveSocket final : public WsClient, public WsConnection, public std::enable_shared_from_this<LiveSocket> {
 public:
  // session null: a /ws client of the hub; else the WebSocket of that Socket.IO session.
  LiveSocket(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream, std::shared_ptr<SioSession> session)
      : srv_(std::move(srv)),
        ws_(std::move(stream)),
        session_(std::move(session)),
        queue_(session_ ? kMaxSioReplies : srv_->opts.ws_queue),
        pending_(!session_) {
    ++srv_->connections;
    if (pending_) ++srv_->ws_pending;
  }
  ~LiveSocket() override {
    settle();
    leave();
    detach();
    --srv_->connections;
  }

  // /ws: the client's period, and the subprotocol to echo.
  void start_hub(http::request<http::empty_body> req, std::optional<std::chrono::milliseconds> period,
                 std::string subprotocol) {
    WsLink::Options o;
    o.idle_timeout = std::chrono::seconds(60);  // a peer that answers no ping for this long is closed
    o.keep_alive_pings = true;
    // A client's commands (request_gpu_update, set_period: docs/websocket.md) are under 1 KiB: a message,
    // on the wire or inflated, is refused (1009) past kWsCommandLimit, so a deflated bomb cannot make the
    // agent inflate much for it.
    o.read_limit = std::min(srv_->opts.ws_message_limit, kWsCommandLimit);
    o.subprotocol = std::move(subprotocol);
    // A peer that sends Close leaves now: its place and its updates are freed at once, not when the
    // closing handshake's TCP teardown ends (up to the handshake timeout when the peer lingers).
    // Weak: the callback may outlive this connection briefly (the link is released on its own executor).
    ws_.on_close_frame([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->leave();
    });
    period_ = period;
    accept(req, std::move(o));
  }

  // Socket.IO. `fresh`: a session opened on this WebSocket (it gets the open packet first); else an upgrade.
  void start_sio(http::request<http::empty_body> req, bool fresh) {
    WsLink::Options o;
    // Engine.IO pings every ping_interval; a peer silent for longer than its deadline is gone.
    o.idle_timeout = srv_->sio->options().ping_interval + srv_->sio->options().ping_timeout;
    o.keep_alive_pings = false;
    o.read_limit = srv_->sio->options().max_payload;
    fresh_ = fresh;
    if (fresh) queue_.push(std::make_shared<const std::string>(session_->open_packet()), false);
    accept(req, std::move(o));
  }

  // WsClient (/ws): called from any thread (the hub's); the work happens on the I/O thread.
  void send(const Message& m) override {
    fanout_pace().before_post(srv_->ioc);
    asio::post(ws_.executor(), [self = shared_from_this(), text = ws_frame(m), droppable = m.droppable(),
                                paced = Paced{}]() mutable { self->deliver(std::move(text), droppable); });
  }

  void force_close() override { abort(); }

  void close_going_away() override {
    // A drain closes Socket.IO sessions through SocketIo::close_all; after the loop, force_close.
    if (session_) return abort();
    if (closing_) return;
    closing_ = true;
    ws_.close(kCloseGoingAway, {}, [self = shared_from_this()](beast::error_code) {});
  }

 private:
  void accept(const http::request<http::empty_body>& req, WsLink::Options o) {
    o.handshake_timeout = std::chrono::seconds(10);
    o.server_header = srv_->opts.server_header;
    ws_.accept(req, o, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

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
      if (session_ && fresh_) session_->close();  // an upgrade's session goes on polling
      return;
    }
    if (!(session_ ? attach() : join())) return;
    ready_ = true;
    pump();
    do_read();
  }

  // /ws: the client joins the hub and gets its greeting first; false when the hub is full.
  bool join() {
    auto joined = srv_->ws->add(weak_from_this(), period_);
    settle();  // after add(): the place passes from the handshake to the client without a gap
    if (!joined) {
      closing_ = true;
      ws_.close(kCloseTryAgainLater, "too many WebSocket clients", [self = shared_from_this()](beast::error_code) {});
      return false;
    }
    id_ = joined->id;
    queue_.push(ws_frame(*joined->greeting), false);
    return true;
  }

  // Socket.IO: the session's transport is now this WebSocket, which it wakes when it has packets.
  bool attach() {
    std::weak_ptr<LiveSocket> weak = weak_from_this();
    auto exec = ws_.executor();
    attached_ = session_->attach_ws([weak, exec, &ioc = srv_->ioc] {
      fanout_pace().before_post(ioc);
      asio::post(exec, [weak, paced = Paced{}] {
        if (auto self = weak.lock()) self->pump();
      });
    });
    if (!attached_) abort();
    return attached_;
  }

  void do_read() {
    // Until a session is connected (and so authorised), a message is a CONNECT at most: a few KiB.
    if (session_) {
      const auto& so = srv_->sio->options();
      ws_.set_read_limit(session_->connected() ? so.max_payload : so.unconnected_payload);
    }
    ws_.read([self = shared_from_this()](beast::error_code ec, std::string text, bool binary) {
      self->on_read(ec, std::move(text), binary);
    });
  }

  void on_read(beast::error_code ec, std::string text, bool binary) {
    if (ec) return abort();
    if (!session_) {
      if (id_)
        if (auto reply = srv_->ws->on_message(*id_, text)) deliver(ws_frame(**reply), false);
      return do_read();
    }
    if (binary) {  // no binary packets: the session ends (docs/socketio.md)
      session_->close();
      return abort();
    }
    if (auto reply = session_->on_packet(text, SioTransport::WebSocket)) {
      deliver(std::make_shared<const std::string>(std::move(*reply)), false);
    } else {
      pump();
    }
    if (!closing_) do_read();
  }

  // A message for this connection's own queue.
  void deliver(Text text, bool droppable) {
    if (closing_ || !ready_) return;
    if (!queue_.push(std::move(text), droppable)) return give_up();  // the client does not read
    pump();
  }

  // Writes what is waiting, one message at a time: this connection's queue first, then the session's;
  // closes once the session has.
  void pump() {
    if (!ready_ || closing_) return;
    if (writing_) {
      // A client that has not taken a message for this long is stalled: it must not hold memory or
      // slow anyone down.
      if (std::chrono::steady_clock::now() - write_started_ > srv_->opts.ws_stall_timeout) give_up();
      return;
    }
    std::optional<Text> next = queue_.pop();
    if (!next && session_) next = session_->take_one();
    if (!next) {
      if (session_ && session_->closed()) {
        closing_ = true;
        ws_.close(kCloseNormal, {}, [self = shared_from_this()](beast::error_code) {});
      }
      return;
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    auto wrote = [self = shared_from_this()](beast::error_code ec) {
      self->writing_ = false;
      if (ec) return self->abort();
      self->pump();
    };
    if (ws_.deflated()) {
      // What else is waiting goes in the same write (one sendmsg): Socket.IO's update and its seed alias.
      std::vector<Text> batch{std::move(*next)};
      while (batch.size() < kWriteBatch) {
        std::optional<Text> more = queue_.pop();
        if (!more && session_) more = session_->take_one();
        if (!more) break;
        batch.push_back(std::move(*more));
      }
      return ws_.write(batch, std::move(wrote));
    }
    ws_.write(std::move(*next), std::move(wrote));
  }

  // A client that does not read: its session ends too.
  void give_up() {
    if (session_) session_->close();
    abort();
  }

  // /ws: the client leaves the hub.
  void leave() {
    if (id_) {
      srv_->ws->remove(*id_);
      id_.reset();
    }
    closing_ = true;
  }

  // Socket.IO: only the WebSocket that attached detaches (another one may have been refused for the
  // same sid).
  void detach() {
    if (!attached_) return;
    attached_ = false;
    session_->detach_ws();
  }

  void abort() {
    leave();
    detach();
    ws_.abort();
  }

  std::shared_ptr<HttpServer::Impl> srv_;
  WsLink ws_;
  std::shared_ptr<SioSession> session_;  // null: a /ws client
  OutboundQueue queue_;
  bool pending_;        // /ws: a handshake holding a place among the hub's clients
  bool fresh_ = false;  // Socket.IO: a session opened on this WebSocket
  bool attached_ = false;
  bool ready_ = false;  // joined the hub, or attached to the session
  bool writing_ = false;
  bool closing_ = false;
  std::chrono::steady_clock::time_point write_started_{};
  std::optional<std::uint64_t> id_;  // /ws: the hub's id for this client
  std::optional<std::chrono::milliseconds> period_;
};

}  // namespace

std::shared_ptr<WsConnection> start_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                               http::request<http::empty_body> req,
                                               std::optional<std::chrono::milliseconds> period,
                                               std::string subprotocol) {
  // Not make_shared: a connection's memory goes back when it ends, not when the last weak_ptr to its
  // control block (the server's list) is pruned.
  auto ws = std::shared_ptr<LiveSocket>(new LiveSocket(std::move(srv), std::move(stream), nullptr));
  ws->start_hub(std::move(req), period, std::move(subprotocol));
  return ws;
}

std::shared_ptr<WsConnection> start_sio_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                                   std::shared_ptr<SioSession> session,
                                                   http::request<http::empty_body> req, bool fresh) {
  auto ws = std::shared_ptr<LiveSocket>(new LiveSocket(std::move(srv), std::move(stream), std::move(session)));
  ws->start_sio(std::move(req), fresh);
  return ws;
}

}  // namespace gf::server
