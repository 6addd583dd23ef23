#include "platform/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

extern char** environ;

namespace gf::platform {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

bool is_executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::optional<std::string> find_executable(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

namespace {

// Starts `exe` with stdin on /dev/null and stdout/stderr on the given pipe ends, in a process group of
// its own (so a timeout kills the program and everything it started), with no signal blocked or ignored.
Result<pid_t> spawn(const std::string& exe, const std::vector<std::string>& argv, int out_fd, int err_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return make_error(argv[0] + ": cannot start: " + std::strerror(rc));
  return pid;
}

// Reads both pipes into result.out and result.err (each capped at max_bytes) until both close or the
// deadline passes (result.timed_out).
void read_output(int out_fd, int err_fd, std::chrono::steady_clock::time_point deadline, std::size_t max_bytes,
                 ProcessOutput& result) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      return;
    }
    const int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      result.timed_out = true;  // cannot watch it any more: treat as hung, kill below
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        std::string& sink = *sinks[i];
        const std::size_t room = max_bytes > sink.size() ? max_bytes - sink.size() : 0;
        sink.append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(got)));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
}

// Reaps pid within the deadline (it may still run after closing its output); true when reaped, with
// its wait status. result.timed_out when the deadline passed first.
bool reap(pid_t pid, std::chrono::steady_clock::time_point deadline, int& status, ProcessOutput& result) {
  while (!result.timed_out) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) return true;
    if (w < 0 && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Kills pid's process group. A process stuck in the kernel (an nvidia-smi in D state) may not die at
// once: waits a little, then leaves the reaping to a detached thread rather than block the caller.
// True when reaped here, with its wait status.
bool kill_hung(pid_t pid, int& status) {
  ::kill(-pid, SIGKILL);
  const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < grace) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::thread([pid] {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  return false;
}

}  // namespace

Result<ProcessOutput> run_process(const std::vector<std::string>& argv, const RunOptions& opts) {
  if (argv.empty()) return make_error("run_process: empty command");
  auto exe = find_executable(argv[0]);
  if (!exe) return make_error(argv[0] + ": not found or not executable");

  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return make_error(std::string("pipe: ") + std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return make_error(std::string("pipe: ") + std::strerror(errno));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  auto pid = spawn(*exe, argv, out_w.fd, err_w.fd);
  if (!pid) return pid.error();
  out_w.reset();
  err_w.reset();

  ProcessOutput result;
  const auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  read_output(out_r.fd, err_r.fd, deadline, opts.max_output_bytes, result);
  // The output is closed, but the program may still run (it closed its stdout and hung): the
  // deadline covers its exit too.
  int status = 0;
  const bool reaped = reap(*pid, deadline, status, result);
  if (result.timed_out && !reaped && !kill_hung(*pid, status)) {
    result.exit_code = 128 + SIGKILL;
    return result;
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace gf::platform
