#pragma once
// Running a user's command in the foreground for `monitor` and `run`, the way time(1) does: Ctrl-C
// from the terminal reaches the command (same process group) while we wait for it; SIGTERM, SIGHUP
// and SIGQUIT sent to gpufleet are passed on to it. Not re-entrant (process-wide signal handlers).
#include <string>
#include <vector>

namespace gf::app {

struct ChildOutcome {
  int exit_code = 0;  // the command's status (128 + signal when a signal ended it), or 126/127
  bool started = false;
  bool interrupted = false;  // a SIGINT/SIGTERM/SIGHUP reached gpufleet or ended the command
  std::string error;         // why it did not start
};

ChildOutcome run_foreground_child(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& env_overrides = {});

}  // namespace gf::app
