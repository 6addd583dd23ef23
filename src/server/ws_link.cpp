// WsLink (see ws_link.hpp): the only file that instantiates Beast's WebSocket stream, each operation
// with one handler type.
#include "server/ws_link.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>

namespace gf::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

struct WsLink::Impl {
  explicit Impl(beast::tcp_stream&& stream) : ws(std::move(stream)) {}
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer rbuf;
  std::function<void()> on_close;
};

WsLink::WsLink(beast::tcp_stream&& stream) : impl_(std::make_unique<Impl>(std::move(stream))) {}

WsLink::~WsLink() = default;

void WsLink::accept(const http::request<http::empty_body>& req, const Options& options, Done done) {
  auto& ws = impl_->ws;
  beast::get_lowest_layer(ws).expires_never();  // the WebSocket stream keeps its own timeouts
  websocket::stream_base::timeout t{};
  t.handshake_timeout = options.handshake_timeout;
  t.idle_timeout = options.idle_timeout;
  t.keep_alive_pings = options.keep_alive_pings;
  ws.set_option(t);
  ws.read_message_max(options.read_limit);
  // One frame per message, written in one go: Beast's default cuts a message into frames of its write
  // buffer's size (4 KiB), each a write of its own: an update (~17 KiB for 8 GPUs) was five sendmsg
  // calls per client instead of one (issue 24: 10 000 clients).
  ws.auto_fragment(false);
  ws.set_option(websocket::stream_base::decorator(
      [server = options.server_header, subprotocol = options.subprotocol](websocket::response_type& res) {
        res.set(http::field::server, server);
        if (!subprotocol.empty()) res.set(http::field::sec_websocket_protocol, subprotocol);
      }));
  ws.async_accept(req, std::move(done));
}

void WsLink::on_close_frame(std::function<void()> callback) {
  impl_->on_close = std::move(callback);
  impl_->ws.control_callback([impl = impl_.get()](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::close && impl->on_close) impl->on_close();
  });
}

void WsLink::set_read_limit(std::size_t bytes) { impl_->ws.read_message_max(bytes); }

void WsLink::read(Got got) {
  impl_->ws.async_read(impl_->rbuf, [impl = impl_.get(), got = std::move(got)](beast::error_code ec, std::size_t) {
    // The link outlives its operations: its owner holds itself alive in `got` until it runs.
    if (ec) return got(ec, std::string(), false);
    std::string message = beast::buffers_to_string(impl->rbuf.data());
    impl->rbuf.consume(impl->rbuf.size());
    got(ec, std::move(message), impl->ws.got_binary());
  });
}

void WsLink::write(std::shared_ptr<const std::string> text, Done done) {
  impl_->ws.text(true);
  const auto buffer = boost::asio::buffer(*text);
  impl_->ws.async_write(
      buffer, [text = std::move(text), done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
}

void WsLink::close(std::uint16_t code, std::string reason, Done done) {
  impl_->ws.async_close(websocket::close_reason(static_cast<websocket::close_code>(code), reason), std::move(done));
}

void WsLink::abort() {
  beast::error_code ignored;
  beast::get_lowest_layer(impl_->ws).socket().close(ignored);
}

beast::tcp_stream::executor_type WsLink::executor() { return impl_->ws.get_executor(); }

}  // namespace gf::server
