#pragma once
// A cross-process "something changed" signal through a file: notify() rewrites the file, and
// wait() sleeps until some process does (inotify on its directory) or the timeout passes.
// One ChangeSignal per thread that waits; notify() may be called from anywhere.
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
  std::string name_;
  int inotify_fd_ = -1;
};

}  // namespace gf::platform
