#include "platform/child.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace gf::platform {

Result<pid_t> spawn_inheriting(const std::vector<std::string>& argv, const std::vector<std::string>& env_overrides) {
  if (argv.empty()) return make_error(ErrorKind::Usage, "no command given");
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const auto key = entry.substr(0, entry.find('=') + 1);
    bool overridden = false;
    for (const auto& o : env_overrides)
      if (o.compare(0, key.size(), key) == 0) overridden = true;
    if (!overridden) env_store.push_back(entry);
  }
  for (const auto& o : env_overrides) env_store.push_back(o);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
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
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), nullptr, &attr, cargv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    if (rc == ENOENT) return make_error(ErrorKind::NotFound, argv[0] + ": command not found");
    const auto kind = rc == EACCES || rc == EPERM ? ErrorKind::Permission : ErrorKind::Failed;
    return make_error(kind, argv[0] + ": " + std::strerror(rc));
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
