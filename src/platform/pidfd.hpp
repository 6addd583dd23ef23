#pragma once
// Watching a process end without polling /proc: a pidfd (pidfd_open(2), Linux 5.3+) becomes readable
// when the process exits, and it names that one process, so a reused pid never looks alive. Also the
// parent of a process, read from a /proc tree.
// Thread-safety: a PidWatch is one owner's; the functions are stateless.
#include <cstdint>
#include <optional>
#include <string>

#include "core/result.hpp"

namespace gf::platform {

// The parent pid of pid (field 4 of /proc/<pid>/stat under proc_root), nullopt when it is gone.
std::optional<std::uint32_t> parent_pid(std::uint32_t pid, const std::string& proc_root = "/proc");
// The real uid of pid (the first number of the "Uid:" line of /proc/<pid>/status), nullopt when gone.
std::optional<std::uint32_t> process_uid(std::uint32_t pid, const std::string& proc_root = "/proc");
// Fields 4 (ppid) and 22 (start time) of a /proc/<pid>/stat text. Pure; safe on any input.
struct StatFields {
  std::uint32_t ppid = 0;
  unsigned long long start_time = 0;
};
std::optional<StatFields> parse_stat(const std::string& text);

class PidWatch {
 public:
  // A watch on pid, but only when it still has the given start time (clock ticks since boot, as in
  // /proc/<pid>/stat; 0: any). NotFound when the process is gone (or is another one now); Unsupported
  // when the kernel has no pidfd_open.
  static Result<PidWatch> open(std::uint32_t pid, unsigned long long start_time,
                               const std::string& proc_root = "/proc");
  PidWatch(PidWatch&& o) noexcept : fd_(o.fd_), pid_(o.pid_) { o.fd_ = -1; }
  PidWatch& operator=(PidWatch&& o) noexcept;
  PidWatch(const PidWatch&) = delete;
  PidWatch& operator=(const PidWatch&) = delete;
  ~PidWatch();

  // True once the process has ended (its pidfd is readable). Never blocks.
  bool exited() const;
  int fd() const noexcept { return fd_; }
  std::uint32_t pid() const noexcept { return pid_; }

 private:
  PidWatch(int fd, std::uint32_t pid) : fd_(fd), pid_(pid) {}
  int fd_ = -1;
  std::uint32_t pid_ = 0;
};

}  // namespace gf::platform
