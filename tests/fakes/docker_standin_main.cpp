// The Docker stand-in as a program, for tests outside C++ (the dashboard's browser tests):
//   docker_standin [--exit-code N] [--run-time-ms N]
// prints the socket path on its first line, serves until stdin closes (or SIGTERM/SIGINT), then removes
// the socket. See docker_standin.hpp for what it answers.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fakes/docker_standin.hpp"

namespace {
volatile sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  gf::fakes::DockerStandinConfig cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--exit-code" || a == "--run-time-ms") && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (!end || *end) {
        std::fprintf(stderr, "docker_standin: %s needs a number\n", a.c_str());
        return 2;
      }
      if (a == "--exit-code")
        cfg.exit_code = static_cast<int>(v);
      else
        cfg.run_time = std::chrono::milliseconds(v);
    } else {
      std::fprintf(stderr, "usage: docker_standin [--exit-code N] [--run-time-ms N]\n");
      return 2;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  gf::fakes::DockerStandin engine(cfg);
  std::printf("%s\n", engine.socket_path().c_str());
  std::fflush(stdout);
  char buf[256];
  while (!g_stop) {
    const ssize_t n = ::read(0, buf, sizeof buf);
    if (n == 0) break;  // stdin closed: the test is done
    if (n < 0 && errno != EINTR) break;
  }
  return 0;
}
