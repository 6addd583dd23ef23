#pragma once
// Running a command that shares our terminal (stdin/stdout/stderr inherited), for `gpufleet monitor`
// and job runs. No shell is involved. Both functions are safe to call from any thread.
#include <sys/types.h>

#include <string>
#include <vector>

#include "core/result.hpp"

namespace gf::platform {

// Starts argv (argv[0] looked up in PATH). On failure, error().message is "<cmd>: <reason>" and the
// kind is NotFound (no such command), Permission (it may not be executed) or Failed (anything else).
// env_overrides: "KEY=VALUE" entries replacing or adding to our environment for the child.
Result<pid_t> spawn_inheriting(const std::vector<std::string>& argv,
                               const std::vector<std::string>& env_overrides = {});

// Waits for pid; its exit status, or 128 + signal when a signal ended it.
int wait_exit_code(pid_t pid);

}  // namespace gf::platform
