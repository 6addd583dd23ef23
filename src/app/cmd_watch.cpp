// `gpufleet watch`: a live view that redraws in place (no clearing, so no flicker) on a terminal,
// and prints successive frames when the output is not a terminal.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/render.hpp"

namespace gf::app {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

}  // namespace

int run_watch(const GlobalOptions& g, double interval_s, unsigned count) {
  if (!(interval_s >= 0.05 && interval_s <= 3600)) {
    print_error("--interval must be between 0.05 and 3600 seconds");
    return kExitUsage;
  }
  Context ctx = open_context(g, /*listen_for_events=*/true);
  if (report_unusable_backend(ctx)) return kExitNoBackend;
  const bool tty = ::isatty(1) == 1;
  const Style style{use_color(1, g)};
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (tty) std::fputs("\x1b[?1049h\x1b[?25l", stdout);  // alternate screen, hide cursor

  const std::string host = hostname();
  const auto period =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(interval_s));
  auto next = std::chrono::steady_clock::now();
  int code = kExitOk;
  for (unsigned frame = 0; !g_stop.load() && (count == 0 || frame < count); ++frame) {
    auto snap = ctx.monitor->snapshot(frame == 0);  // the first frame may use auto-detection's probe
    std::string out;
    if (tty) out += "\x1b[H";
    std::vector<std::string> lines;
    if (snap) {
      lines = render_status(**snap, host, style);
    } else {
      lines.push_back(style.paint("query failed: " + snap.error().message, "1;31"));
      code = kExitError;
    }
    if (tty) lines.push_back(style.paint(fmt::format("every {:g} s · Ctrl-C to quit", interval_s), "90"));
    for (const auto& l : lines) out += l + (tty ? "\x1b[K\n" : "\n");
    if (tty)
      out += "\x1b[J";
    else
      out += "\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    if (count != 0 && frame + 1 == count) break;
    next += period;
    while (!g_stop.load() && std::chrono::steady_clock::now() < next)
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(next - std::chrono::steady_clock::now(),
                                                                                std::chrono::milliseconds(50)));
  }
  if (tty) std::fputs("\x1b[?25h\x1b[?1049l", stdout);  // show cursor, leave alternate screen
  std::fflush(stdout);
  return g_stop.load() ? kExitOk : code;
}

}  // namespace gf::app
