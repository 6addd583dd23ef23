#include "platform/change_signal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace gf::platform {

ChangeSignal::ChangeSignal(std::string path) : path_(std::move(path)) {
  const auto slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  // Watching the directory (not the file) also sees the file's first creation.
  if (inotify_fd_ >= 0 && ::inotify_add_watch(inotify_fd_, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    ::close(inotify_fd_);
    inotify_fd_ = -1;
  }
}

ChangeSignal::~ChangeSignal() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
}

void ChangeSignal::notify() const {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return;  // another user's marker we may not write: waiters fall back to their re-check
  // Every user of a shared store must be able to wake the others, whatever our umask: the file holds
  // nothing but the fact that it was written.
  (void)::fchmod(fd, 0666);
  (void)!::write(fd, "1", 1);
  ::close(fd);
}

bool ChangeSignal::wait(std::chrono::milliseconds timeout) {
  if (inotify_fd_ < 0) {  // no inotify: the caller's timeout is the poll interval
    std::this_thread::sleep_for(timeout);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{inotify_fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n <= 0) continue;
    const ssize_t got = ::read(inotify_fd_, buf, sizeof buf);
    for (ssize_t off = 0; got > 0 && off < got;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0 && name_ == ev->name) return true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

}  // namespace gf::platform
