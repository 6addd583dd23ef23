// The load generator's clients (see live_load.hpp): /ws and Socket.IO over WebSocket on Beast's WebSocket
// client, Socket.IO on long-polling on Beast's HTTP client, and the gpu-metrics latency probe.
// With --deflate a WebSocket client offers permessage-deflate (client_no_context_takeover) in Beast's
// handshake and, when the agent accepts, reads the frames itself: each message is inflated only as far as
// its first 200 bytes (the event's name; every message is deflated on its own, server_no_context_takeover),
// so that 10 000 clients' load costs the machine little; the bytes counted are the compressed ones. Its
// own messages go out masked and uncompressed (RSV1 clear), which the extension allows.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <zlib.h>
#include <cstring>
#include <deque>
#include <thread>

#include "live_load.hpp"

namespace gf::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

std::string_view sio_event_name(std::string_view p) {
  if (p.size() < 5 || p.substr(0, 4) != "42[\"") return {};
  p.remove_prefix(4);
  return p.substr(0, p.find('"'));
}

std::uint64_t tcp_bytes_received(int fd) {
  if (fd < 0) return 0;
  // glibc's struct tcp_info stops at tcpi_total_retrans; the kernel's goes on with pacing_rate,
  // max_pacing_rate, bytes_acked and bytes_received (u64 each, from byte 104).
  constexpr std::size_t kBytesReceived = 128;
  alignas(8) unsigned char info[256] = {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, info, &len) != 0 || len < kBytesReceived + 8) return 0;
  std::uint64_t n = 0;
  std::memcpy(&n, info + kBytesReceived, sizeof n);
  return n;
}

namespace {

std::chrono::steady_clock::duration secs(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// /ws (JSON messages {"event":…}) or Socket.IO over WebSocket (Engine.IO packets).
class WsClient final : public LoadClient, public std::enable_shared_from_this<WsClient> {
 public:
  WsClient(asio::io_context& ioc, const Options& opt, const tcp::resolver::results_type& endpoints, Shared& shared,
           Settled s, bool sio)
      : LoadClient(opt, shared, std::move(s)), ws_(asio::make_strand(ioc)), endpoints_(endpoints), sio_(sio) {}

  void start() override {
    beast::get_lowest_layer(ws_).expires_after(secs(opt_.connect_timeout_s));
    beast::get_lowest_layer(ws_).async_connect(endpoints_, [self = shared_from_this()](beast::error_code ec, auto) {
      if (ec) return self->fail("connect: " + ec.message());
      self->handshake();
    });
  }

  std::uint64_t wire_bytes() const override {
    return tcp_bytes_received(const_cast<WsClient*>(this)->ws_.next_layer().socket().native_handle());
  }

  void close() override {
    asio::post(ws_.get_executor(), [self = shared_from_this()] {
      if (!self->open_) return;
      self->closing_ = true;
      if (self->raw_) {
        beast::error_code ignored;
        beast::get_lowest_layer(self->ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
        return beast::get_lowest_layer(self->ws_).close();
      }
      beast::get_lowest_layer(self->ws_).expires_after(std::chrono::seconds(2));
      self->ws_.async_close(websocket::close_code::normal, [self](beast::error_code) {});
    });
  }

 private:
  void handshake() {
    beast::get_lowest_layer(ws_).socket().set_option(tcp::no_delay(true));
    if (opt_.deflate) return raw_handshake();
    ws_.async_handshake(opt_.host + ":" + opt_.port, opt_.target, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("handshake: " + ec.message());
      beast::get_lowest_layer(self->ws_).expires_never();
      self->ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
      self->open_ = true;
      if (!self->sio_) self->on_connected();  // Socket.IO: once the CONNECT is answered
      self->read();
    });
  }

  // --deflate: the handshake by hand (Beast's reads past the response, and the frames after it would stay
  // in its buffer), offering permessage-deflate with client_no_context_takeover.
  void raw_handshake() {
    hs_ =
        "GET " + opt_.target + " HTTP/1.1\r\nHost: " + opt_.host + ":" + opt_.port +
        "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover\r\n\r\n";
    auto& stream = beast::get_lowest_layer(ws_);
    asio::async_write(stream, asio::buffer(hs_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->fail("handshake write: " + ec.message());
      self->hs_.clear();
      asio::async_read_until(beast::get_lowest_layer(self->ws_), asio::dynamic_buffer(self->hs_), "\r\n\r\n",
                             [self](beast::error_code ec, std::size_t n) {
                               if (ec) return self->fail("handshake read: " + ec.message());
                               const std::string head = self->hs_.substr(0, n);
                               if (head.rfind("HTTP/1.1 101", 0) != 0)
                                 return self->fail("handshake: " + head.substr(0, 40));
                               if (head.find("permessage-deflate") == std::string::npos)
                                 return self->fail("handshake: permessage-deflate not accepted");
                               const std::string rest = self->hs_.substr(n);
                               asio::buffer_copy(self->buffer_.prepare(rest.size()), asio::buffer(rest));
                               self->buffer_.commit(rest.size());
                               self->hs_ = std::string();
                               beast::get_lowest_layer(self->ws_).expires_never();
                               self->open_ = self->raw_ = true;
                               if (!self->sio_) self->on_connected();
                               if (!self->parse_raw()) return;
                               self->read_raw();
                             });
    });
  }

  void read() {
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) {
        self->open_ = false;
        if (self->closing_) return;
        std::string what = ec.message();
        if (ec == websocket::error::closed) {
          const auto& r = self->ws_.reason();
          what += " (close code " + std::to_string(r.code) +
                  (r.reason.empty() ? "" : ", \"" + std::string(r.reason.data(), r.reason.size()) + "\"") + ")";
        }
        if (self->connected())
          self->lost(what);
        else
          self->fail("before connecting: " + what);
        return;
      }
      const auto data = self->buffer_.cdata();
      self->on_message(std::string_view(static_cast<const char*>(data.data()), data.size()), n);
      self->buffer_.consume(self->buffer_.size());
      self->read();
    });
  }

  void on_message(std::string_view m, std::size_t n) {
    if (!sio_) {
      std::string_view event = "?";
      const auto head = m.substr(0, 200);
      if (const auto k = head.find(R"("event":")"); k != std::string_view::npos) {
        event = head.substr(k + 9);
        event = event.substr(0, event.find('"'));
      }
      return record(event, n);
    }
    if (m.empty()) return;
    switch (m[0]) {
      case '0':  // Engine.IO open: the Socket.IO CONNECT
        return send("40");
      case '2':  // ping
        return send("3");
      case '4':
        if (m.substr(0, 2) == "40") {
          if (!connected()) on_connected();
          return;
        }
        if (auto e = sio_event_name(m); !e.empty()) return record(e, n);
        return record("?", n);
      default: return;
    }
  }

  void send(std::string text, int opcode = 1) {
    out_.push_back(raw_ ? masked_frame(opcode, text) : std::move(text));
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty() || !open_) return;
    writing_ = true;
    if (raw_) {
      return asio::async_write(beast::get_lowest_layer(ws_), asio::buffer(out_.front()),
                               [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 self->writing_ = false;
                                 self->out_.pop_front();
                                 if (!ec) self->write_next();
                               });
    }
    ws_.text(true);
    ws_.async_write(asio::buffer(out_.front()), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->out_.pop_front();
      if (!ec) self->write_next();
    });
  }

  // --deflate, accepted: the frames as they come (see the file's comment).
  void read_raw() {
    auto& stream = beast::get_lowest_layer(ws_);
    stream.async_read_some(buffer_.prepare(65536), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      if (ec) {
        self->open_ = false;
        if (self->closing_) return;
        return self->lost(ec.message());
      }
      self->buffer_.commit(n);
      if (!self->parse_raw()) return;
      self->read_raw();
    });
  }

  // The whole frames in buffer_; false when the agent closed.
  bool parse_raw() {
    for (;;) {
      const auto data = buffer_.cdata();
      const auto* b = static_cast<const unsigned char*>(data.data());
      const std::size_t size = data.size();
      if (size < 2) return true;
      std::size_t header = 2;
      std::uint64_t len = b[1] & 0x7f;
      if (len == 126) {
        if (size < 4) return true;
        len = (std::uint64_t{b[2]} << 8) | b[3];
        header = 4;
      } else if (len == 127) {
        if (size < 10) return true;
        len = 0;
        for (int i = 2; i < 10; ++i) len = (len << 8) | b[i];
        header = 10;
      }
      if (size < header + len) return true;
      const std::string_view payload(reinterpret_cast<const char*>(b + header), static_cast<std::size_t>(len));
      const int op = b[0] & 0x0f;
      const bool compressed = (b[0] & 0x40) != 0;
      if (op == 8) {
        open_ = false;
        if (!closing_) lost("closed by the agent");
        return false;
      }
      if (op == 9) {
        send(std::string(payload), 10);  // the pong
      } else if (op == 1) {
        if (compressed) {
          on_message(inflate_head(payload), payload.size());
        } else {
          on_message(payload, payload.size());
        }
      }
      buffer_.consume(header + static_cast<std::size_t>(len));
    }
  }

  // A masked frame (the key need not be secret here), uncompressed.
  static std::string masked_frame(int opcode, const std::string& text) {
    std::string frame{static_cast<char>(0x80 | opcode)};
    if (text.size() < 126) {
      frame += static_cast<char>(0x80 | text.size());
    } else {
      frame += static_cast<char>(0x80 | 126);
      frame += static_cast<char>((text.size() >> 8) & 0xff);
      frame += static_cast<char>(text.size() & 0xff);
    }
    const char key[4] = {0x1b, 0x2c, 0x3d, 0x4e};
    frame.append(key, 4);
    for (std::size_t i = 0; i < text.size(); ++i) frame += static_cast<char>(text[i] ^ key[i % 4]);
    return frame;
  }

  // The first 200 bytes of a compressed message (enough for its event's name).
  static std::string inflate_head(std::string_view payload) {
    struct Z {
      Z() { inflateInit2(&z, -15); }
      ~Z() { inflateEnd(&z); }
      z_stream z{};
    };
    thread_local Z zs;
    inflateReset(&zs.z);
    std::string out(200, '\0');
    zs.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(payload.data()));
    zs.z.avail_in = static_cast<uInt>(payload.size());
    zs.z.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.z.avail_out = static_cast<uInt>(out.size());
    inflate(&zs.z, Z_SYNC_FLUSH);
    out.resize(out.size() - zs.z.avail_out);
    return out;
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::string hs_;  // --deflate: the handshake's request, then its response
  bool raw_ = false;
  const tcp::resolver::results_type& endpoints_;
  const bool sio_;
  beast::flat_buffer buffer_;
  std::deque<std::string> out_;
  bool open_ = false, closing_ = false, writing_ = false;
};

// Socket.IO on long-polling: one keep-alive connection, one request at a time (GET, or the POST of a
// pong or the CONNECT between two GETs), as a browser's polling transport does.
class PollingClient final : public LoadClient, public std::enable_shared_from_this<PollingClient> {
 public:
  PollingClient(asio::io_context& ioc, const Options& opt, const tcp::resolver::results_type& endpoints, Shared& shared,
                Settled s)
      : LoadClient(opt, shared, std::move(s)), stream_(asio::make_strand(ioc)), endpoints_(endpoints) {}

  void start() override {
    stream_.expires_after(secs(opt_.connect_timeout_s));
    stream_.async_connect(endpoints_, [self = shared_from_this()](beast::error_code ec, auto) {
      if (ec) return self->fail("connect: " + ec.message());
      self->stream_.socket().set_option(tcp::no_delay(true));
      self->request(http::verb::get, "");
    });
  }

  std::uint64_t wire_bytes() const override {
    return tcp_bytes_received(const_cast<PollingClient*>(this)->stream_.socket().native_handle());
  }

  void close() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
      self->stream_.close();
    });
  }

 private:
  void request(http::verb verb, std::string body) {
    req_ = {};
    req_.method(verb);
    req_.version(11);
    req_.target(sid_.empty() ? opt_.target : opt_.target + "&sid=" + sid_);
    req_.set(http::field::host, opt_.host + ":" + opt_.port);
    if (verb == http::verb::post) req_.set(http::field::content_type, "text/plain;charset=UTF-8");
    req_.body() = std::move(body);
    req_.prepare_payload();
    // A GET may wait up to the ping interval (25 s) for something to send.
    stream_.expires_after(std::chrono::seconds(60));
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->broken("write: " + ec.message());
      self->res_ = {};
      http::async_read(self->stream_, self->buffer_, self->res_, [self](beast::error_code ec, std::size_t n) {
        if (ec) return self->broken("read: " + ec.message());
        self->on_response(n);
      });
    });
  }

  void broken(const std::string& what) {
    if (closing_) return;
    if (connected())
      lost(what);
    else
      fail("before connecting: " + what);
  }

  void on_response(std::size_t n) {
    if (res_.result() != http::status::ok)
      return broken("HTTP " + std::to_string(res_.result_int()) + ": " + res_.body().substr(0, 120));
    if (req_.method() == http::verb::post) return next();
    const std::string& body = res_.body();
    std::size_t start = 0;
    while (start <= body.size()) {
      auto end = body.find('\x1e', start);
      if (end == std::string::npos) end = body.size();
      on_packet(std::string_view(body).substr(start, end - start), n);
      start = end + 1;
    }
    next();
  }

  void on_packet(std::string_view p, std::size_t n) {
    if (p.empty()) return;
    switch (p[0]) {
      case '0':
        if (auto k = p.find(R"("sid":")"); k != std::string_view::npos) {
          sid_ = std::string(p.substr(k + 7, p.find('"', k + 7) - k - 7));
          pending_post_ = "40";
        }
        return;
      case '1': return broken("the server closed the session");
      case '2': pending_post_ = "3"; return;
      case '4':
        if (p.substr(0, 2) == "40") {
          if (!connected()) on_connected();
          return;
        }
        if (auto e = sio_event_name(p); !e.empty()) return record(e, n);
        return record("?", n);
      default: return;
    }
  }

  void next() {
    if (closing_) return;
    if (!pending_post_.empty()) return request(http::verb::post, std::exchange(pending_post_, {}));
    request(http::verb::get, "");
  }

  beast::tcp_stream stream_;
  const tcp::resolver::results_type& endpoints_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
  std::string sid_, pending_post_;
  bool closing_ = false;
};

}  // namespace

std::shared_ptr<LoadClient> make_ws_client(asio::io_context& ioc, const Options& opt,
                                           const tcp::resolver::results_type& endpoints, Shared& shared, Settled s) {
  return std::make_shared<WsClient>(ioc, opt, endpoints, shared, std::move(s), false);
}

std::shared_ptr<LoadClient> make_sio_ws_client(asio::io_context& ioc, const Options& opt,
                                               const tcp::resolver::results_type& endpoints, Shared& shared,
                                               Settled s) {
  return std::make_shared<WsClient>(ioc, opt, endpoints, shared, std::move(s), true);
}

std::shared_ptr<LoadClient> make_sio_polling_client(asio::io_context& ioc, const Options& opt,
                                                    const tcp::resolver::results_type& endpoints, Shared& shared,
                                                    Settled s) {
  return std::make_shared<PollingClient>(ioc, opt, endpoints, shared, std::move(s));
}

std::vector<double> probe_latencies(const Options& opt, const std::atomic<bool>& stop) {
  std::vector<double> out;
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  bool open = false;
  http::request<http::empty_body> req{http::verb::get, opt.probe_target, 11};
  req.set(http::field::host, opt.host + ":" + opt.port);
  auto next = Clock::now();
  while (!stop) {
    next += std::chrono::milliseconds(opt.probe_interval_ms);
    beast::error_code ec;
    const auto t0 = Clock::now();
    if (!open) {
      stream.connect(resolver.resolve(opt.host, opt.port), ec);
      open = !ec;
    }
    http::response<http::string_body> res;
    if (open) http::write(stream, req, ec);
    if (open && !ec) http::read(stream, buffer, res, ec);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const bool ok = open && !ec && res.result() == http::status::ok && !res.body().empty();
    out.push_back(ok ? ms : -1);
    if (!ok || !res.keep_alive()) {
      stream.close();
      open = false;
    }
    std::this_thread::sleep_until(next);
  }
  return out;
}

}  // namespace gf::bench
