#pragma once
// WsLink: one server-side WebSocket over an accepted TCP stream, for the Beast transport's two kinds of
// WebSocket connection (/ws and Socket.IO, server/websocket.cpp). Beast's WebSocket stream sits behind
// plain callbacks, so its composed operations (handshake, read, write, close, pings) are instantiated
// once, in ws_link.cpp, instead of once per connection class and handler: Beast's WebSocket is the
// slowest code in gpufleet to compile. Internal to the Beast transport (see beast_server.hpp).
// A connection that negotiates permessage-deflate is Beast's for the handshake only: then the link takes
// its socket and runs the frames itself (wire/ws_frame.hpp), so that one deflated frame, made once per
// message, goes out on every such connection (Beast compresses per connection and cannot send a frame
// made beforehand). Its writes are serialised in one queue: a pong, a keep-alive ping or a close frame goes
// between two whole messages, never inside one (Beast's read op answers pings by itself, so its stream and
// our own writes on one socket could interleave: hence no Beast operation at all after the takeover).
// Thread-safety: like the stream, use one link from its executor's thread only.
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gf::server {

class WsLink {
 public:
  using Done = std::function<void(boost::beast::error_code)>;
  // A whole message: its text (or bytes), and whether it came in binary frames.
  using Got = std::function<void(boost::beast::error_code, std::string message, bool binary)>;

  struct Options {
    std::chrono::steady_clock::duration handshake_timeout = std::chrono::seconds(10);
    // A peer silent this long is closed (with keep_alive_pings: one that answers no ping).
    std::chrono::steady_clock::duration idle_timeout = std::chrono::seconds(60);
    bool keep_alive_pings = false;
    std::size_t read_limit = 4096;  // bytes per message; set_read_limit changes it later
    std::string server_header;      // the handshake response's Server
    std::string subprotocol;        // echoed in Sec-WebSocket-Protocol when not empty
    // Accept permessage-deflate when the client offers it (wire/ws_frame.hpp): each message of at least
    // kDeflateMin bytes is then deflated once for every connection that negotiated it.
    bool offer_deflate = true;
  };
  // Smaller messages go uncompressed (RSV1 clear) even on a deflate connection.
  static constexpr std::size_t kDeflateMin = 256;

  explicit WsLink(boost::beast::tcp_stream&& stream);
  ~WsLink();
  WsLink(const WsLink&) = delete;
  WsLink& operator=(const WsLink&) = delete;

  // The server side of the handshake for the upgrade request `req`.
  void accept(const boost::beast::http::request<boost::beast::http::empty_body>& req, const Options& options,
              Done done);
  // Called when a Close frame arrives, before the read that sees it ends: the peer is leaving.
  void on_close_frame(std::function<void()> callback);
  void set_read_limit(std::size_t bytes);
  // Whether the handshake negotiated permessage-deflate (after accept's done).
  bool deflated() const noexcept;
  // One message; at most one read at a time.
  void read(Got got);
  // One text message; at most one write at a time. `text` stays alive until `done` runs.
  void write(std::shared_ptr<const std::string> text, Done done);
  // Several text messages (not empty), in order; `done` once the last is written. On a deflate connection
  // they go out in one gather write.
  void write(const std::vector<std::shared_ptr<const std::string>>& texts, Done done);
  // The closing handshake with `code` (RFC 6455's numbers) and an optional reason.
  void close(std::uint16_t code, std::string reason, Done done);
  // Closes the socket now: pending operations end with an error.
  void abort();
  boost::beast::tcp_stream::executor_type executor();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::server
