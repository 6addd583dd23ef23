#include "backends/drm/proc_scan.hpp"

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "backends/drm/fdinfo.hpp"
#include "platform/fs.hpp"
#include "platform/procfs.hpp"

namespace gf::backends::drm {
namespace {

// DRM fdinfo is well under 2 KiB; the cap bounds what a strange file (an epoll fd's fdinfo lists
// every watched fd) costs us.
constexpr std::size_t kMaxFdinfoBytes = 16 * 1024;

// Whether fd may be a DRM device, judged by its /proc/<pid>/fd/<fd> link. Sockets, pipes and
// anonymous inodes ("socket:[123]", "anon_inode:[eventfd]") are most of a process's fds; a
// readlink() rules them out for one syscall instead of open+read+close of their fdinfo. Anything
// with a path is read: a device node in a container's own /dev may not be named /dev/dri/... from
// our mount namespace. Without a link (fixtures, races) we read the fdinfo to be safe.
bool may_be_drm(const std::string& fd_link_path) {
  const auto target = platform::read_link(fd_link_path);
  return !target || target->empty() || target->front() == '/';
}

}  // namespace

DrmScan scan_drm_clients(const std::string& proc_root, std::vector<std::string> drivers) {
  namespace fs = std::filesystem;
  DrmScan scan{DrmClientTally(std::move(drivers)), 0};
  const platform::ProcReader proc(proc_root);
  for (const std::uint32_t pid : proc.pids()) {
    const std::string pid_dir = proc_root + "/" + std::to_string(pid);
    std::error_code ec;
    fs::directory_iterator it(pid_dir + "/fdinfo", ec);
    if (ec) {
      // ENOENT: the process exited since the listing, which is no loss of visibility.
      if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted) ++scan.unreadable_pids;
      continue;
    }
    std::vector<std::string> fds;
    for (const fs::directory_iterator end; it != end; it.increment(ec)) {
      if (ec) break;  // the process exited mid-listing
      fds.push_back(it->path().filename().string());
    }
    // Numeric order, so that the first fd of a client (whose record wins) does not depend on the
    // directory's hash order.
    std::sort(fds.begin(), fds.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    for (const std::string& fd : fds) {
      if (!may_be_drm(pid_dir + "/fd/" + fd)) continue;
      // A read that fails (fd closed meanwhile, permission) is skipped: nothing to attribute.
      const auto text = platform::read_file(pid_dir + "/fdinfo/" + fd, kMaxFdinfoBytes);
      if (!text) continue;
      if (const auto info = parse_drm_fdinfo(*text)) scan.tally.add(pid, *info);
    }
  }
  return scan;
}

void note_visibility(const DrmScan& scan, core::Snapshot& s) {
  std::string why;
  if (scan.unreadable_pids > 0)
    why = fmt::format("the open files of {} processes could not be read (permission); their GPU use is not shown",
                      scan.unreadable_pids);
  if (scan.tally.dropped() > 0) {
    if (!why.empty()) why += "; ";
    why += fmt::format("{} DRM clients past the first {} were not counted", scan.tally.dropped(),
                       scan.tally.max_clients());
  }
  if (why.empty()) return;
  s.process_visibility.complete = false;
  s.process_visibility.message = std::move(why);
}

}  // namespace gf::backends::drm
