// The load generator's clients (see live_load.hpp): /ws and Socket.IO over WebSocket on Beast's WebSocket
// client (permessage-deflate when asked), Socket.IO on long-polling on Beast's HTTP client, and the
// gpu-metrics latency probe.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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
      beast::get_lowest_layer(self->ws_).expires_after(std::chrono::seconds(2));
      self->ws_.async_close(websocket::close_code::normal, [self](beast::error_code) {});
    });
  }

 private:
  void handshake() {
    beast::get_lowest_layer(ws_).socket().set_option(tcp::no_delay(true));
    if (opt_.deflate) {
      websocket::permessage_deflate pmd;
      pmd.client_enable = true;
      pmd.client_no_context_takeover = true;
      ws_.set_option(pmd);
    }
    ws_.async_handshake(opt_.host + ":" + opt_.port, opt_.target, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("handshake: " + ec.message());
      beast::get_lowest_layer(self->ws_).expires_never();
      self->ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
      self->open_ = true;
      if (!self->sio_) self->on_connected();  // Socket.IO: once the CONNECT is answered
      self->read();
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

  void send(std::string text) {
    out_.push_back(std::move(text));
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty() || !open_) return;
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(out_.front()), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->out_.pop_front();
      if (!ec) self->write_next();
    });
  }

  websocket::stream<beast::tcp_stream> ws_;
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
