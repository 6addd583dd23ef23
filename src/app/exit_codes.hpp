#pragma once
// gpufleet's exit codes (documented in README.md and `gpufleet --help`).
namespace gf::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;           // a query or I/O failed
inline constexpr int kExitUsage = 2;           // bad command line
inline constexpr int kExitNoBackend = 3;       // the backend asked for cannot be used here
inline constexpr int kExitNoGpus = 75;         // alloc/run: not enough GPUs (within the wait), EX_TEMPFAIL
inline constexpr int kExitMonitorFailed = 125; // `monitor`: gpufleet itself failed before running CMD
inline constexpr int kExitCannotExecute = 126; // `monitor`: CMD exists but cannot be executed
inline constexpr int kExitNotFound = 127;      // `monitor`: CMD not found

}  // namespace gf::app
