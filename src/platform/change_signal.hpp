#pragma once
// A cross-process "something changed" signal through a file: notify() rewrites the file, and
// wait() sleeps until some process does (inotify on its directory) or the timeout passes.
// One ChangeSignal per thread that waits; notify() may be called from anywhere.
// notify() writes only a regular file owned by our euid, reached without following links (created 0644
// when missing); a marker someone else planted is left alone and logged once.
#include <atomic>
#include <chrono>
#include <string>

namespace gf::platform {

class ChangeSignal {
 public:
  explicit ChangeSignal(std::string path);
  ~ChangeSignal();
  ChangeSignal(const ChangeSignal&) = delete;
  ChangeSignal& operator=(const ChangeSignal&) = delete;

  void notify() const;
  // True when woken by a notify (from any process) before the timeout.
  bool wait(std::chrono::milliseconds timeout);

 private:
  std::string path_;
  std::string dir_;
  std::string name_;
  mutable std::atomic<bool> warned_{false};
  int inotify_fd_ = -1;
};

}  // namespace gf::platform
