#pragma once
// The Kubernetes API's remote-command stream over WebSocket (pods/exec), as a client reads it: pure
// decoding of the binary messages of the subprotocols v5.channel.k8s.io and v4.channel.k8s.io. Each
// message starts with one channel byte: 0 stdin, 1 stdout, 2 stderr, 3 the error channel (v4 and v5:
// a metav1.Status JSON that ends the command: Success, or Failure with a reason and for
// NonZeroExitCode the exit code in details.causes), 4 terminal resize. v5 adds the control channel
// 255: [255, c] says that channel c is closed. The API server also sends a message holding only a
// channel byte (or nothing) when a stream opens; such messages carry no data.
//
// Everything here decodes bytes from the API server (and so from the container): lengths are bounded,
// text shown to a terminal is escaped, nothing throws. Fuzzed (fuzz/exec_stream_fuzz.cpp).
// Thread-safety: pure functions; one ExecStreams per stream, used by one thread.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace gf::cluster {

inline constexpr std::string_view kExecProtocolV5 = "v5.channel.k8s.io";
inline constexpr std::string_view kExecProtocolV4 = "v4.channel.k8s.io";

inline constexpr unsigned char kExecStdin = 0;
inline constexpr unsigned char kExecStdout = 1;
inline constexpr unsigned char kExecStderr = 2;
inline constexpr unsigned char kExecError = 3;
inline constexpr unsigned char kExecResize = 4;
inline constexpr unsigned char kExecClose = 255;  // v5 only

// The Status the error channel carries when the command ends.
struct ExecStatus {
  bool success = false;
  std::optional<int> exit_code;  // Success: 0; NonZeroExitCode: the code from details.causes
  std::string reason;            // "NonZeroExitCode", "InternalError", …; printable, at most 100 chars
  std::string message;           // printable, at most 300 chars
};

// Parses the error channel's payload. Errors: not JSON, not an object, no "status", a status other
// than Success or Failure, an exit code that is not a number from 0 to 255.
Result<ExecStatus> parse_exec_status(std::string_view json);

class ExecStreams {
 public:
  // Each of stdout and stderr keeps at most max_bytes; more sets the stream's truncated flag.
  explicit ExecStreams(bool v5, std::size_t max_bytes = 1u << 20) : v5_(v5), max_bytes_(max_bytes) {}

  // One binary WebSocket message. Errors (the stream is then not to be trusted): an unknown channel,
  // a v5 close signal that is not two bytes, a control message under v4, an error channel longer
  // than 64 KiB. Data the server should not send (stdin, resize) is ignored.
  Result<void> feed(std::string_view message);

  // After the stream ended: the command's Status. Errors: no Status came, or it is malformed.
  Result<ExecStatus> finish() const;

  const std::string& out() const noexcept { return out_; }
  const std::string& err() const noexcept { return err_; }
  bool out_truncated() const noexcept { return out_truncated_; }
  bool err_truncated() const noexcept { return err_truncated_; }
  bool got_status() const noexcept { return !status_.empty(); }
  // Channels the server closed with the v5 signal (bit c for channel c < 8).
  unsigned closed_channels() const noexcept { return closed_; }

 private:
  bool v5_;
  std::size_t max_bytes_;
  std::string out_, err_, status_;
  bool out_truncated_ = false, err_truncated_ = false;
  unsigned closed_ = 0;
};

}  // namespace gf::cluster
