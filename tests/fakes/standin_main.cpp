// The stand-ins as one program, for tests outside C++ (the dashboard's browser tests, the Python package):
//   standin docker [--exit-code N] [--run-time-ms N]   the Docker engine (docker_standin.hpp)
//   standin kube --fixture FILE [--token T]            the Kubernetes API server (kube_standin.hpp)
// The first line on stdout is where it listens (the Docker socket's path, or the API server's URL); then
// one JSON line per request it was sent ({"method", "path", "body"}), as they come. It serves until stdin
// closes or SIGTERM/SIGINT.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fakes/docker_standin.hpp"
#include "fakes/kube_standin.hpp"

namespace {

volatile sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

int usage() {
  std::fprintf(stderr,
               "usage: standin docker [--exit-code N] [--run-time-ms N]\n"
               "       standin kube --fixture FILE [--token T]\n");
  return 2;
}

bool number(const char* text, long& out) {
  char* end = nullptr;
  out = std::strtol(text, &end, 10);
  return end && !*end && end != text;
}

// Serves until stdin closes or a signal, printing each new request once.
template <class Requests>
void serve(Requests&& requests) {
  std::size_t printed = 0;
  while (!g_stop) {
    pollfd p{0, POLLIN, 0};
    const int r = ::poll(&p, 1, 50);
    if (r > 0) {
      char buf[256];
      const ssize_t n = ::read(0, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) break;  // stdin closed: the test is done
    }
    const auto all = requests();
    for (; printed < all.size(); ++printed) {
      const auto& q = all[printed];
      std::printf("%s\n", nlohmann::json{{"method", q.method}, {"path", q.path}, {"body", q.body}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  const std::string kind = argv[1];
  if (kind == "docker") {
    gf::fakes::DockerStandinConfig cfg;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      long v = 0;
      if ((a != "--exit-code" && a != "--run-time-ms") || i + 1 >= argc || !number(argv[++i], v)) return usage();
      if (a == "--exit-code")
        cfg.exit_code = static_cast<int>(v);
      else
        cfg.run_time = std::chrono::milliseconds(v);
    }
    gf::fakes::DockerStandin engine(cfg);
    std::printf("%s\n", engine.socket_path().c_str());
    std::fflush(stdout);
    serve([&] { return engine.requests(); });
    return 0;
  }
  if (kind == "kube") {
    gf::fakes::KubeStandinConfig cfg;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) return usage();
      if (a == "--fixture") {
        std::ifstream f(argv[++i]);
        if (!f) {
          std::fprintf(stderr, "standin: cannot read %s\n", argv[i]);
          return 2;
        }
        cfg.fixture_json.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
      } else if (a == "--token") {
        cfg.token = argv[++i];
      } else {
        return usage();
      }
    }
    gf::fakes::KubeStandin api(cfg);
    std::printf("%s\n", api.url().c_str());
    std::fflush(stdout);
    serve([&] { return api.requests(); });
    return 0;
  }
  return usage();
}
