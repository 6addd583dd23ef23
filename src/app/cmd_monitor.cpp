// `gpufleet monitor -- CMD ARGS…`: runs CMD, samples the GPUs while it runs, prints what they did,
// and exits with CMD's exit status.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/render.hpp"
#include "platform/child.hpp"
#include "sampler/hub.hpp"
#include "sampler/sampler.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

std::atomic<pid_t> g_child{0};
extern "C" void forward_signal(int sig) {
  const pid_t c = g_child.load();
  if (c > 0) ::kill(c, sig);
}

}  // namespace

int run_monitor(const GlobalOptions& g, const MonitorCommand& m) {
  if (m.argv.empty()) {
    print_error("monitor: no command given (usage: gpufleet monitor [OPTIONS] -- CMD [ARGS...])");
    return kExitUsage;
  }
  const auto interval = std::chrono::milliseconds(static_cast<long long>(m.interval_s * 1000.0));
  Context ctx = open_context(g);
  if (ctx.explicit_backend_failed) {
    for (const auto& line : describe_steps(ctx.steps)) print_error(line);
    return kExitNoBackend;
  }
  if (!ctx.monitor->has_backend()) print_error("no GPU backend is usable here; running the command without GPU monitoring");

  sampler::SampleHub hub(*ctx.monitor);
  auto sampler = sampler::Sampler::create(hub, interval, m.gpus);
  if (!sampler) {
    print_error(sampler.error().message);
    return kExitUsage;
  }
  if (ctx.monitor->has_backend()) (*sampler)->start();

  // Like time(1): the terminal's Ctrl-C goes to CMD (same process group); we wait for it to end and
  // still print the statistics. SIGTERM/SIGHUP sent to us are passed on to CMD.
  struct sigaction ignore {}, fwd {}, old_int {}, old_quit {}, old_term {}, old_hup {};
  ignore.sa_handler = SIG_IGN;
  fwd.sa_handler = forward_signal;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&fwd.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  sigaction(SIGTERM, &fwd, &old_term);
  sigaction(SIGHUP, &fwd, &old_hup);

  int spawn_errno = 0;
  auto pid = platform::spawn_inheriting(m.argv, &spawn_errno);
  int code;
  if (!pid) {
    print_error(pid.error().message);
    code = spawn_errno == ENOENT ? kExitNotFound : kExitCannotExecute;
  } else {
    g_child.store(*pid);
    code = platform::wait_exit_code(*pid);
    g_child.store(0);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);

  const core::RunReport report = (*sampler)->stop();
  if (!ctx.monitor->has_backend()) return code;
  if (m.json || !m.output.empty()) {
    auto doc = wire::run_report_json(report, !m.no_series);
    doc["command"] = m.argv;
    doc["exit_code"] = code;
    doc["backend"] = ctx.monitor->backend_name();
    const std::string text = doc.dump(2) + "\n";
    if (!m.output.empty()) {
      std::ofstream out(m.output);
      out << text;
      if (!out) print_error("cannot write " + m.output);
    } else {
      std::fputs(text.c_str(), stdout);
    }
  }
  if (!m.json) {
    for (const auto& l : render_report(report, Style{use_color(2, g)})) std::fprintf(stderr, "%s\n", l.c_str());
  }
  return code;
}

}  // namespace gf::app
