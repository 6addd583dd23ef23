#pragma once
// Request checks that need no socket: the bearer token, the WebSocket Origin, static file paths.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace gf::server {

// Whether an Authorization header carries exactly "Bearer <token>" (compared in constant time).
bool bearer_ok(std::string_view authorization, std::string_view token);

// The read rule, when reads need a token (--auth-read): the agent's token reads, and so does the
// read-only token when one is set; an empty token never does. `offers(t)`: the request carries t.
// The one rule for HTTP reads (decide()), /ws, Socket.IO's handshake and its CONNECT.
template <class Offers>
bool reads_with(std::string_view token, std::string_view read_token, Offers offers) {
  return (!token.empty() && offers(token)) || (!read_token.empty() && offers(read_token));
}

// The two tokens of the read rule, kept by a server.
struct ReadTokens {
  std::string token;
  std::string read_token;
  template <class Offers>
  bool reads(Offers offers) const {
    return reads_with(token, read_token, offers);
  }
  // A token as given (a Socket.IO CONNECT's auth {token}, ?token=).
  bool token_reads(std::string_view t) const {
    const std::string bearer = "Bearer " + std::string(t);
    return reads([&](std::string_view good) { return bearer_ok(bearer, good); });
  }
};

// Where the agent's token comes from: $GPUFLEET_TOKEN, else the file (created with a new random token,
// mode 0600, when it does not exist; *created tells the caller to print it once).
Result<std::string> load_or_create_token(const std::string& path, bool* created);
// The same from the file alone (the read-only token: $GPUFLEET_TOKEN is the admin's).
Result<std::string> load_or_create_token_file(const std::string& path, bool* created);
std::string random_token();  // 32 bytes from the kernel's random source, hex

// A browser's Origin header against where we listen: allowed when it names this host and port
// (127.0.0.1, localhost and [::1] are the same host for a loopback listener) or one of `extra`.
// An absent Origin (not a browser) is allowed.
bool origin_allowed(std::string_view origin, std::string_view listen_host, unsigned short port,
                    const std::vector<std::string>& extra);

// Whether a request's Host header names this agent (the DNS-rebinding check). The port part is
// ignored. Allowed: IP literals (a rebinding attack needs a DNS name), "localhost" and "*.localhost"
// (RFC 6761: they never leave the machine), and `names` (the machine's hostname, names from the config;
// case-insensitive, a trailing dot ignored). An empty Host is not allowed (the caller decides what an
// absent one means for its HTTP version).
bool host_allowed(std::string_view host_header, const std::vector<std::string>& names);
// The names this machine answers to by default: its hostname and the dotted names /etc/hosts gives it
// (the FQDN, usually); lower case. No DNS query.
std::vector<std::string> machine_host_names();

// The address a client's sessions are counted under: all of 127.0.0.0/8 and ::1 are one ("loopback":
// any local user may bind any of them), an IPv6 address counts by its /64 (one host usually holds a
// whole /64), an IPv4 address is itself; anything that is no address is itself too.
std::string client_bucket(std::string_view address);

// The file a URL path names inside root, or nullopt when it does not exist or would escape root
// ("..", symlinks out, NUL). "/" and directories mean their index.html.
std::optional<std::filesystem::path> resolve_static(const std::filesystem::path& root, std::string_view url_path);
std::string_view content_type_for(const std::filesystem::path& p);

}  // namespace gf::server
