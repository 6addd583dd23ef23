#include "app/context.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "platform/clock.hpp"
#include "platform/fs.hpp"
#include "platform/log.hpp"

namespace gf::app {

Context open_context(const GlobalOptions& g, bool listen_for_events) {
  Context ctx;
  auto opts = backends::BackendOptions::from_environment();
  opts.xid_events = listen_for_events;
  if (!g.sim_scenario.empty()) opts.sim_scenario = g.sim_scenario;
  opts.sim_gpus = g.sim_gpus;
  opts.nvidia_smi_timeout = std::chrono::milliseconds(static_cast<long long>(g.nvidia_smi_timeout_s * 1000));
  opts.gpm_interval = std::chrono::milliseconds(static_cast<long long>(g.gpm_interval_s * 1000));
  const std::string_view name = backends::parse_backend_name(g.backend).value_or(std::string_view("auto"));
  auto opened = backends::open_backend(name, opts);
  ctx.steps = opened.steps;
  ctx.explicit_backend_failed = name != "auto" && !opened.backend;
  sampler::MonitorOptions mo;
  mo.proc_root = opts.proc_root;
  if (!opened.backend) mo.no_backend_reasons = describe_steps(opened.steps);
  ctx.monitor = std::make_unique<sampler::Monitor>(std::move(opened.backend), platform::system_clock(), mo);
  if (opened.probe) ctx.monitor->prime(std::move(*opened.probe));  // no second query right away
  return ctx;
}

bool report_unusable_backend(const Context& ctx) {
  if (!ctx.explicit_backend_failed) return false;
  for (const auto& line : describe_steps(ctx.steps)) print_error(line);
  return true;
}

std::vector<std::string> describe_steps(const std::vector<backends::DetectionStep>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) {
    // Backends' messages usually name themselves already ("nvidia-smi: not found in PATH").
    const bool named = s.detail.rfind(s.backend + ":", 0) == 0;
    out.push_back(named ? s.detail : fmt::format("{}: {}", s.backend, s.detail));
  }
  return out;
}

bool use_color(int fd, const GlobalOptions& g) {
  if (g.no_color || platform::env("NO_COLOR")) return false;
  if (auto term = platform::env("TERM"); term && *term == "dumb") return false;
  return ::isatty(fd) == 1;
}

// Errors quote names and paths that others may have chosen: escaped like any other text shown.
// Multi-line messages (an allocator's reasons) keep their line breaks; nothing else passes raw.
void print_error(const std::string& message) {
  std::string text;
  for (std::size_t from = 0;;) {
    const auto nl = message.find('\n', from);
    text += platform::printable(std::string_view(message).substr(from, nl == std::string::npos ? nl : nl - from));
    if (nl == std::string::npos) break;
    text += '\n';
    from = nl + 1;
  }
  std::fprintf(stderr, "gpufleet: %s\n", text.c_str());
}

}  // namespace gf::app
