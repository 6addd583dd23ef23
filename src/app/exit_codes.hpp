#pragma once
// gpufleet's exit codes (documented in README.md and `gpufleet --help`), and the one mapping from an
// error's kind to the code a verb exits with.
#include "core/result.hpp"

namespace gf::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;            // a query or I/O failed
inline constexpr int kExitUsage = 2;            // bad command line
inline constexpr int kExitNoBackend = 3;        // the backend asked for cannot be used here
inline constexpr int kExitNoGpus = 75;          // alloc/run: not enough GPUs (within the wait), EX_TEMPFAIL
inline constexpr int kExitMonitorFailed = 125;  // `monitor`: gpufleet itself failed before running CMD
inline constexpr int kExitCannotExecute = 126;  // `monitor`: CMD exists but cannot be executed
inline constexpr int kExitNotFound = 127;       // `monitor`: CMD not found

// The exit code of a verb that failed with an error of this kind. A bad file or request body is not a
// bad command line: Invalid exits 1 like any other failure the README groups under "a query or I/O
// failed"; only Usage exits 2.
constexpr int exit_code(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Usage: return kExitUsage;
    case ErrorKind::Unsupported: return kExitNoBackend;
    case ErrorKind::Unavailable: return kExitNoGpus;
    case ErrorKind::Failed:
    case ErrorKind::Invalid:
    case ErrorKind::NotFound:
    case ErrorKind::NotReady:
    case ErrorKind::Permission: break;
  }
  return kExitError;
}
inline int exit_code(const Error& e) noexcept { return exit_code(e.kind); }

// The exit code when the command a verb was to run (`monitor`, `run`) could not be started, the
// shell's convention: 127 when there is no such command, 126 when it cannot be executed.
constexpr int command_exit_code(ErrorKind kind) noexcept {
  return kind == ErrorKind::NotFound ? kExitNotFound : kExitCannotExecute;
}
inline int command_exit_code(const Error& e) noexcept { return command_exit_code(e.kind); }

}  // namespace gf::app
