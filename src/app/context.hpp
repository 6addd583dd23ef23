#pragma once
// The wiring shared by every CLI verb: global options, backend selection, the Monitor.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "sampler/monitor.hpp"

namespace gf::app {

struct GlobalOptions {
  std::string backend = "auto";
  std::string sim_scenario;
  unsigned sim_gpus = 0;
  double nvidia_smi_timeout_s = 5.0;
  double gpm_interval_s = 10.0;  // --gpm-interval: least seconds between NVML GPM samples of a GPU; 0: off
  bool no_color = false;
  std::string socket;  // --socket: the agent's socket ("none": no agent; "": find it, app/agent_client.hpp)
};

struct Context {
  std::unique_ptr<sampler::Monitor> monitor;
  std::vector<backends::DetectionStep> steps;
  bool explicit_backend_failed = false;  // --backend X was asked and X could not be opened
};

// Opens the backend named in the options (auto-detection by default) and wraps it in a Monitor.
// Never fails: with no backend the Monitor serves empty snapshots that say why.
// listen_for_events: the backend keeps an XID event thread (long-running commands: serve, monitor, watch).
Context open_context(const GlobalOptions& g, bool listen_for_events = false);

// When --backend named a backend that could not be opened: says why on stderr and returns true
// (the verb then exits with kExitNoBackend).
bool report_unusable_backend(const Context& ctx);

// One line per detection step: "nvml: <detail>".
std::vector<std::string> describe_steps(const std::vector<backends::DetectionStep>& steps);

// Colour on stdout/stderr: a terminal, NO_COLOR unset, TERM not "dumb", and not --no-color.
bool use_color(int fd, const GlobalOptions& g);

// "gpufleet: <message>" on stderr.
void print_error(const std::string& message);

}  // namespace gf::app
