#include "platform/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace gf::platform {

std::optional<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes - out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::optional<std::string> read_line(const std::string& path) {
  auto s = read_file(path, 4096);
  if (!s) return std::nullopt;
  const auto nl = s->find('\n');
  if (nl != std::string::npos) s->resize(nl);
  const auto b = s->find_first_not_of(" \t\r");
  if (b == std::string::npos) return std::string();
  const auto e = s->find_last_not_of(" \t\r");
  return s->substr(b, e - b + 1);
}

std::optional<long long> read_int(const std::string& path) {
  auto s = read_line(path);
  if (!s || s->empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s->c_str(), &end, 0);
  if (errno != 0 || end == s->c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> read_link(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string under_root(const std::string& root, const std::string& abs_path) {
  if (root.empty() || root == "/") return abs_path;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (!abs_path.empty() && abs_path.front() == '/') return r + abs_path;
  return r + "/" + abs_path;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace gf::platform
