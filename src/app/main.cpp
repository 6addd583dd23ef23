// gpufleet: one binary, one verb per job. Command-line parsing lives here alone (CLI11 is heavy to
// compile); the verbs are in cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"

namespace {

constexpr const char* kFooter = R"(Backends: auto-detection tries NVML, then nvidia-smi, then amdgpu, and says which it chose
(`gpufleet backends`); it never falls back to simulated GPUs. --backend sim shows clearly labelled
simulated GPUs for demos. Environment: GPUFLEET_NVML_LIBRARY, GPUFLEET_NVIDIA_SMI, GPUFLEET_SYSFS_ROOT,
GPUFLEET_PROC_ROOT, GPUFLEET_SIM_SCENARIO, NO_COLOR.

Exit codes: 0 ok; 1 a query or I/O failed; 2 bad command line; 3 the backend asked for is not usable
here (or, for `backends`, none is); `monitor` exits with CMD's status, or 125 when gpufleet failed,
126 when CMD cannot be executed, 127 when CMD is not found.)";

}  // namespace

int main(int argc, char** argv) {
  using namespace gf::app;
  CLI::App app{"gpufleet: what your GPUs are doing, who is using them, and what they did while a job ran"};
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("gpufleet ") + GF_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options are accepted after the verb too

  GlobalOptions g;
  app.add_option("--backend", g.backend, "auto, nvml, nvidia-smi, amdgpu or sim")
      ->check(CLI::IsMember({"auto", "nvml", "nvidia-smi", "amdgpu", "sim"}))
      ->capture_default_str();
  app.add_option("--sim-scenario", g.sim_scenario, "JSON scenario for --backend sim (default: built-in demo)")
      ->check(CLI::ExistingFile);
  app.add_option("--sim-gpus", g.sim_gpus, "number of simulated GPUs (default: the scenario's)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--nvidia-smi-timeout", g.nvidia_smi_timeout_s, "seconds before a hung nvidia-smi is killed")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  app.add_flag("--no-color", g.no_color, "no colours (also: NO_COLOR set, or output not a terminal)");

  bool json = false;
  auto* status = app.add_subcommand("status", "one line per GPU: load, memory, power, processes");
  status->add_flag("--json", json, "print the document GET /api/v1/monitoring/gpu-metrics serves");

  auto* ps = app.add_subcommand("ps", "processes on the GPUs, biggest memory first: who is using what");
  ps->add_flag("--json", json, "print JSON");

  auto* backends = app.add_subcommand("backends", "which GPU backends are usable here, and which one is chosen");
  backends->add_flag("--json", json, "print JSON");

  double watch_interval = 1.0;
  unsigned watch_count = 0;
  auto* watch = app.add_subcommand("watch", "live view, refreshed in place");
  watch->add_option("-n,--interval", watch_interval, "seconds between refreshes")->capture_default_str();
  watch->add_option("--count", watch_count, "stop after this many refreshes (default: until Ctrl-C)");

  MonitorCommand mon;
  auto* monitor = app.add_subcommand("monitor", "run a command, sample the GPUs while it runs, print what they did");
  monitor->footer("Usage: gpufleet monitor [OPTIONS] -- CMD [ARGS...]");
  monitor->add_option("-n,--interval", mon.interval_s, "seconds between samples (0.05 to 60)")->capture_default_str();
  monitor->add_flag("--json", mon.json, "print the statistics as JSON on stdout (CMD's output shares stdout)");
  monitor->add_option("-o,--output", mon.output, "write the JSON statistics to this file");
  monitor->add_flag("--no-series", mon.no_series, "leave the time series out of the JSON");
  monitor->add_option("--gpus", mon.gpus, "report only these GPU indices")->delimiter(',');
  monitor->add_option("command", mon.argv, "the command to run (put it after --)");

  // Everything after the first "--" is monitor's command, untouched by option parsing (CMD may have
  // options of its own, such as python -u).
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> command;
  if (auto dd = std::find(args.begin(), args.end(), "--"); dd != args.end()) {
    command.assign(dd + 1, args.end());
    args.erase(dd, args.end());
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gpufleet: %s\nRun 'gpufleet --help' for usage.\n", e.what());
    return kExitUsage;
  }

  try {
    if (!command.empty() && !*monitor) {
      print_error("unexpected arguments after '--' (only monitor takes a command)");
      return kExitUsage;
    }
    if (*status) return run_status(g, json);
    if (*ps) return run_ps(g, json);
    if (*backends) return run_backends(g, json);
    if (*watch) return run_watch(g, watch_interval, watch_count);
    if (*monitor) {
      mon.argv.insert(mon.argv.end(), command.begin(), command.end());
      return run_monitor(g, mon);
    }
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitError;
  }
  return kExitUsage;
}
