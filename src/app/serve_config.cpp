#include "app/serve_config.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/text.hpp"

namespace gf::app {
namespace {

// What the file said of the server, the WebSocket hub and the history, over their defaults.
void apply_file_options(ServeConfig& c) {
  const auto& h = c.http;
  auto& s = c.server;
  if (h.host) s.host = *h.host;
  if (h.port) s.port = *h.port;
  if (h.auth_read) s.auth_read = *h.auth_read;
  s.allowed_origins.insert(s.allowed_origins.end(), h.allowed_origins.begin(), h.allowed_origins.end());
  s.allowed_hosts.insert(s.allowed_hosts.end(), h.allowed_hosts.begin(), h.allowed_hosts.end());
  if (h.header_limit) s.header_limit = *h.header_limit;
  if (h.body_limit) s.body_limit = *h.body_limit;
  if (h.request_timeout) s.request_timeout = *h.request_timeout;
  if (h.header_timeout) s.header_timeout = *h.header_timeout;
  if (h.keep_alive_timeout) s.keep_alive_timeout = *h.keep_alive_timeout;
  if (h.max_connections) s.max_connections = *h.max_connections;
  if (h.max_connections_per_address) s.max_connections_per_address = *h.max_connections_per_address;
  if (h.ws_queue) s.ws_queue = *h.ws_queue;
  if (h.ws_stall_timeout) s.ws_stall_timeout = *h.ws_stall_timeout;
  if (c.websocket.max_clients) c.ws.max_clients = *c.websocket.max_clients;
  if (c.websocket.default_period) c.ws.default_period = *c.websocket.default_period;
  if (c.websocket.sio_sessions_per_address) c.ws.sio_sessions_per_address = *c.websocket.sio_sessions_per_address;
  const auto& r = c.history_retention;
  if (r.raw) c.history_options.raw_retention = *r.raw;
  if (r.minute) c.history_options.minute_retention = *r.minute;
  if (r.hour) c.history_options.hour_retention = *r.hour;
  // Applied once: the lists are not added a second time when the config is read over again.
  c.http = {};
  c.websocket = {};
  c.history_retention = {};
}

}  // namespace

Result<ServeConfig> serve_config_from_json(const std::string& text, const std::string& src, ServeConfig c) {
  auto s = config::serve_settings_from_json(text, src, static_cast<const config::ServeSettings&>(c));
  if (!s) return s.error();
  static_cast<config::ServeSettings&>(c) = std::move(*s);
  apply_file_options(c);
  return c;
}

Result<ServeConfig> load_serve_config(const ServeCommand& cmd) {
  ServeConfig c;
  if (!cmd.config.empty()) {
    std::ifstream in(cmd.config);
    if (!in) return make_error("cannot read the config file " + cmd.config);
    std::stringstream ss;
    ss << in.rdbuf();
    auto r = serve_config_from_json(ss.str(), cmd.config, c);
    if (!r) return r.error();
    c = std::move(*r);
  }
  if (cmd.listen) {
    auto l = config::parse_listen(*cmd.listen);
    if (!l) return l.error();
    c.server.host = l->first;
    c.server.port = l->second;
  }
  if (cmd.interval_s) {
    auto i = config::interval_from_seconds(*cmd.interval_s, "--interval");
    if (!i) return i.error();
    c.interval = *i;
  }
  if (cmd.node_name) c.node_name = *cmd.node_name;
  if (cmd.static_dir) c.static_dir = *cmd.static_dir;
  if (cmd.db) c.db = *cmd.db;
  if (cmd.token_file) c.token_file = *cmd.token_file;
  if (cmd.read_token_file) c.read_token_file = *cmd.read_token_file;
  if (cmd.socket) c.socket = *cmd.socket;
  if (cmd.max_jobs_per_user) {
    if (*cmd.max_jobs_per_user > config::kMaxJobsPerUser)
      return make_error(ErrorKind::Usage,
                        fmt::format("--max-jobs-per-user: at most {} (0: no cap)", config::kMaxJobsPerUser));
    c.max_jobs_per_user = *cmd.max_jobs_per_user;
  }
  if (cmd.job_retention) {
    if (*cmd.job_retention == "0") {
      c.job_retention = std::chrono::seconds(0);
    } else {
      auto d = core::parse_duration(*cmd.job_retention, core::BareNumber::Seconds, std::chrono::days(365 * 1000));
      if (!d) return make_error(ErrorKind::Usage, "--job-retention " + d.error().message + " (0: kept for ever)");
      if (*d > config::kMaxJobRetention)
        return make_error(ErrorKind::Usage, "--job-retention: at most 36500d (0: for ever)");
      c.job_retention = *d;
    }
  }
  if (cmd.auth_read) c.server.auth_read = true;
  if (cmd.no_history) c.history = false;
  if (cmd.max_ws_clients) c.ws.max_clients = *cmd.max_ws_clients;
  for (const auto& o : cmd.allow_origins) c.server.allowed_origins.push_back(o);
  for (const auto& h : cmd.allow_hosts) {
    if (h.empty()) return make_error("--allow-host needs a host name");
    c.server.allowed_hosts.push_back(h);
  }
  if (!c.read_token_file.empty() && !c.server.auth_read)
    return make_error(ErrorKind::Usage, "--read-token-file needs --auth-read (without it, reads need no token)");
  // The default WebSocket period stays 5 s (the seed's), but never faster than collection itself.
  return c;
}

}  // namespace gf::app
