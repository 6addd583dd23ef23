#pragma once
// `gpufleet serve` as a child process, for the tests that talk to the real binary: started with
// `--port-file`, ready once the file names the port it listens on; its stdout and stderr go to
// agent.stdout and agent.stderr in the directory given (the test's TempDir); stop() sends SIGTERM and
// returns how it exited; the destructor kills and reaps whatever is still running.
//
//   gf::test::TempDir dir;
//   gf::test::AgentProcess agent;
//   ASSERT_TRUE(agent.start(dir.path(), {"--backend", "sim", "serve", "--listen", "127.0.0.1:0"}));
//   ... agent.port() ...
//   EXPECT_EQ(agent.stop(), 0) << agent.stderr_text();
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/eventually.hpp"
#include "support/files.hpp"

#include "gf_test_paths.hpp"

extern char** environ;

namespace gf::test {

class AgentProcess {
 public:
  using Clock = std::chrono::steady_clock;

  AgentProcess() = default;
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;
  ~AgentProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  // Starts `gpufleet <args> --port-file DIR/agent.port` (DIR made if missing) and waits (30 s at most) for the port.
  // env: "K=V" sets K for the agent, a bare "K" removes K from what it inherits. A failed start is a failed test (with
  // the agent's stderr) and returns false.
  bool start(const std::filesystem::path& dir, const std::vector<std::string>& args,
             const std::vector<std::string>& env = {}) {
    out_path_ = dir / "agent.stdout";
    err_path_ = dir / "agent.stderr";
    const auto port_file = dir / "agent.port";
    std::filesystem::create_directories(dir);
    std::filesystem::remove(port_file);
    std::vector<std::string> argv{GF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--port-file", port_file.string()});
    auto envp = environment(env);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : envp) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || err < 0) {
      ADD_FAILURE() << "cannot open the output files in " << dir;
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      return false;
    }
    started_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
    if (pid_ < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return false;
    }
    bool exited = false;
    const bool listening = eventually(
        [&] {
          std::ifstream pf(port_file);
          if (unsigned p = 0; pf >> p && p > 0 && p < 65536) {
            port_ = static_cast<unsigned short>(p);
            return true;
          }
          exited = !running();
          return exited;
        },
        std::chrono::seconds(30), std::chrono::milliseconds(20));
    if (listening && !exited) return true;
    if (exited)
      ADD_FAILURE() << "the agent exited at start (status " << exit_code_ << "): " << stderr_text();
    else
      ADD_FAILURE() << "the agent wrote no port file in 30 s: " << stderr_text();
    return false;
  }

  unsigned short port() const { return port_; }
  pid_t pid() const { return pid_; }
  Clock::time_point started() const { return started_; }
  std::string stdout_text() const { return slurp(out_path_); }
  std::string stderr_text() const { return slurp(err_path_); }

  // False once the agent has exited (reaped here; stop() then returns how).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return false;
    }
    return true;
  }

  // SIGTERM, then up to `limit` for the exit: its code (128 + the signal when killed by one), or -1 when
  // it did not exit in time (it is killed then). seconds: how long the exit took.
  int stop(std::chrono::milliseconds limit = std::chrono::seconds(10), double* seconds = nullptr) {
    if (pid_ <= 0) return exit_code_;
    const auto t0 = Clock::now();
    ::kill(pid_, SIGTERM);
    if (eventually([&] { return !running(); }, limit, std::chrono::milliseconds(10))) {
      if (seconds) *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return exit_code_;
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }

 private:
  // This process's environment with the overrides applied.
  static std::vector<std::string> environment(const std::vector<std::string>& overrides) {
    std::vector<std::string> env;
    const auto key_of = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      if (std::none_of(overrides.begin(), overrides.end(),
                       [&](const std::string& o) { return key_of(o) == key_of(kv); }))
        env.push_back(kv);
    }
    for (const auto& o : overrides)
      if (o.find('=') != std::string::npos) env.push_back(o);
    return env;
  }

  pid_t pid_ = -1;
  int exit_code_ = -1;
  unsigned short port_ = 0;
  std::filesystem::path out_path_, err_path_;
  Clock::time_point started_{};
};

}  // namespace gf::test
