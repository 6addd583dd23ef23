#pragma once
// The CLI verbs. Each returns the process exit code (app/exit_codes.hpp).
#include <string>
#include <vector>

#include "app/context.hpp"

namespace gf::app {

int run_status(const GlobalOptions& g, bool json);
int run_ps(const GlobalOptions& g, bool json);
int run_backends(const GlobalOptions& g, bool json);
// count 0: until interrupted.
int run_watch(const GlobalOptions& g, double interval_s, unsigned count);

struct MonitorCommand {
  double interval_s = 1.0;
  bool json = false;
  bool no_series = false;
  std::string output;          // write the JSON report here instead of stdout
  std::vector<unsigned> gpus;  // report only these (empty: all)
  std::vector<std::string> argv;
};
int run_monitor(const GlobalOptions& g, const MonitorCommand& m);

}  // namespace gf::app
