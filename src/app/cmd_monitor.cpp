// `gpufleet monitor -- CMD ARGS…`: runs CMD, samples the GPUs while it runs, prints what they did,
// and exits with CMD's exit status.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "app/child_run.hpp"
#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/render.hpp"
#include "platform/output_file.hpp"
#include "sampler/hub.hpp"
#include "sampler/sampler.hpp"
#include "wire/json.hpp"

namespace gf::app {
int run_monitor(const GlobalOptions& g, const MonitorCommand& m) {
  if (m.argv.empty()) {
    print_error("monitor: no command given (usage: gpufleet monitor [OPTIONS] -- CMD [ARGS...])");
    return kExitUsage;
  }
  if (!(m.interval_s >= 0.05 && m.interval_s <= 60)) {
    print_error("--interval must be between 0.05 and 60 seconds");
    return kExitUsage;
  }
  const auto interval = std::chrono::milliseconds(static_cast<long long>(m.interval_s * 1000.0));
  Context ctx = open_context(g, /*listen_for_events=*/true);
  if (report_unusable_backend(ctx)) return kExitNoBackend;
  if (!ctx.monitor->has_backend())
    print_error("no GPU backend is usable here; running the command without GPU monitoring");

  sampler::SampleHub hub(*ctx.monitor);
  auto sampler = sampler::Sampler::create(hub, interval, m.gpus);
  if (!sampler) {
    print_error(sampler.error().message);
    return kExitUsage;
  }
  // --output is opened before CMD runs, like a shell's `>`: a file we may not write (a link, someone
  // else's file) is refused now rather than after a long run, and never written through.
  std::optional<platform::OutputFile> output;
  if (!m.output.empty() && ctx.monitor->has_backend()) {
    auto f = platform::OutputFile::open(m.output, 0644);
    if (!f) {
      print_error("--output: " + f.error().message);
      return kExitMonitorFailed;
    }
    output = std::move(*f);
  }
  if (ctx.monitor->has_backend()) (*sampler)->start();

  const ChildOutcome child = run_foreground_child(m.argv);
  if (!child.started) print_error(child.error);
  const int code = child.exit_code;

  const core::RunReport report = (*sampler)->stop();
  if (const auto failed = (*sampler)->failed_queries(); failed > 0)
    print_error(std::to_string(failed) +
                " GPU queries failed while the command ran; the statistics miss those samples");
  if (!ctx.monitor->has_backend()) return code;
  if (m.json || !m.output.empty()) {
    auto doc = wire::run_report_json(report, !m.no_series);
    doc["command"] = m.argv;
    doc["exit_code"] = code;
    doc["backend"] = ctx.monitor->backend_name();
    const std::string text = doc.dump(2) + "\n";
    if (output) {
      if (auto w = output->write(text); !w) print_error(w.error().message);
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
