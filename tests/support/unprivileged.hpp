#pragma once
// Runs a check as an unprivileged user, for tests of what happens when a file may not be read: root
// reads anything, so under root the check runs in a forked child as nobody (65534).
//
//   const int failed = gf::test::run_unprivileged([&] { return /* 0, or which expectation failed */; });
//   EXPECT_EQ(failed, 0);
#include <sys/wait.h>
#include <unistd.h>

namespace gf::test {

// check's result (0: passed); 90 when privileges could not be dropped, 91 when the child did not exit.
template <class Check>
int run_unprivileged(Check check) {
  if (::geteuid() != 0) return check();
  const pid_t child = ::fork();
  if (child < 0) return 91;
  if (child == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(90);
    ::_exit(check());
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 91;
  return WEXITSTATUS(status);
}

}  // namespace gf::test
