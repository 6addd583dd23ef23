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

Result<ServeConfig> load_serve_config(const ServeCommand& cmd);
// The same from a JSON text (for tests and the file): `source` names it in errors.
Result<ServeConfig> serve_config_from_json(const std::string& text, const std::string& source, ServeConfig base = {});

}  // namespace gf::app
