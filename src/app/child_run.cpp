#include "app/child_run.hpp"

#include <signal.h>

#include <atomic>

#include "app/exit_codes.hpp"
#include "platform/child.hpp"

namespace gf::app {
namespace {

std::atomic<pid_t> g_child{0};
std::atomic<bool> g_signalled{false};

extern "C" void forward_signal(int sig) {
  g_signalled.store(true);
  const pid_t c = g_child.load();
  if (c > 0) ::kill(c, sig);
}

}  // namespace

ChildOutcome run_foreground_child(const std::vector<std::string>& argv, const std::vector<std::string>& env_overrides) {
  ChildOutcome out;
  g_signalled.store(false);
  struct sigaction ignore {
  }, fwd{}, old_int{}, old_term{}, old_hup{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  fwd.sa_handler = forward_signal;
  sigemptyset(&ignore.sa_mask);
  sigemptyset(&fwd.sa_mask);
  // Block the forwarded signals until the child's pid is stored, so none arrives in between and is
  // lost; the child itself starts with an empty mask (platform::spawn_inheriting).
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigaddset(&block, SIGQUIT);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGTERM, &fwd, &old_term);
  sigaction(SIGHUP, &fwd, &old_hup);
  sigaction(SIGQUIT, &fwd, &old_quit);

  auto pid = platform::spawn_inheriting(argv, env_overrides);
  if (pid) g_child.store(*pid);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);  // a pending signal is delivered (and forwarded) here
  if (!pid) {
    out.error = pid.error().message;
    out.exit_code = command_exit_code(pid.error());
  } else {
    out.started = true;
    out.exit_code = platform::wait_exit_code(*pid);
    g_child.store(0);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  out.interrupted = g_signalled.load() || out.exit_code == 128 + SIGINT || out.exit_code == 128 + SIGTERM ||
                    out.exit_code == 128 + SIGHUP;
  return out;
}

}  // namespace gf::app
