#include "platform/kmsg.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace gf::platform {

Result<KmsgReader> KmsgReader::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int e = errno;
    const ErrorKind kind = e == EACCES || e == EPERM ? ErrorKind::Permission
                           : e == ENOENT             ? ErrorKind::NotFound
                                                     : ErrorKind::Failed;
    return make_error(kind, path + ": " + std::strerror(e));
  }
  struct stat st {};
  const bool records = ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode);
  // /dev/kmsg and plain files move to their end; a FIFO cannot seek and has no past to skip anyway.
  (void)::lseek(fd, 0, SEEK_END);
  return KmsgReader(fd, records, path);
}

KmsgReader::KmsgReader(KmsgReader&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      records_(other.records_),
      path_(std::move(other.path_)),
      partial_(std::move(other.partial_)),
      cutting_(other.cutting_),
      lost_(other.lost_) {}

KmsgReader& KmsgReader::operator=(KmsgReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    records_ = other.records_;
    path_ = std::move(other.path_);
    partial_ = std::move(other.partial_);
    cutting_ = other.cutting_;
    lost_ = other.lost_;
  }
  return *this;
}

KmsgReader::~KmsgReader() {
  if (fd_ >= 0) ::close(fd_);
}

void KmsgReader::take_bytes(std::string_view bytes, const std::function<void(std::string_view)>& on_line,
                            std::size_t& lines) {
  while (!bytes.empty()) {
    const auto nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (!cutting_) {
      const std::size_t room = kMaxLine - partial_.size();
      partial_.append(piece.substr(0, room));
      if (piece.size() > room) cutting_ = true;
    }
    if (nl == std::string_view::npos) return;  // the line goes on in the next read
    on_line(partial_);
    ++lines;
    partial_.clear();
    cutting_ = false;
    bytes.remove_prefix(nl + 1);
  }
}

std::size_t KmsgReader::poll(const std::function<void(std::string_view)>& on_line) {
  if (fd_ < 0) return 0;
  // /dev/kmsg wants room for a whole record in one read (else EINVAL); 8 KiB holds the largest.
  std::array<char, 8192> buf{};
  std::size_t lines = 0;
  std::size_t total = 0;
  while (total < kMaxBytesPerPoll) {
    const ssize_t n = ::read(fd_, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE) {  // the kernel overwrote records we had not read: go on with the next
        ++lost_;
        continue;
      }
      break;  // EAGAIN: nothing more now; anything else: try again at the next poll
    }
    if (n == 0) break;  // a plain file's end
    total += static_cast<std::size_t>(n);
    std::string_view got(buf.data(), static_cast<std::size_t>(n));
    if (!records_) {
      take_bytes(got, on_line, lines);
      continue;
    }
    // "prio,seq,usec,flags[,…];message\n" then " KEY=value\n" lines: the message only. The kernel
    // writes the message's own control bytes as \xNN, so it holds no newline.
    const auto semi = got.find(';');
    if (semi == std::string_view::npos) continue;
    std::string_view message = got.substr(semi + 1);
    message = message.substr(0, message.find('\n'));
    on_line(message.substr(0, kMaxLine));
    ++lines;
  }
  return lines;
}

}  // namespace gf::platform
