#pragma once
// The agent's settings: built-in defaults, then the config file (--config, JSON, read by
// config::serve_settings_from_json), then the command line. Every error names the key (or option) and the
// expected form.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/cmd_cluster.hpp"
#include "config/serve_config.hpp"
#include "core/result.hpp"
#include "server/http_server.hpp"
#include "server/ws_hub.hpp"
#include "store/history.hpp"

namespace gf::app {

// What the command line said (nullopt / empty: not given).
struct ServeCommand {
  std::optional<std::string> listen;
  std::optional<double> interval_s;
  std::optional<std::string> node_name;
  std::string config;
  std::optional<std::string> static_dir;
  std::optional<std::string> db;
  std::optional<std::string> token_file;
  std::optional<std::string> read_token_file;
  bool auth_read = false;
  bool no_history = false;
  std::optional<unsigned> max_ws_clients;
  std::vector<std::string> allow_origins;
  std::vector<std::string> allow_hosts;  // --allow-host: names the Host header may carry
  std::string port_file;
  std::string cluster_config;         // the fleet's sources (JSON): adds the /api/v1/cluster/ routes
  ClusterCommand fleet;               // the same source options as `gpufleet cluster` (they win over the file)
  std::optional<std::string> socket;  // the agent socket's path, or "none"
  std::optional<std::uint64_t> max_jobs_per_user;
  std::optional<std::string> job_retention;  // a duration, or "0": kept for ever
};

// The file's settings (config/serve_config.hpp) and the option structs of the rooms they configure,
// with the file's and the command line's values laid over those rooms' defaults.
struct ServeConfig : config::ServeSettings {
  server::ServerOptions server;
  server::WsOptions ws;
  store::HistoryOptions history_options;
};
std::string node_name;
std::string static_dir;
std::string db;
std::string token_file;
std::string read_token_file;  // with auth_read: the readers' token (reads only); empty: none
bool history = true;
store::HistoryOptions history_options;
std::vector<core::AlertRule> alert_rules = core::default_alert_rules();
server::ServerOptions server;
server::WsOptions ws;
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
};

Result<ServeConfig> load_serve_config(const ServeCommand& cmd);
// The same from a JSON text (for tests and the file): `source` names it in errors.
Result<ServeConfig> serve_config_from_json(const std::string& text, const std::string& source, ServeConfig base = {});

}  // namespace gf::app
