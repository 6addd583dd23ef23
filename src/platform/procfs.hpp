#pragma once
// Reading processes from a /proc tree (the real one, or a fixture: the root is a parameter).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gf::platform {

struct ProcInfo {
  std::string name;                         // comm
  std::string user;                         // user name, or the numeric uid when it has no name
  std::optional<std::uint32_t> uid;         // real uid (first field of Uid: in status)
  std::string command;                      // cmdline, NULs turned into spaces; [name] for kernel threads
  std::optional<std::string> container;     // see parse_container_id
  std::vector<std::uint32_t> nspid;         // NSpid: host-side first, innermost namespace last
  unsigned long long start_time_ticks = 0;  // field 22 of stat: tells a reused pid apart
};

// The container a process lives in, from the text of /proc/<pid>/cgroup: "k8s-pod:<uid>" for a
// Kubernetes pod, else the 12-character short id of a Docker/containerd/CRI-O/Podman container,
// else nullopt. Pure; safe on any input.
std::optional<std::string> parse_container_id(std::string_view cgroup_text);

// NSpid values from the text of /proc/<pid>/status (empty when the line is missing or malformed).
std::vector<std::uint32_t> parse_nspid(std::string_view status_text);

// The start time (field 22) in the text of /proc/<pid>/stat, or nullopt when it is malformed.
std::optional<unsigned long long> parse_start_time(std::string_view stat_text);

// A /proc/<pid> directory held open: it says whether the very process it was opened on still exists
// with one path lookup and no text. A pid that is reused belongs to another process, whose /proc/<pid> is
// another directory: lookups under the held one fail once its process is gone (reaped; a zombie still
// exists, as it does for its stat file). Holds one file descriptor. Move-only; not thread-safe.
class ProcHandle {
 public:
  ProcHandle() = default;
  ProcHandle(ProcHandle&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ProcHandle& operator=(ProcHandle&& o) noexcept;
  ProcHandle(const ProcHandle&) = delete;
  ProcHandle& operator=(const ProcHandle&) = delete;
  ~ProcHandle();

  bool valid() const noexcept { return fd_ >= 0; }
  // False for an invalid handle.
  bool alive() const;

 private:
  friend class ProcReader;
  explicit ProcHandle(int fd) noexcept : fd_(fd) {}
  int fd_ = -1;
};

// Stateless apart from its root: thread-safe.
class ProcReader {
 public:
  explicit ProcReader(std::string proc_root = "/proc") : root_(std::move(proc_root)) {}

  // Everything we can learn about pid, or nullopt when no such process is visible.
  std::optional<ProcInfo> read(std::uint32_t pid) const;
  // Start time of pid (clock ticks since boot), or nullopt when it is gone.
  std::optional<unsigned long long> start_time(std::uint32_t pid) const;
  // A handle on pid's directory when pid is the process that started at start_time (read through the
  // handle, so it cannot be a later process's); an invalid one otherwise.
  ProcHandle hold(std::uint32_t pid, unsigned long long start_time) const;
  // True when this process sits in a pid namespace below the host's (NSpid has several entries):
  // pids the driver reports (host pids) are then mostly invisible here.
  bool in_child_pid_namespace() const;
  // Numeric directory names under the root.
  std::vector<std::uint32_t> pids() const;
  const std::string& root() const noexcept { return root_; }

 private:
  std::string root_;
};

}  // namespace gf::platform
