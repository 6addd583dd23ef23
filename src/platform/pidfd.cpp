#include "platform/pidfd.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gf::platform {
namespace {

std::optional<std::string> read_stat(std::uint32_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string text;
  std::getline(in, text);
  if (text.empty()) return std::nullopt;
  return text;
}

}  // namespace

std::optional<StatFields> parse_stat(const std::string& text) {
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // Fields 3.. follow, one space apart: " S ppid ...".
  std::size_t p = close + 1;
  StatFields out;
  for (int field = 3; field <= 22; ++field) {
    if (p >= text.size() || text[p] != ' ') return std::nullopt;
    const std::size_t start = p + 1;
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (field == 4 || field == 22) {
      unsigned long long v = 0;
      auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + end, v);
      if (ec != std::errc() || ptr != text.data() + end) return std::nullopt;
      if (field == 4) {
        if (v > 0xFFFFFFFFULL) return std::nullopt;
        out.ppid = static_cast<std::uint32_t>(v);
      } else {
        out.start_time = v;
      }
    }
    p = end;
  }
  return out;
}

std::optional<std::uint32_t> parent_pid(std::uint32_t pid, const std::string& proc_root) {
  auto text = read_stat(pid, proc_root);
  if (!text) return std::nullopt;
  auto f = parse_stat(*text);
  if (!f) return std::nullopt;
  return f->ppid;
}

std::optional<std::uint32_t> process_uid(std::uint32_t pid, const std::string& proc_root) {
  std::ifstream in(proc_root + "/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::uint32_t uid = 0;
    const char* p = line.c_str() + 4;
    while (*p == ' ' || *p == '\t') ++p;
    const char* end = line.c_str() + line.size();
    const auto r = std::from_chars(p, end, uid);
    if (r.ec != std::errc() || r.ptr == p) return std::nullopt;
    return uid;
  }
  return std::nullopt;
}

Result<PidWatch> PidWatch::open(std::uint32_t pid, unsigned long long start_time, const std::string& proc_root) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0);
  if (fd < 0) {
    if (errno == ESRCH) return make_error(ErrorKind::NotFound, "process " + std::to_string(pid) + " is gone");
    return make_error(ErrorKind::Unsupported, std::string("pidfd_open: ") + std::strerror(errno));
  }
  PidWatch w(static_cast<int>(fd), pid);
  // The pidfd is taken first, then the start time checked: if the pid was reused before we opened it,
  // the start time differs and we refuse; if it is reused after, the pidfd still names the old one.
  if (start_time != 0) {
    auto text = read_stat(pid, proc_root);
    auto f = text ? parse_stat(*text) : std::nullopt;
    if (!f || f->start_time != start_time)
      return make_error(ErrorKind::NotFound, "process " + std::to_string(pid) + " is gone (its pid was reused)");
  }
  if (w.exited()) return make_error(ErrorKind::NotFound, "process " + std::to_string(pid) + " is gone");
  return w;
#else
  (void)pid;
  (void)start_time;
  (void)proc_root;
  return make_error(ErrorKind::Unsupported, "this system has no pidfd_open");
#endif
}

PidWatch& PidWatch::operator=(PidWatch&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    pid_ = o.pid_;
    o.fd_ = -1;
  }
  return *this;
}

PidWatch::~PidWatch() {
  if (fd_ >= 0) ::close(fd_);
}

bool PidWatch::exited() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  return n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

}  // namespace gf::platform
