#include "platform/unix_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gf::platform {
namespace {

// Milliseconds left until the deadline, for poll(): 0 when it has passed.
int ms_left(UnixLineSocket::Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - UnixLineSocket::Clock::now()).count();
  if (left <= 0) return 0;
  return left > 60'000 ? 60'000 : static_cast<int>(left);
}

// Waits for `events` on fd until the deadline; false when it passed first.
Result<bool> wait_for(int fd, short events, UnixLineSocket::Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) {
      if (UnixLineSocket::Clock::now() >= deadline) return false;
      continue;
    }
    if (errno == EINTR) continue;  // callers wait in short slices and check their own cancel flag
    return make_error(std::string("poll: ") + std::strerror(errno));
  }
}

}  // namespace

UnixLineSocket::UnixLineSocket(UnixLineSocket&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }

UnixLineSocket& UnixLineSocket::operator=(UnixLineSocket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
  }
  return *this;
}

UnixLineSocket::~UnixLineSocket() { close(); }

void UnixLineSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buf_.clear();
}

Result<UnixLineSocket> UnixLineSocket::connect(const std::string& path, std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return make_error(ErrorKind::Invalid, "socket path too long or empty: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return make_error(std::string("socket: ") + std::strerror(errno));
  UnixLineSocket s(fd);
  const auto deadline = Clock::now() + timeout;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    if (e == ENOENT) return make_error(ErrorKind::NotFound, path + ": no such socket");
    if (e == EACCES || e == EPERM) return make_error(ErrorKind::Permission, path + ": " + std::strerror(e));
    if (e == ECONNREFUSED) return make_error(ErrorKind::Unavailable, path + ": nobody is listening");
    if (e != EINPROGRESS && e != EAGAIN) return make_error(path + ": " + std::strerror(e));
    // A full listen backlog (EAGAIN on Unix sockets): wait for room, then retry once the socket is writable.
    for (;;) {
      auto w = wait_for(fd, POLLOUT, deadline);
      if (!w) return w.error();
      if (!*w) return make_error(ErrorKind::Unavailable, path + ": no answer to connect within the limit");
      if (e == EINPROGRESS) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) return make_error(ErrorKind::Unavailable, path + ": " + std::strerror(err));
        break;
      }
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 || errno == EISCONN) break;
      if (errno != EAGAIN) return make_error(ErrorKind::Unavailable, path + ": " + std::strerror(errno));
      if (Clock::now() >= deadline)
        return make_error(ErrorKind::Unavailable, path + ": no answer to connect within the limit");
    }
  }
  return s;
}

Result<bool> UnixLineSocket::write_all(const std::string& data, Clock::time_point deadline) {
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto w = wait_for(fd_, POLLOUT, deadline);
      if (!w) return w.error();
      if (!*w) return make_error(ErrorKind::Unavailable, "the peer is not reading");
      continue;
    }
    return make_error(std::string("closed: ") + std::strerror(errno));
  }
  return true;
}

Result<std::string> UnixLineSocket::read_line(Clock::time_point deadline, std::size_t max_line_bytes) {
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      if (nl > max_line_bytes) return make_error("a line longer than " + std::to_string(max_line_bytes) + " bytes");
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (buf_.size() > max_line_bytes)
      return make_error("a line longer than " + std::to_string(max_line_bytes) + " bytes");
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buf_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) return make_error("closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return make_error(std::string("closed: ") + std::strerror(errno));
    auto w = wait_for(fd_, POLLIN, deadline);
    if (!w) return w.error();
    if (!*w) return make_error(ErrorKind::Unavailable, "nothing heard before the deadline");
  }
}

}  // namespace gf::platform
