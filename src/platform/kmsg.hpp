#pragma once
// Reading the kernel log as it grows, without ever blocking: /dev/kmsg (one record per read(2)), or
// for tests a plain file or FIFO that someone appends lines to.
//
// It starts at the end: only what is logged after open() is read (the records already in the ring
// buffer are from before the reader existed, so a restarted agent does not see an old XID again).
// poll() reads what is new and hands over each message line; a message longer than kMaxLine is cut
// to its first kMaxLine bytes. One poll reads at most kMaxBytesPerPoll, so a flooded log costs one
// poll a bounded time and the rest waits for the next. Memory is one buffer of kMaxLine plus one
// read buffer, whatever the log holds.
//
// /dev/kmsg is readable by root (or CAP_SYSLOG; everyone where kernel.dmesg_restrict=0): open()
// answers ErrorKind::Permission otherwise, NotFound where there is no such file (a container).
//
// Thread-safety: none; one owner calls poll().
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "core/result.hpp"

namespace gf::platform {

class KmsgReader {
 public:
  static constexpr std::size_t kMaxLine = 4096;
  static constexpr std::size_t kMaxBytesPerPoll = 1 << 20;

  // Opens `path` non-blocking and moves to its end.
  static Result<KmsgReader> open(const std::string& path);

  KmsgReader(KmsgReader&& other) noexcept;
  KmsgReader& operator=(KmsgReader&& other) noexcept;
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;
  ~KmsgReader();

  // Calls on_line with each message line logged since the last poll (a /dev/kmsg record's message,
  // without its "prio,seq,time,flags;" header and continuation lines). Returns how many lines it
  // handed over. Records the kernel overwrote before we read them are skipped (counted in lost()).
  std::size_t poll(const std::function<void(std::string_view)>& on_line);

  // Times the kernel said records were overwritten before we read them.
  std::size_t lost() const noexcept { return lost_; }
  const std::string& path() const noexcept { return path_; }

 private:
  KmsgReader(int fd, bool records, std::string path) : fd_(fd), records_(records), path_(std::move(path)) {}
  void take_bytes(std::string_view bytes, const std::function<void(std::string_view)>& on_line, std::size_t& lines);

  int fd_ = -1;
  bool records_ = false;  // a character device (/dev/kmsg): one record per read
  std::string path_;
  std::string partial_;   // a line not yet ended (plain files), at most kMaxLine bytes
  bool cutting_ = false;  // partial_ is full: drop the rest of this line
  std::size_t lost_ = 0;
};

}  // namespace gf::platform
