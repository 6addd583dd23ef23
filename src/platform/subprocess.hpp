#pragma once
// Running a program without a shell, with a hard timeout (thread-safe; one call per program). A program that outlives
// the timeout is killed (SIGKILL to its process group) and reaped; output beyond max_output_bytes is discarded.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace gf::platform {

struct ProcessOutput {
  int exit_code = -1;  // exit status, or 128 + signal number when killed by a signal
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

struct RunOptions {
  std::chrono::milliseconds timeout{5000};
  std::size_t max_output_bytes = 16 * 1024 * 1024;
};

// Runs argv[0] (a path, or a name looked up in PATH) with argv. An error only when the program could
// not be started; a non-zero exit or a timeout is reported in ProcessOutput.
Result<ProcessOutput> run_process(const std::vector<std::string>& argv, const RunOptions& opts = {});

// The full path of an executable: `name` itself when it contains '/', else the first match in PATH.
std::optional<std::string> find_executable(const std::string& name);

}  // namespace gf::platform
