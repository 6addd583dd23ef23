#include "platform/fs.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/text.hpp"

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
  return std::string(core::trim(*s));
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

Result<void> make_dirs(const std::string& path, unsigned mode) {
  if (path.empty()) return {};
  // Walk down from the root so that only the components we create get `mode`.
  for (std::size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    if (end == std::string::npos && prefix.empty()) break;
    if (::mkdir(prefix.c_str(), static_cast<mode_t>(mode)) == 0) {
      // mkdir applies the umask; the mode asked for is the one we want whatever the umask.
      (void)::chmod(prefix.c_str(), static_cast<mode_t>(mode));
    } else if (errno == EEXIST) {
      struct stat st {};
      if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return make_error(ErrorKind::Failed, "cannot create the directory " + prefix + ": something else is there");
    } else {
      return make_error(ErrorKind::Failed, "cannot create the directory " + prefix + ": " + std::strerror(errno));
    }
    if (end == std::string::npos) break;
  }
  return {};
}

std::string random_hex(std::size_t bytes) {
  std::string buf(bytes, '\0');
  std::size_t got = 0;
  while (got < bytes) {
    const auto n = ::getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < got; ++i) {
    const auto b = static_cast<unsigned char>(buf[i]);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

namespace {

std::string random_suffix() { return random_hex(8); }

}  // namespace

Result<void> write_file_atomic(const std::string& path, std::string_view content, unsigned mode) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return make_error(ErrorKind::Invalid, "cannot write " + path + ": it names a directory");
  std::string tmp;
  int fd = -1;
  // A name nobody can guess, created exclusively: a planted file or link at that name is never opened.
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = dir + "/." + base + "." + random_suffix() + ".tmp";
    fd =
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, static_cast<mode_t>(mode));
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return make_error(ErrorKind::Failed, "cannot write " + path + ": " + std::strerror(errno));
  (void)::fchmod(fd, static_cast<mode_t>(mode));  // the mode asked for, whatever the umask
  std::size_t off = 0;
  bool ok = true;
  while (off < content.size()) {
    const auto n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  const int saved = errno;
  if (::close(fd) != 0) ok = false;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    (void)::unlink(tmp.c_str());
    return make_error(ErrorKind::Failed, "cannot write " + path + ": " + why);
  }
  return {};
}

Result<TokenFile> read_token_file(const std::string& path, TokenFileRules rules) {
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (rules.follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ELOOP && !rules.follow_links)
      return make_error(ErrorKind::Permission, "the token file " + path + " is a symbolic link: refusing it");
    return make_error("cannot read the token file " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0)
    problem = std::string("cannot read it: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "it is not a regular file";
  else if (st.st_uid != ::geteuid() && !(rules.root_may_own && st.st_uid == 0))
    problem = "it is owned by uid " + std::to_string(st.st_uid) + ", not by this process's uid " +
              std::to_string(::geteuid()) + (rules.root_may_own ? " or root" : "");
  else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    problem = fmt::format("it is writable by others (mode {:04o})", st.st_mode & 07777);
  if (!problem.empty()) {
    ::close(fd);
    return make_error(ErrorKind::Permission, "the token file " + path + ": " + problem + ": refusing it");
  }
  char buf[4096];
  std::string text;
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return make_error("cannot read the token file " + path + ": " + std::strerror(err));
    }
    if (n == 0 || text.size() > 64 * 1024) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t')) text.pop_back();
  std::size_t lead = 0;
  while (lead < text.size() && (text[lead] == ' ' || text[lead] == '\t')) ++lead;
  text.erase(0, lead);
  if (text.empty()) return make_error(ErrorKind::Invalid, "the token file " + path + " is empty");
  TokenFile out;
  out.token = std::move(text);
  out.readable_by_others = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
  return out;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace gf::platform
