#pragma once
// The agent's config file (`gpufleet serve --config`, JSON) to structs: every key checked, every error
// naming the file and the key and the expected form. Nothing here opens the file or knows the server:
// what the file says of the HTTP server, the WebSocket hub and the history's retention is kept as said
// (optional fields), and app/serve_config lays it over those rooms' own defaults.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/alerts.hpp"
#include "core/reclaim.hpp"
#include "core/result.hpp"

namespace gf::config {

inline constexpr std::uint64_t kMaxJobsPerUser = 100000000;
inline constexpr std::chrono::seconds kMaxJobRetention = std::chrono::days(36500);  // a century; 0 is "for ever"

// "listen" and the "limits", "websocket", "allowed_origins" and "allowed_hosts" keys: what the file said
// of the HTTP server (server::ServerOptions has the defaults). The lists add to what is there.
struct ServerSettings {
  std::optional<std::string> host;
  std::optional<unsigned short> port;
  std::optional<bool> auth_read;
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;
  std::optional<std::size_t> header_limit;  // limits.max_header_bytes
  std::optional<std::size_t> body_limit;    // limits.max_body_bytes
  std::optional<std::chrono::milliseconds> request_timeout;
  std::optional<std::chrono::milliseconds> header_timeout;
  std::optional<std::chrono::milliseconds> keep_alive_timeout;
  std::optional<std::size_t> max_connections;
  std::optional<std::size_t> max_connections_per_address;
  std::optional<std::size_t> ws_queue;                        // websocket.queue
  std::optional<std::chrono::milliseconds> ws_stall_timeout;  // websocket.stall_timeout_s
};

// "websocket": {"max_clients", "default_period_ms", "socketio_sessions_per_address"} (server::WsOptions has
// the defaults).
struct WsSettings {
  std::optional<std::size_t> max_clients;
  std::optional<std::chrono::milliseconds> default_period;
  std::optional<std::size_t> sio_sessions_per_address;  // websocket.socketio_sessions_per_address
};

// "history": {"raw_retention", "minute_retention", "hour_retention"} (store::HistoryOptions has the defaults).
struct HistoryRetention {
  std::optional<std::chrono::seconds> raw;
  std::optional<std::chrono::seconds> minute;
  std::optional<std::chrono::seconds> hour;
};

// The settings of `gpufleet serve`, with their defaults; the command line changes them after the file.
struct ServeSettings {
  std::chrono::milliseconds interval{1000};
  std::string node_name;
  std::string static_dir;
  std::string db;
  std::string token_file;
  std::string read_token_file;  // with auth_read: the readers' token (reads only); empty: none
  bool history = true;
  std::vector<core::AlertRule> alert_rules = core::default_alert_rules();
  // Accounting and idle-lease reclaim (config keys "usage" and "reclaim"; reclaim is off by default).
  unsigned busy_threshold_pct = 5;
  core::ReclaimOptions reclaim;
  // The agent socket (docs/agent-socket.md): empty path: the default for the agent's user; "none": no
  // socket. Priorities above max_user_priority need root or a member of admin_group; a user holds at
  // most max_gpus_per_user GPUs at once (0: no quota).
  std::string socket;
  int max_user_priority = 0;
  std::string admin_group;
  unsigned max_gpus_per_user = 0;
  // Job records (issue 20, finding 4): how many one non-admin uid keeps (0: no cap) and how long a
  // finished one is kept after it was last written (0: for ever). 90 days, as the history's hourly
  // rollups: a run's record and the GPU history around it age out together, and a quarter's runs stay
  // for reports on it.
  std::uint64_t max_jobs_per_user = 10000;
  std::chrono::seconds job_retention = std::chrono::days(90);
  // "jobs": {"submit": true, "max_in_flight": N}: POST /api/v1/jobs runs Docker-image jobs (off by default:
  // a job is as powerful as the Docker socket, root on the node).
  bool jobs_submit = false;
  std::size_t jobs_max_in_flight = 16;
  // What the file said of the other rooms' options.
  ServerSettings http;
  WsSettings websocket;
  HistoryRetention history_retention;
};

// The file's JSON over `base`: keys given replace base's, lists add to them. `source` names the file in
// errors ("/etc/gpufleet.json: 'max_gpus_per_user' must be an integer from 0 (no quota) to 1024").
Result<ServeSettings> serve_settings_from_json(const std::string& text, const std::string& source,
                                               ServeSettings base = {});

// "127.0.0.1:9401", "[::1]:9401", "0.0.0.0:80", ":9401" (all interfaces is NOT implied: ":" means 127.0.0.1).
Result<std::pair<std::string, unsigned short>> parse_listen(const std::string& text);
// The collection interval from seconds (0.05 to 3600); `where` names the key or option in the error.
Result<std::chrono::milliseconds> interval_from_seconds(double s, const std::string& where);

}  // namespace gf::config
