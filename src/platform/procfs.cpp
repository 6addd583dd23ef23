#include "platform/procfs.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>

#include <cctype>
#include <charconv>

#include "platform/fs.hpp"

namespace gf::platform {
namespace {

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Finds a run of 64 hex digits in s (a container id), or an empty view.
std::string_view find_hex64(std::string_view s) {
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (std::isxdigit(static_cast<unsigned char>(s[i]))) {
      if (++run == 64 && (i + 1 == s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1]))))
        return s.substr(i + 1 - 64, 64);
    } else {
      run = 0;
    }
  }
  return {};
}

std::optional<std::string> find_pod_uid(std::string_view line) {
  // ".../kubepods/burstable/pod<uid>/..." (cgroupfs) or "kubepods-burstable-pod<uid_with_underscores>.slice"
  std::size_t at = line.find("kubepods");
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t pod = line.find("pod", at + 8);
  while (pod != std::string_view::npos) {
    std::size_t b = pod + 3;
    std::size_t e = b;
    while (e < line.size() && (std::isxdigit(static_cast<unsigned char>(line[e])) || line[e] == '-' || line[e] == '_'))
      ++e;
    std::string uid(line.substr(b, e - b));
    for (char& c : uid)
      if (c == '_') c = '-';
    if (uid.size() == 36 && uid[8] == '-' && uid[13] == '-') return uid;
    pod = line.find("pod", pod + 3);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> parse_container_id(std::string_view text) {
  std::optional<std::string> container;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (auto uid = find_pod_uid(line)) return "k8s-pod:" + *uid;
    if (!container) {
      const std::string_view id = find_hex64(line);
      if (!id.empty() && is_hex(id)) container = std::string(id.substr(0, 12));
    }
  }
  return container;
}

std::vector<std::uint32_t> parse_nspid(std::string_view text) {
  std::vector<std::uint32_t> out;
  const std::size_t at = text.find("\nNSpid:");
  std::size_t p = at == std::string_view::npos ? (text.rfind("NSpid:", 0) == 0 ? 6 : std::string_view::npos) : at + 7;
  if (p == std::string_view::npos) return out;
  const std::size_t end = std::min(text.find('\n', p), text.size());
  while (p < end) {
    while (p < end && (text[p] == ' ' || text[p] == '\t')) ++p;
    if (p >= end) break;
    std::uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + p, text.data() + end, v);
    if (ec != std::errc()) return {};
    p = static_cast<std::size_t>(ptr - text.data());
    out.push_back(v);
  }
  return out;
}

std::optional<unsigned long long> parse_start_time(std::string_view stat) {
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::size_t p = close + 1;
  for (int field = 3; field < 22; ++field) {
    p = stat.find(' ', p + 1);
    if (p == std::string_view::npos) return std::nullopt;
  }
  unsigned long long v = 0;
  auto [ptr, ec] = std::from_chars(stat.data() + p + 1, stat.data() + stat.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<unsigned long long> ProcReader::start_time(std::uint32_t pid) const {
  auto stat = read_file(root_ + "/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return std::nullopt;
  return parse_start_time(*stat);
}

ProcHandle& ProcHandle::operator=(ProcHandle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

ProcHandle::~ProcHandle() {
  if (fd_ >= 0) ::close(fd_);
}

bool ProcHandle::alive() const { return fd_ >= 0 && ::faccessat(fd_, "stat", F_OK, 0) == 0; }

ProcHandle ProcReader::hold(std::uint32_t pid, unsigned long long start_time) const {
  const std::string dir = root_ + "/" + std::to_string(pid);
  ProcHandle h(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!h.valid()) return {};
  // The start time through the handle: the process the directory stands for, whatever the pid does now.
  const int fd = ::openat(h.fd_, "stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];  // field 22 is in the first few hundred bytes
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return {};
  const auto got = parse_start_time(std::string_view(buf, static_cast<std::size_t>(n)));
  if (!got || *got != start_time) return {};
  return h;
}

std::optional<ProcInfo> ProcReader::read(std::uint32_t pid) const {
  const std::string dir = root_ + "/" + std::to_string(pid);
  auto status = read_file(dir + "/status", 16384);
  if (!status) return std::nullopt;
  ProcInfo info;
  if (auto comm = read_line(dir + "/comm")) info.name = *comm;
  if (auto n = status->find("Uid:"); n != std::string::npos) {
    unsigned uid = 0;
    std::size_t p = n + 4;
    while (p < status->size() && ((*status)[p] == '\t' || (*status)[p] == ' ')) ++p;
    auto [ptr, ec] = std::from_chars(status->data() + p, status->data() + status->size(), uid);
    if (ec == std::errc()) {
      info.uid = uid;
      passwd pw{};
      passwd* res = nullptr;
      char buf[4096];
      if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) {
        info.user = res->pw_name;
      } else {
        info.user = std::to_string(uid);
      }
    }
  }
  info.nspid = parse_nspid(*status);
  if (auto cmd = read_file(dir + "/cmdline", 64 * 1024); cmd && !cmd->empty()) {
    while (!cmd->empty() && cmd->back() == '\0') cmd->pop_back();
    for (char& c : *cmd)
      if (c == '\0') c = ' ';
    info.command = std::move(*cmd);
  } else {
    info.command = "[" + info.name + "]";
  }
  if (auto cg = read_file(dir + "/cgroup", 64 * 1024)) info.container = parse_container_id(*cg);
  info.start_time_ticks = start_time(pid).value_or(0);
  return info;
}

bool ProcReader::in_child_pid_namespace() const {
  auto status = read_file(root_ + "/self/status", 16384);
  return status && parse_nspid(*status).size() > 1;
}

std::vector<std::uint32_t> ProcReader::pids() const {
  std::vector<std::uint32_t> out;
  for (const auto& n : list_dir(root_)) {
    std::uint32_t v = 0;
    auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (ec == std::errc() && ptr == n.data() + n.size()) out.push_back(v);
  }
  return out;
}

}  // namespace gf::platform
