#pragma once
// WebSocket frames (RFC 6455) with permessage-deflate (RFC 7692), for the connections that negotiate it:
// the agent's fan-out sends one message to thousands of clients, so it deflates each message once and
// sends the same frame bytes on every connection. That needs both no-context-takeover parameters: a
// message is deflated on its own (no window shared with the previous ones), and so is every message a
// client sends (the agent keeps no inflate window per connection). Beast's own permessage-deflate keeps a
// compressor per connection and cannot send a frame compressed beforehand, hence this codec: the
// negotiation, the server's frames, and a strict reader of a client's frames (outside input: masks,
// sizes, control frames, inflation bounded by the message limit). Pure: no sockets.
// Thread-safety: free functions are; a FrameReader belongs to one connection.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gf::wire::ws {

enum class Opcode : std::uint8_t { Continuation = 0, Text = 1, Binary = 2, Close = 8, Ping = 9, Pong = 10 };

// The response's Sec-WebSocket-Extensions value for a request's (all its header lines joined by ", "):
// permessage-deflate with server_no_context_takeover and client_no_context_takeover for the first offer
// this codec can honour, nullopt for none (the connection then runs without extensions). An offer that
// limits the server's window below 15 bits, repeats or misspells a parameter is declined.
std::optional<std::string> negotiate_deflate(std::string_view offers);

// A server frame's header (FIN set, unmasked) for a payload of `size` bytes; `compressed` sets RSV1.
std::string frame_header(Opcode op, std::size_t size, bool compressed = false);
// `text` deflated as one permessage-deflate message (raw deflate, sync flush, the final 00 00 ff ff removed).
std::string deflate_message(std::string_view text, int level = 6);
// A whole server text frame: header with RSV1 and `text` deflated.
std::string deflated_text_frame(std::string_view text, int level = 6);
// What a peer inflates from one message's payload; nullopt on bad data or more than `max_size` bytes.
std::optional<std::string> inflate_message(std::string_view payload, std::size_t max_size);

// A message text that many connections may send (a broadcast, or any message a transport framed): its
// deflated frame is made once, by the first deflate connection that sends it, and kept with it (not in a
// cache others could evict). Any thread.
std::shared_ptr<const std::string> shared_text(std::string text);
// The deflated text frame of `text`, made on the first call (call_once) and shared by every later one;
// null when `text` was not made by shared_text() (a connection's own reply: sent uncompressed).
std::shared_ptr<const std::string> shared_deflated_frame(const std::shared_ptr<const std::string>& text);

// Reads a client's frames from the bytes the connection received, one event at a time.
class FrameReader {
 public:
  enum class Kind : std::uint8_t { NeedMore, Message, Ping, Pong, Close, Error };
  struct Event {
    Kind kind = Kind::NeedMore;
    std::string payload;           // Message: the whole (inflated) message; Ping/Pong/Close: the frame's payload
    bool binary = false;           // Message: came as binary
    std::uint16_t close_code = 0;  // Close: the peer's code (1005: none); Error: the code to close with
    std::string reason;            // Error: why, for the close frame
  };

  // `max_message`: the largest message, before and after inflation; `deflate`: RSV1 allowed.
  FrameReader(std::size_t max_message, bool deflate) : max_message_(max_message), deflate_(deflate) {}
  void set_max_message(std::size_t bytes) { max_message_ = bytes; }
  std::size_t max_message() const noexcept { return max_message_; }
  // The largest frame (header and payload) next() may need in `in` to make progress.
  std::size_t max_frame() const noexcept { return max_message_ + 14; }

  // The next event from `in` at `pos`, advancing `pos` past the bytes it used (a connection consumes a
  // whole read's frames by offset and erases them once). NeedMore: a frame is incomplete (the fragments
  // of a message before it are consumed). After an Error the connection must close with event.close_code.
  Event next(std::string_view in, std::size_t& pos);
  // The same from the front of `in`, erasing what it used.
  Event next(std::string& in) {
    std::size_t pos = 0;
    Event e = next(std::string_view(in), pos);
    in.erase(0, pos);
    return e;
  }

 private:
  Event fail(std::uint16_t code, std::string reason);
  std::size_t max_message_;
  bool deflate_;
  bool in_message_ = false;  // a fragmented message has begun
  bool compressed_ = false;  // ... with RSV1
  bool binary_ = false;
  bool failed_ = false;
  std::string message_;  // its fragments so far (compressed when compressed_)
};

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace gf::wire::ws
