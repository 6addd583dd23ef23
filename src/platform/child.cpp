#include "platform/child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gf::platform {

Result<pid_t> spawn_inheriting(const std::vector<std::string>& argv, int* spawn_errno) {
  if (argv.empty()) return make_error("no command given");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with default signal dispositions even if we ignore SIGINT while it runs.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), nullptr, &attr, cargv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    if (spawn_errno) *spawn_errno = rc;
    return make_error(argv[0] + ": " + (rc == ENOENT ? std::string("command not found") : std::strerror(rc)));
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  for (;;) {
    if (::waitpid(pid, &status, 0) >= 0) break;
    if (errno != EINTR) return 1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace gf::platform
