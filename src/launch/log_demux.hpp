#pragma once
// Turns the body of GET /containers/{id}/logs into plain text, keeping only the last N bytes.
//
// Without a TTY the engine multiplexes stdout and stderr into frames: an 8-byte header
// [stream (0 stdin, 1 stdout, 2 stderr), 0, 0, 0, payload size as uint32 big-endian] then the payload.
// With a TTY it sends the raw bytes. From API 1.42 the Content-Type says which
// (application/vnd.docker.multiplexed-stream vs …raw-stream); at 1.41 it always says raw-stream, so the
// first header is sniffed: no text begins with a byte 0–2 followed by three NULs.
//
// Not thread-safe; feed it from the one thread that reads the response.
#include <cstddef>
#include <string>
#include <string_view>

namespace gf::launch {

enum class LogFraming { Multiplexed, Raw, Sniff };

// The framing a logs response has, from its Content-Type and the API version the request used.
LogFraming framing_for(std::string_view content_type, std::string_view api_version);

class LogDemuxer {
 public:
  LogDemuxer(LogFraming framing, std::size_t tail_bytes);

  // Chunks may split a header or a payload anywhere.
  void feed(std::string_view chunk);
  // Ends the stream (a short sniff buffer is raw text) and returns the last tail_bytes of output.
  std::string finish();

  bool multiplexed() const noexcept { return framing_ == LogFraming::Multiplexed; }

 private:
  void keep(std::string_view text);
  void feed_multiplexed(std::string_view chunk);

  LogFraming framing_;
  std::size_t tail_bytes_;
  std::string pending_;           // a header not yet complete (or, while sniffing, the first bytes)
  std::size_t payload_left_ = 0;  // bytes of the current frame's payload still to come
  std::string tail_;
};

}  // namespace gf::launch
