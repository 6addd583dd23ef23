// WsLink (see ws_link.hpp): the only file that instantiates Beast's WebSocket stream, each operation
// with one handler type; and the permessage-deflate connections' own frames after the handshake.
#include "server/ws_link.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <iterator>
#include <mutex>
#include <span>
#include <vector>

#include "wire/ws_frame.hpp"

namespace gf::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace wsf = wire::ws;
using tcp = asio::ip::tcp;
using Text = std::shared_ptr<const std::string>;

namespace {

// A permessage-deflate connection after the handshake: its socket, a reader of the client's frames, and
// one queue of frames to write (control frames first, between whole messages). Held by its handlers, so
// it outlives every operation on its socket.
class DeflateConn : public std::enable_shared_from_this<DeflateConn> {
 public:
  DeflateConn(tcp::socket socket, const WsLink::Options& o, std::size_t read_limit)
      : sock_(std::move(socket)),
        timer_(sock_.get_executor()),
        reader_(read_limit, true),
        idle_(o.idle_timeout),
        keep_alive_(o.keep_alive_pings) {}

  void start() {
    boost::system::error_code ec;
    sock_.non_blocking(true, ec);
    last_read_ = std::chrono::steady_clock::now();
    arm_timer(idle_ / 2);
    if (ec) abort();  // reads would block the I/O thread: the connection ends (its read fails)
  }
  void set_read_limit(std::size_t bytes) { reader_.set_max_message(bytes); }
  tcp::socket::executor_type executor() { return sock_.get_executor(); }
  std::function<void()> on_close;

  void read(WsLink::Got got) {
    if (ready_.empty() && !in_.empty() && !error_) parse();  // what was left unread
    if (!ready_.empty()) {
      auto e = std::move(ready_.front());
      ready_.pop_front();
      ready_bytes_ -= e.payload.size();
      asio::post(sock_.get_executor(),
                 [got = std::move(got), e = std::move(e)]() mutable { got({}, std::move(e.payload), e.binary); });
      return resume_read();
    }
    if (error_) {
      asio::post(sock_.get_executor(), [got = std::move(got), ec = error_] { got(ec, std::string(), false); });
      return;
    }
    got_ = std::move(got);
    resume_read();
  }

  // Several messages written together (one flush); `done` when the last is.
  void write(const std::vector<Text>& texts, WsLink::Done done) {
    if (!dead_)
      for (std::size_t i = 0; i + 1 < texts.size(); ++i) queue_data(texts[i], nullptr);
    write(texts.back(), std::move(done));
  }

  void write(const Text& text, WsLink::Done done) {
    if (dead_) {
      if (done) asio::post(sock_.get_executor(), [done = std::move(done)] { done(asio::error::operation_aborted); });
      return;
    }
    queue_data(text, std::move(done));
    flush();
  }

  void close(std::uint16_t code, const std::string& reason, WsLink::Done done) {
    queue_close(code, reason.substr(0, 120), std::move(done), false);
  }

  // The owner is gone (the link's destructor). A closing handshake under way goes on alone: reading, and
  // dropping, until the peer's close or end of stream, or the closing timer (a socket closed before the
  // peer's close arrives, with bytes unread, sends a reset, and the peer may lose the close frame and what
  // came before it). Otherwise the socket closes now.
  void release() {
    got_ = nullptr;
    on_close = nullptr;
    ready_.clear();
    ready_bytes_ = 0;
    if (!close_sent_ || dead_ || error_) return abort();
    orphan_ = true;
    resume_read();
  }

  void abort() {
    if (dead_) return;
    dead_ = true;
    // A socket closed with bytes unread sends a reset, and the peer may drop what it has not read yet (the
    // last reply): what has arrived is read and dropped first (a bounded amount).
    boost::system::error_code ignored;
    thread_local std::array<char, 16384> sink;
    for (int i = 0; i < 4 && sock_.read_some(asio::buffer(sink), ignored) == sink.size();) ++i;
    sock_.close(ignored);
    timer_.cancel();
    end_read(asio::error::operation_aborted);
    // What was never written goes (its callbacks hold their owners: released from a handler of its own,
    // not inside the owner's call); a write in flight ends with an error.
    std::deque<Out> unsent;
    for (auto* q : {&control_, &data_}) {
      const auto from = q->begin() + static_cast<std::ptrdiff_t>(writing_ && q == in_flight_ ? in_flight_count_ : 0);
      std::move(from, q->end(), std::back_inserter(unsent));
      q->erase(from, q->end());
    }
    if (!unsent.empty()) asio::post(sock_.get_executor(), [unsent = std::move(unsent)] {});
  }

 private:
  struct Out {
    std::string head;  // a header, or a whole control frame
    Text body;
    WsLink::Done done;
    bool end_read = false;  // after it: the read ends (the peer's close, answered)
    bool pong = false;      // an unsent pong: a newer ping's payload replaces it
  };

  // A message text as a frame: a shared text of kDeflateMin bytes or more goes as its deflated frame, made
  // once for every connection (wire/ws_frame.hpp); anything else (a connection's own reply) uncompressed.
  void queue_data(const Text& text, WsLink::Done done) {
    Out out;
    if (text->size() >= WsLink::kDeflateMin) out.body = wsf::shared_deflated_frame(text);
    if (!out.body) {
      out.head = wsf::frame_header(wsf::Opcode::Text, text->size());
      out.body = text;
    }
    out.done = std::move(done);
    data_.push_back(std::move(out));
  }

  // Whether the owner has enough read ahead: no more reading until it takes some (read() resumes).
  bool read_ahead_full() const noexcept {
    return !ready_.empty() && (ready_.size() >= kMaxReady || ready_bytes_ >= reader_.max_message());
  }

  // Reading goes on: a read attempt is posted (bytes may already wait in the socket, and a wait for
  // readiness sees only new ones), unless one is under way.
  void resume_read() {
    if (waiting_ || dead_ || error_ || !ready_.empty()) return;
    waiting_ = true;
    asio::post(sock_.get_executor(), [self = shared_from_this()] {
      self->waiting_ = false;
      self->on_readable();
    });
  }

  // The socket's next bytes, without a buffer of its own while it waits: ~nothing per idle connection.
  void wait_read() {
    if (waiting_ || dead_ || error_ || !ready_.empty()) return;
    waiting_ = true;
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
      self->waiting_ = false;
      if (ec) return self->end_read(ec);
      self->on_readable();
    });
  }

  // Reads and parses at most kReadsPerWake chunks, then yields to the I/O thread's other handlers (a peer
  // that streams pongs or empty fragments must not hold it); stops while the owner has messages to take.
  void on_readable() {
    if (dead_ || error_ || !ready_.empty()) return;
    thread_local std::array<char, 16384> chunk;
    for (int reads = 0; reads < kReadsPerWake; ++reads) {
      boost::system::error_code ec;
      const std::size_t n = sock_.read_some(asio::buffer(chunk), ec);
      if (ec == asio::error::would_block) {
        if (in_.empty() && in_.capacity() > 1024) in_ = std::string();
        return wait_read();
      }
      if (ec) return end_read(ec);
      last_read_ = std::chrono::steady_clock::now();
      ping_sent_ = false;
      in_.append(chunk.data(), n);
      if (!parse()) return;
      // Messages the owner has not asked for yet: no more reading until it does (read() parses the rest).
      if (!ready_.empty()) return;
      if (in_.size() > reader_.max_frame() + chunk.size()) return protocol_error(1009, "message too big");
    }
    resume_read();
  }

  // The events of the bytes received (consumed by offset, erased once); false when the connection ends.
  bool parse() {
    std::size_t pos = 0;
    const bool more = parse_from(pos);
    in_.erase(0, pos);
    return more;
  }

  bool parse_from(std::size_t& pos) {
    for (;;) {
      if (read_ahead_full()) return true;
      auto e = reader_.next(std::string_view(in_), pos);
      using K = wsf::FrameReader::Kind;
      switch (e.kind) {
        case K::NeedMore: return true;
        case K::Error: protocol_error(e.close_code, e.reason); return false;
        case K::Ping:
          if (!push_pong(e.payload)) return false;
          break;
        case K::Pong: break;
        case K::Close:
          pos = in_.size();  // nothing after a close frame counts
          if (on_close) on_close();
          if (close_sent_) {
            end_read(websocket::error::closed);
            return false;
          }
          queue_close(e.close_code == 1005 ? 1000 : e.close_code, {}, nullptr, true);
          return false;
        case K::Message:
          if (orphan_) break;
          if (got_) {
            asio::post(sock_.get_executor(), [got = std::exchange(got_, nullptr), e = std::move(e)]() mutable {
              got({}, std::move(e.payload), e.binary);
            });
          } else {
            ready_bytes_ += e.payload.size();
            ready_.push_back(std::move(e));
          }
          break;
      }
    }
  }

  void protocol_error(std::uint16_t code, const std::string& reason) {
    error_ = websocket::error::closed;
    queue_close(code, reason, nullptr, true);
  }

  // The read in progress (or the next) ends with `ec`.
  void end_read(boost::system::error_code ec) {
    if (!error_) error_ = ec;
    if (orphan_) return abort();
    if (got_) {
      asio::post(sock_.get_executor(), [got = std::exchange(got_, nullptr), ec] { got(ec, std::string(), false); });
    }
  }

  void push_control(wsf::Opcode op, const std::string& payload) {
    if (close_sent_ || dead_) return;
    // Bounded: one pong, one keep-alive ping and one close at most wait; more is a bug or an abuse.
    if (control_.size() >= kMaxControl) return abort();
    Out out;
    out.head = wsf::frame_header(op, payload.size()) + payload;
    out.pong = op == wsf::Opcode::Pong;
    control_.push_back(std::move(out));
    flush();
  }

  // A ping's answer. RFC 6455 5.5.3: only the latest ping needs one, so a pong not yet sent takes the newer
  // payload instead of queueing another (a peer that pings and never reads holds one pong, not a queue).
  // False when the connection ended.
  bool push_pong(const std::string& payload) {
    const std::size_t first = writing_ && in_flight_ == &control_ ? in_flight_count_ : 0;
    for (std::size_t i = first; i < control_.size(); ++i) {
      if (control_[i].pong) {
        control_[i].head = wsf::frame_header(wsf::Opcode::Pong, payload.size()) + payload;
        return true;
      }
    }
    push_control(wsf::Opcode::Pong, payload);
    return !dead_;
  }

  void queue_close(std::uint16_t code, std::string reason, WsLink::Done done, bool end) {
    if (close_sent_ || dead_) {
      if (done) asio::post(sock_.get_executor(), [done = std::move(done)] { done(websocket::error::closed); });
      if (end) end_read(websocket::error::closed);
      return;
    }
    close_sent_ = true;
    std::string payload{static_cast<char>(code >> 8), static_cast<char>(code & 0xff)};
    payload += reason;
    Out out;
    out.head = wsf::frame_header(wsf::Opcode::Close, payload.size()) + payload;
    out.done = std::move(done);
    out.end_read = end;
    control_.push_back(std::move(out));
    // The peer has this long to answer (or to close) before the socket is closed.
    arm_timer(std::chrono::seconds(5));
    flush();
  }

  // Writes what is queued: a control frame alone, or up to kGather data frames in one gather write (one
  // sendmsg: Socket.IO's update and its seed alias go out together).
  void flush() {
    if (writing_ || dead_) return;
    // Control frames first; after our close frame, no data frame.
    if (control_.empty() && (data_.empty() || close_sent_)) return;
    auto& q = control_.empty() ? data_ : control_;
    writing_ = true;
    in_flight_ = &q;
    in_flight_count_ = &q == &control_ ? 1 : std::min(q.size(), kGather);
    // The buffer list is a member: async_write keeps the span, not the list, and after a partial write (a
    // full socket buffer: a slow client) it goes on from the span.
    std::size_t n = 0;
    for (std::size_t i = 0; i < in_flight_count_; ++i) {
      if (!q[i].head.empty()) bufs_[n++] = asio::buffer(q[i].head);
      if (q[i].body) bufs_[n++] = asio::buffer(*q[i].body);
    }
    asio::async_write(sock_, std::span(bufs_.data(), n),
                      [self = shared_from_this(), &q](boost::system::error_code ec, std::size_t) {
                        // What was written leaves its queue first: abort() (on an error) keeps only what
                        // is in flight while writing_ is set, and the rest is not in flight any more.
                        std::array<Out, kGather> sent;
                        const std::size_t count = self->in_flight_count_;
                        for (std::size_t i = 0; i < count; ++i) {
                          sent[i] = std::move(q.front());
                          q.pop_front();
                        }
                        self->writing_ = false;
                        if (ec) self->abort();
                        for (std::size_t i = 0; i < count; ++i) {
                          Out& out = sent[i];
                          if (out.end_read && !ec) {
                            // The peer's close answered, or ours after its error: no more from this connection.
                            boost::system::error_code ignored;
                            self->sock_.shutdown(tcp::socket::shutdown_send, ignored);
                            self->end_read(websocket::error::closed);
                          }
                          if (out.done) out.done(ec);
                        }
                        self->flush();
                      });
  }

  // Idle: a peer silent for idle_ is closed; with keep-alive pings, one silent for half of it is pinged.
  void arm_timer(std::chrono::steady_clock::duration after) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->dead_) return;
      if (self->close_sent_) return self->abort();  // the closing handshake's time is over
      const auto silent = std::chrono::steady_clock::now() - self->last_read_;
      if (silent >= self->idle_) return self->abort();
      if (self->keep_alive_ && silent >= self->idle_ / 2 && !self->ping_sent_) {
        self->ping_sent_ = true;
        self->push_control(wsf::Opcode::Ping, {});
      }
      self->arm_timer(self->idle_ / 2);
    });
  }

  tcp::socket sock_;
  asio::steady_timer timer_;
  wsf::FrameReader reader_;
  std::chrono::steady_clock::duration idle_;
  bool keep_alive_;
  std::string in_;  // received bytes of an incomplete frame
  std::deque<wsf::FrameReader::Event> ready_;
  std::size_t ready_bytes_ = 0;  // their payloads' bytes
  WsLink::Got got_;
  boost::system::error_code error_;
  std::deque<Out> control_, data_;
  std::deque<Out>* in_flight_ = nullptr;  // the queue whose front is being written
  std::size_t in_flight_count_ = 0;       // ... and how many of its first items
  static constexpr std::size_t kGather = 8;
  std::array<asio::const_buffer, 2 * kGather> bufs_{};  // the write's buffers, while it lasts
  static constexpr std::size_t kMaxReady = 16;          // messages read ahead of the owner (and max_message bytes)
  static constexpr std::size_t kMaxControl = 4;         // control frames waiting to be written
  static constexpr int kReadsPerWake = 4;               // 64 KiB read and parsed per turn on the I/O thread
  std::chrono::steady_clock::time_point last_read_{};
  bool waiting_ = false, writing_ = false, close_sent_ = false, ping_sent_ = false, dead_ = false;
  bool orphan_ = false;  // released by its owner during the closing handshake
};

}  // namespace

struct WsLink::Impl {
  explicit Impl(beast::tcp_stream&& stream) : ws(std::move(stream)) {}
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer rbuf;
  std::function<void()> on_close;
  std::size_t read_limit = 4096;
  std::shared_ptr<DeflateConn> own;  // set once a deflate handshake is over: Beast's stream is then idle
};

WsLink::WsLink(beast::tcp_stream&& stream) : impl_(std::make_unique<Impl>(std::move(stream))) {}

WsLink::~WsLink() {
  // The link may die on another thread (a hub thread held its owner last): the connection is released on
  // its own executor, where its handlers and timer run.
  if (!impl_->own) return;
  auto exec = impl_->own->executor();
  asio::post(exec, [own = std::move(impl_->own)] { own->release(); });
}

void WsLink::accept(const http::request<http::empty_body>& req, const Options& options, Done done) {
  auto& ws = impl_->ws;
  beast::get_lowest_layer(ws).expires_never();  // the WebSocket stream keeps its own timeouts
  websocket::stream_base::timeout t{};
  t.handshake_timeout = options.handshake_timeout;
  t.idle_timeout = options.idle_timeout;
  t.keep_alive_pings = options.keep_alive_pings;
  ws.set_option(t);
  ws.read_message_max(options.read_limit);
  impl_->read_limit = options.read_limit;
  // One frame per message, written in one go: Beast's default cuts a message into frames of its write
  // buffer's size (4 KiB), each a write of its own: an update (~17 KiB for 8 GPUs) was five sendmsg
  // calls per client instead of one (issue 24: 10 000 clients).
  ws.auto_fragment(false);
  std::optional<std::string> deflate;
  if (options.offer_deflate) {
    std::string offers;
    for (auto [it, end] = req.equal_range(http::field::sec_websocket_extensions); it != end; ++it) {
      if (!offers.empty()) offers += ", ";
      offers.append(it->value().data(), it->value().size());
    }
    deflate = wsf::negotiate_deflate(offers);
  }
  ws.set_option(websocket::stream_base::decorator(
      [server = options.server_header, subprotocol = options.subprotocol, deflate](websocket::response_type& res) {
        res.set(http::field::server, server);
        if (!subprotocol.empty()) res.set(http::field::sec_websocket_protocol, subprotocol);
        if (deflate && res.result() == http::status::switching_protocols)
          res.set(http::field::sec_websocket_extensions, *deflate);
      }));
  if (!deflate) return ws.async_accept(req, std::move(done));
  ws.async_accept(req, [impl = impl_.get(), options, done = std::move(done)](beast::error_code ec) {
    if (!ec) {
      // The takeover: Beast's stream keeps a closed socket and runs no operation again.
      impl->own = std::make_shared<DeflateConn>(std::move(beast::get_lowest_layer(impl->ws).socket()), options,
                                                impl->read_limit);
      impl->own->on_close = impl->on_close;
      impl->own->start();
    }
    done(ec);
  });
}

bool WsLink::deflated() const noexcept { return impl_->own != nullptr; }

void WsLink::on_close_frame(std::function<void()> callback) {
  impl_->on_close = std::move(callback);
  if (impl_->own) impl_->own->on_close = impl_->on_close;
  impl_->ws.control_callback([impl = impl_.get()](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::close && impl->on_close) impl->on_close();
  });
}

void WsLink::set_read_limit(std::size_t bytes) {
  impl_->read_limit = bytes;
  if (impl_->own) return impl_->own->set_read_limit(bytes);
  impl_->ws.read_message_max(bytes);
}

void WsLink::read(Got got) {
  if (impl_->own) return impl_->own->read(std::move(got));
  impl_->ws.async_read(impl_->rbuf, [impl = impl_.get(), got = std::move(got)](beast::error_code ec, std::size_t) {
    // The link outlives its operations: its owner holds itself alive in `got` until it runs.
    if (ec) return got(ec, std::string(), false);
    std::string message = beast::buffers_to_string(impl->rbuf.data());
    impl->rbuf.consume(impl->rbuf.size());
    got(ec, std::move(message), impl->ws.got_binary());
  });
}

void WsLink::write(std::shared_ptr<const std::string> text, Done done) {
  if (impl_->own) return impl_->own->write(text, std::move(done));
  impl_->ws.text(true);
  const auto buffer = boost::asio::buffer(*text);
  impl_->ws.async_write(
      buffer, [text = std::move(text), done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
}

void WsLink::write(const std::vector<std::shared_ptr<const std::string>>& texts, Done done) {
  if (impl_->own) return impl_->own->write(texts, std::move(done));
  // Beast writes one message at a time: the first now, the rest after it.
  if (texts.size() == 1) return write(texts.front(), std::move(done));
  auto rest = std::vector<std::shared_ptr<const std::string>>(texts.begin() + 1, texts.end());
  write(texts.front(), [this, rest = std::move(rest), done = std::move(done)](beast::error_code ec) mutable {
    if (ec) return done(ec);
    write(rest, std::move(done));
  });
}

void WsLink::close(std::uint16_t code, std::string reason, Done done) {
  if (impl_->own) return impl_->own->close(code, reason, std::move(done));
  impl_->ws.async_close(websocket::close_reason(static_cast<websocket::close_code>(code), reason), std::move(done));
}

void WsLink::abort() {
  if (impl_->own) return impl_->own->abort();
  beast::error_code ignored;
  beast::get_lowest_layer(impl_->ws).socket().close(ignored);
}

beast::tcp_stream::executor_type WsLink::executor() { return impl_->ws.get_executor(); }

}  // namespace gf::server
