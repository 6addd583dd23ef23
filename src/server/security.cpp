#include "server/security.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/text.hpp"
#include "platform/fs.hpp"

namespace gf::server {

bool bearer_ok(std::string_view authorization, std::string_view token) {
  constexpr std::string_view kScheme = "Bearer ";
  if (token.empty() || authorization.size() != kScheme.size() + token.size()) return false;
  // The scheme is case-insensitive (RFC 7235); the token is compared without an early exit.
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    char w = kScheme[i];
    if (w >= 'A' && w <= 'Z') w = static_cast<char>(w - 'A' + 'a');
    if (c != w) return false;
  }
  unsigned char diff = 0;
  for (std::size_t i = 0; i < token.size(); ++i)
    diff |= static_cast<unsigned char>(authorization[kScheme.size() + i] ^ token[i]);
  return diff == 0;
}

std::string random_token() { return platform::random_hex(32); }

namespace {

// Reads the token from an existing file, trusting it only for what it is: a regular file (no link
// followed) owned by our euid and writable by nobody else, since whoever can write it can log in.
Result<std::string> read_token_file(const std::string& path) {
  auto t = platform::read_token_file(path);
  if (!t) return t.error();
  return std::move(t->token);
}

}  // namespace

Result<std::string> load_or_create_token(const std::string& path, bool* created) {
  if (created) *created = false;
  if (auto env = platform::env("GPUFLEET_TOKEN"); env && !env->empty()) return *env;
  return load_or_create_token_file(path, created);
}

Result<std::string> load_or_create_token_file(const std::string& path, bool* created) {
  if (created) *created = false;
  // Create first (O_EXCL never opens what is there, a link included); only when something exists do
  // we read it, so a dangling link or an unreadable file is an error rather than a retry.
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty())
    if (auto made = platform::make_dirs(dir.string(), 0700); !made) return made.error();
  const std::string token = random_token();
  if (token.size() != 64) return make_error("cannot read random bytes for a token");
  // The token is written in full to a private temporary name and then linked to its place: link()
  // never replaces what is there (two agents starting at once keep the first token), and a second
  // agent never reads a file that is created but not yet written (which it would call empty).
  const std::string tmp = path + ".tmp-" + platform::random_hex(8);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("cannot create the token file " + path + ": " + std::strerror(errno));
  (void)::fchmod(fd, 0600);
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    return make_error("cannot write the token file " + path);
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (link_errno == EEXIST) return read_token_file(path);
    return make_error("cannot create the token file " + path + ": " + std::strerror(link_errno));
  }
  if (created) *created = true;
  return token;
}

namespace {

using core::lower;

bool is_loopback(std::string_view host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "::1";
}

// The host part of a Host header ("name", "name:port", "1.2.3.4:80", "[::1]:80"), lower case, a
// trailing dot dropped; nullopt when the shape is wrong (a bad port, an unclosed bracket, a space).
std::optional<std::string> host_part(std::string_view h) {
  if (h.empty()) return std::nullopt;
  std::string_view host = h;
  std::string_view port;
  if (h.front() == '[') {
    const auto close = h.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = h.substr(0, close + 1);
    const auto rest = h.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (const auto colon = h.find(':'); colon != std::string_view::npos) {
    host = h.substr(0, colon);
    port = h.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  }
  if (port.size() > 5) return std::nullopt;
  for (char c : port)
    if (c < '0' || c > '9') return std::nullopt;
  for (char c : host)
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '@' || c == '\\' || c == 127) return std::nullopt;
  std::string out = lower(host);
  if (out.size() > 1 && out.back() == '.' && out.front() != '[') out.pop_back();
  if (out.empty()) return std::nullopt;
  return out;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    const std::string inner = host.substr(1, host.size() - 2);
    return ::inet_pton(AF_INET6, inner.c_str(), buf) == 1;
  }
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1;  // dotted quad only: no locale, no octal forms
}

}  // namespace

bool host_allowed(std::string_view host_header, const std::vector<std::string>& names) {
  const auto host = host_part(host_header);
  if (!host) return false;
  if (is_ip_literal(*host)) return true;
  constexpr std::string_view kLocal = ".localhost";
  if (*host == "localhost" ||
      (host->size() > kLocal.size() && host->compare(host->size() - kLocal.size(), kLocal.size(), kLocal) == 0))
    return true;
  for (const auto& n : names) {
    std::string want = lower(n);
    if (want.size() > 1 && want.back() == '.') want.pop_back();
    if (!want.empty() && want == *host) return true;
  }
  return false;
}

std::vector<std::string> machine_host_names() {
  std::vector<std::string> out;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return out;
  out.push_back(lower(name));
  // The FQDN from /etc/hosts only (a line that names the hostname): a resolver query could wait on
  // DNS at every start.
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string> words;
    std::istringstream ws(line);
    for (std::string w; ws >> w;) words.push_back(lower(w));
    if (words.size() < 2 || std::find(words.begin() + 1, words.end(), out.front()) == words.end()) continue;
    for (auto it = words.begin() + 1; it != words.end(); ++it)
      if (it->find('.') != std::string::npos && std::find(out.begin(), out.end(), *it) == out.end()) out.push_back(*it);
  }
  return out;
}

bool origin_allowed(std::string_view origin, std::string_view listen_host, unsigned short port,
                    const std::vector<std::string>& extra) {
  if (origin.empty()) return true;
  const std::string o = lower(origin);
  for (const auto& e : extra)
    if (lower(e) == o) return true;
  // scheme://host[:port]
  const auto scheme_end = o.find("://");
  if (scheme_end == std::string::npos) return false;
  const std::string scheme = o.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return false;
  std::string_view hostport = std::string_view(o).substr(scheme_end + 3);
  if (hostport.find('/') != std::string_view::npos) return false;
  std::string_view host = hostport;
  unsigned origin_port = scheme == "https" ? 443 : 80;
  const auto colon = hostport.rfind(':');
  const auto bracket = hostport.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    host = hostport.substr(0, colon);
    const auto p = hostport.substr(colon + 1);
    if (p.empty() || p.size() > 5) return false;
    origin_port = 0;
    for (char c : p) {
      if (c < '0' || c > '9') return false;
      origin_port = origin_port * 10 + static_cast<unsigned>(c - '0');
    }
  }
  if (origin_port != port) return false;
  const std::string lh = lower(listen_host);
  if (host == lh) return true;
  if (is_loopback(lh) && is_loopback(host)) return true;
  return false;
}

std::optional<std::filesystem::path> resolve_static(const std::filesystem::path& root, std::string_view url_path) {
  namespace fs = std::filesystem;
  if (url_path.empty() || url_path.front() != '/') return std::nullopt;
  if (url_path.find('\0') != std::string_view::npos || url_path.find('\\') != std::string_view::npos)
    return std::nullopt;
  // No segment may be "..", whatever the file system would make of it.
  std::string_view rest = url_path.substr(1);
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const auto seg = rest.substr(0, slash);
    if (seg == "..") return std::nullopt;
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  std::error_code ec;
  const fs::path real_root = fs::canonical(root, ec);
  if (ec) return std::nullopt;
  fs::path p = real_root / fs::path(std::string(url_path.substr(1)));
  if (fs::is_directory(p, ec)) p /= "index.html";
  const fs::path real = fs::canonical(p, ec);  // resolves symlinks: the target must stay inside root
  if (ec || !fs::is_regular_file(real, ec)) return std::nullopt;
  const auto& rs = real_root.native();
  const auto& fsn = real.native();
  if (fsn.size() <= rs.size() || fsn.compare(0, rs.size(), rs) != 0 || fsn[rs.size()] != '/') return std::nullopt;
  return real;
}

std::string_view content_type_for(const std::filesystem::path& p) {
  const std::string ext = lower(p.extension().string());
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".woff2") return "font/woff2";
  if (ext == ".txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

std::string client_bucket(std::string_view address) {
  std::string a(address);
  in_addr v4{};
  if (::inet_pton(AF_INET, a.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127 ? "loopback" : a;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, a.c_str(), &v6) != 1) return a;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return "loopback";
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &v6.s6_addr[12], text, sizeof text);
    return client_bucket(text);
  }
  for (int i = 8; i < 16; ++i) v6.s6_addr[i] = 0;
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, &v6, text, sizeof text);
  return std::string(text) + "/64";
}

}  // namespace gf::server
