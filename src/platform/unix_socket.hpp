#pragma once
// Unix stream sockets for line-based protocols (the agent socket, docs/agent-socket.md): connecting with a
// time limit, writing a whole message and reading one line before a deadline. Every wait is bounded, so a
// peer that stops answering turns into an error, never a hang. An object is used by one thread at a time.
#include <chrono>
#include <cstddef>
#include <string>

#include "core/result.hpp"

namespace gf::platform {

class UnixLineSocket {
 public:
  using Clock = std::chrono::steady_clock;

  UnixLineSocket() = default;
  explicit UnixLineSocket(int fd) : fd_(fd) {}  // takes ownership of a connected stream socket
  UnixLineSocket(UnixLineSocket&& o) noexcept;
  UnixLineSocket& operator=(UnixLineSocket&& o) noexcept;
  UnixLineSocket(const UnixLineSocket&) = delete;
  UnixLineSocket& operator=(const UnixLineSocket&) = delete;
  ~UnixLineSocket();

  // Connects to the socket at path within `timeout`. Errors: NotFound (no socket there), Permission,
  // Unavailable (nobody listening, or no answer within the limit), Invalid (path too long).
  static Result<UnixLineSocket> connect(const std::string& path, std::chrono::milliseconds timeout);

  // Writes all of data before the deadline (a peer that stops reading is an Unavailable error).
  Result<bool> write_all(const std::string& data, Clock::time_point deadline);

  // The next line without its '\n'. Errors: Unavailable when nothing complete arrives before the
  // deadline; Failed when the peer closed the connection ("closed") or the line exceeds max_line_bytes.
  Result<std::string> read_line(Clock::time_point deadline, std::size_t max_line_bytes);

  // Whether a complete line is already buffered (read_line would return at once).
  bool line_buffered() const { return buf_.find('\n') != std::string::npos; }
  int fd() const { return fd_; }
  void close();

 private:
  int fd_ = -1;
  std::string buf_;  // bytes read past the last line returned
};

}  // namespace gf::platform
