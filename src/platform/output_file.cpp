#include "platform/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "platform/users.hpp"

namespace gf::platform {

namespace {

// The descriptor a name for an already open stream stands for ("/dev/stdout", "/dev/fd/3"), or -1.
// Those names are links (to /proc/self/fd/N), which O_NOFOLLOW would refuse; they name what the caller's
// shell opened for it, so they are used as they are, by a duplicate of the descriptor.
int inherited_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  constexpr std::string_view fd_dir = "/dev/fd/";
  if (!path.starts_with(fd_dir) || path.size() == fd_dir.size() || path.size() > fd_dir.size() + 4) return -1;
  int n = 0;
  for (const char c : std::string_view(path).substr(fd_dir.size())) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

Result<OutputFile> OutputFile::open(const std::string& path, unsigned mode) {
  if (path.empty()) return make_error(ErrorKind::Invalid, "no output file named");
  if (const int inherited = inherited_descriptor(path); inherited >= 0) {
    const int fd = ::fcntl(inherited, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) return make_error(ErrorKind::Failed, "cannot write " + path + ": " + std::strerror(errno));
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
      ::close(fd);
      return make_error(ErrorKind::Failed, "cannot write " + path + ": not open for writing");
    }
    return OutputFile(fd, path, false);  // written as a stream: never truncated (the shell may have said >>)
  }
  // No O_TRUNC: nothing is changed before the file is known to be one we may write. O_NONBLOCK: a
  // FIFO planted there would otherwise hold the open until someone reads it.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                        static_cast<mode_t>(mode));
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP)
      return make_error(ErrorKind::Permission,
                        path + " is a symbolic link: not writing through it (name the file it points to)");
    if (e == ENXIO) return make_error(ErrorKind::Failed, "cannot write " + path + ": a FIFO that nobody reads");
    return make_error(ErrorKind::Failed, "cannot write " + path + ": " + std::strerror(e));
  }
  auto refuse = [&](const std::string& why) -> Result<OutputFile> {
    ::close(fd);
    return make_error(ErrorKind::Permission, path + " " + why + ": not writing to it");
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorKind::Failed, "cannot write " + path + ": " + std::strerror(e));
  }
  const bool regular = S_ISREG(st.st_mode);
  if (!regular && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) return refuse("is not a regular file");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return refuse("is owned by " + user_name(st.st_uid) + " (uid " + std::to_string(st.st_uid) + ")");
  // A second name for the same file is how a link to a file we own would be planted where links are
  // not followed.
  if (regular && st.st_nlink > 1) return refuse("has other hard links");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorKind::Failed, "cannot write " + path + ": " + std::strerror(e));
  }
  return OutputFile(fd, path, regular);
}

OutputFile::OutputFile(OutputFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), regular_(o.regular_) {}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    regular_ = o.regular_;
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<void> OutputFile::write(std::string_view content) {
  if (fd_ < 0) return make_error(ErrorKind::Failed, "cannot write " + path_ + ": not open");
  if (regular_ && (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0))
    return make_error(ErrorKind::Failed, "cannot write " + path_ + ": " + std::strerror(errno));
  std::size_t off = 0;
  while (off < content.size()) {
    const ssize_t n = ::write(fd_, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorKind::Failed, "cannot write " + path_ + ": " + std::strerror(errno));
    off += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace gf::platform
