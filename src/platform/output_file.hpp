#pragma once
// A file the user named for output (`gpufleet monitor --output FILE`), opened the way a shell's `>`
// opens it, but safe when the caller is root and FILE sits where someone else can write: the last
// component is never a link that is followed (O_NOFOLLOW), and an existing file is written only when it
// is a regular file of ours (or root's) with no other hard link, or a FIFO or character device of ours
// or root's (/dev/null, a terminal). A new file is created with `mode` less the umask. Opening never
// blocks: a FIFO without a reader is an error. /dev/stdout, /dev/stderr and /dev/fd/N name streams the
// caller already holds: they are written through a duplicate of that descriptor, never truncated.
// Errors name the file.
// Thread-compatible: one thread uses an OutputFile at a time.
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace gf::platform {

class OutputFile {
 public:
  static Result<OutputFile> open(const std::string& path, unsigned mode = 0644);
  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  // Writes `content` as the file's whole contents (a regular file is truncated first).
  Result<void> write(std::string_view content);
  const std::string& path() const noexcept { return path_; }

 private:
  OutputFile(int fd, std::string path, bool regular) : fd_(fd), path_(std::move(path)), regular_(regular) {}
  int fd_ = -1;
  std::string path_;
  bool regular_ = false;
};

}  // namespace gf::platform
