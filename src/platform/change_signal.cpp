#include "platform/change_signal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "platform/log.hpp"

namespace gf::platform {

namespace {

bool ours(const struct stat& st) { return S_ISREG(st.st_mode) && st.st_uid == ::geteuid(); }

}  // namespace

ChangeSignal::ChangeSignal(std::string path) : path_(std::move(path)) {
  const auto slash = path_.rfind('/');
  dir_ = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  name_ = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  // Watching the directory (not the file) also sees the file's first creation.
  if (inotify_fd_ >= 0 && ::inotify_add_watch(inotify_fd_, dir_.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    ::close(inotify_fd_);
    inotify_fd_ = -1;
  }
}

ChangeSignal::~ChangeSignal() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
}

void ChangeSignal::notify() const {
  // The marker sits in the store's directory, which another user may be able to write: open it only
  // through that directory (no link followed at either level), never truncate or chmod it, and write
  // to it only when it is a regular file of ours. Anything else is skipped: waiters fall back to
  // their own re-check, at worst one poll interval later.
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    if (!warned_.exchange(true))
      log_line("store", "not writing the wake-up file " + path_ +
                            ": its directory cannot be opened without following a link (" + std::strerror(errno) +
                            "); waiters will poll instead");
    return;
  }
  int fd = ::openat(dir_fd, name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    // Look before opening, so that a device or FIFO planted there is never even opened; fstat after
    // opening catches a swap in between.
    struct stat before {};
    if (::fstatat(dir_fd, name_.c_str(), &before, AT_SYMLINK_NOFOLLOW) == 0 && ours(before))
      fd = ::openat(dir_fd, name_.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat after {};
    if (fd >= 0 && (::fstat(fd, &after) != 0 || !ours(after) || after.st_ino != before.st_ino)) {
      ::close(fd);
      fd = -1;
    }
    if (fd < 0 && !warned_.exchange(true))
      log_line("store", "not writing the wake-up file " + path_ +
                            ": it is not a regular file owned by us (waiters will poll instead)");
  }
  ::close(dir_fd);
  if (fd < 0) return;
  (void)!::pwrite(fd, "1", 1, 0);  // closing a file opened for writing is what the waiters see
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
