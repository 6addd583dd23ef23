#pragma once
// Small filesystem helpers, stateless and thread-safe. Every reader of /proc or /sys takes its root as a parameter
// (tests point it at a fixture tree); these helpers never throw.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace gf::platform {

// Whole file contents (at most max_bytes), or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::string& path, std::size_t max_bytes = 1 << 20);
// First line without the trailing newline and surrounding blanks.
std::optional<std::string> read_line(const std::string& path);
// Integer content (decimal, or hex with 0x), or nullopt.
std::optional<long long> read_int(const std::string& path);
// Names in a directory (no "." or ".."), sorted; empty when it cannot be read.
std::vector<std::string> list_dir(const std::string& path);
// Target of a symbolic link, or nullopt.
std::optional<std::string> read_link(const std::string& path);
bool exists(const std::string& path);

// root + absolute path, with no doubled slash ("" or "/" as root means the real root).
std::string under_root(const std::string& root, const std::string& abs_path);

// The directories of `path` that are missing, created with `mode` (0700 for the agent's private
// directories); directories that exist are left as they are. An error names the one that failed.
Result<void> make_dirs(const std::string& path, unsigned mode);

// `bytes` bytes from the kernel's random source, as hex (shorter when the source fails).
std::string random_hex(std::size_t bytes);

// Writes `content` to `path` atomically without ever following a link planted by someone else: the
// bytes go to a new file with a random name in path's directory (O_CREAT|O_EXCL|O_NOFOLLOW, `mode`),
// which is then renamed onto `path` (rename replaces a link itself, never its target). Errors name the file.
Result<void> write_file_atomic(const std::string& path, std::string_view content, unsigned mode = 0644);

// How much a token file is trusted (read_token_file).
struct TokenFileRules {
  // Follow a symbolic link at `path`. Off for the agent's own tokens (whoever can plant a link decides
  // what is read); on for a secret mounted by Kubernetes, which is a link into a root-owned directory.
  bool follow_links = false;
  // Accept a file root owns besides one this process's euid owns (a mounted secret read by a non-root
  // process).
  bool root_may_own = false;
};

struct TokenFile {
  std::string token;                // the first line, without its line end and trailing blanks
  bool readable_by_others = false;  // the group or others may read it
};

// A bearer token from an existing file, trusting the file only for what it is: a regular file owned by
// this process's euid (or root, when the rules allow) that neither its group nor others may write, since
// whoever can write it chooses the token. An empty first line is an error; errors are one line naming
// the file (ErrorKind::Permission for a file refused for its kind, owner or mode).
Result<TokenFile> read_token_file(const std::string& path, TokenFileRules rules = {});

// Environment variable, or nullopt when unset or empty.
std::optional<std::string> env(const char* name);

}  // namespace gf::platform
