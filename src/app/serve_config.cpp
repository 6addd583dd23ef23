#include "app/serve_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/alert_config.hpp"

namespace gf::app {

using nlohmann::json;

Result<std::pair<std::string, unsigned short>> parse_listen(const std::string& text) {
  auto bad = [&] {
    return make_error("--listen '" + text + "': expected HOST:PORT, e.g. 127.0.0.1:9401, 0.0.0.0:9401 or [::1]:9401");
  };
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') return bad();
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return bad();
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) host = "127.0.0.1";
  if (host == "localhost") host = "127.0.0.1";
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad();
  const unsigned long p = std::stoul(port);
  if (p > 65535) return bad();
  return std::pair<std::string, unsigned short>{host, static_cast<unsigned short>(p)};
}

Result<std::chrono::seconds> parse_duration(const std::string& t) {
  auto bad = [&] {
    return make_error("'" + t + "': expected a duration like 90s, 15m, 1h, 7d or a number of seconds");
  };
  if (t.empty() || t.size() > 12) return bad();
  const char u = t.back();
  const bool unit = u == 's' || u == 'm' || u == 'h' || u == 'd';
  const std::string digits = unit ? t.substr(0, t.size() - 1) : t;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad();
  const long long n = std::stoll(digits);
  const long long mult = !unit || u == 's' ? 1 : u == 'm' ? 60 : u == 'h' ? 3600 : 86400;
  if (n <= 0) return make_error("'" + t + "': a duration must be positive");
  return std::chrono::seconds(n * mult);
}

namespace {

constexpr std::int64_t kMaxJobsPerUser = 100000000;
constexpr std::chrono::seconds kMaxJobRetention = std::chrono::days(36500);  // a century: "for ever" is 0

Result<void> check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : obj.items())
    if (!allowed.contains(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return make_error(fmt::format("{}: unknown key '{}' (expected one of {})", where, k, list));
    }
  return {};
}

Result<std::chrono::seconds> duration_value(const json& v, const std::string& where) {
  if (v.is_number() && v.get<double>() > 0 && std::isfinite(v.get<double>()))
    return std::chrono::seconds(static_cast<long long>(std::ceil(v.get<double>())));
  if (v.is_string()) {
    auto d = parse_duration(v.get<std::string>());
    if (!d) return make_error(where + ": " + d.error().message);
    return d;
  }
  return make_error(where + ": expected a duration like \"1h\" or a number of seconds");
}

Result<void> set_interval(ServeConfig& c, double s, const std::string& where) {
  if (!(s >= 0.05 && s <= 3600))
    return make_error(fmt::format("{}: the interval must be from 0.05 to 3600 seconds (got {})", where, s));
  c.interval = std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
  return {};
}

Result<unsigned> percent_value(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 100)
    return make_error(where + ": expected a whole percentage from 0 to 100");
  return static_cast<unsigned>(v.get<long long>());
}

// "usage": {"busy_threshold_pct"}; "reclaim": {"enabled", "utilization_threshold_pct", "idle_for", "grace"}.
Result<void> usage_keys(const json& j, const std::string& src, ServeConfig& c) {
  if (j.contains("usage")) {
    const json& u = j["usage"];
    if (!u.is_object()) return make_error(src + ": 'usage' must be an object");
    if (auto r = check_keys(u, src + ": usage", {"busy_threshold_pct"}); !r) return r;
    if (u.contains("busy_threshold_pct")) {
      auto p = percent_value(u["busy_threshold_pct"], src + ": usage.busy_threshold_pct");
      if (!p) return p.error();
      c.busy_threshold_pct = *p;
    }
  }
  if (j.contains("reclaim")) {
    const json& r = j["reclaim"];
    if (!r.is_object()) return make_error(src + ": 'reclaim' must be an object");
    if (auto k = check_keys(r, src + ": reclaim", {"enabled", "utilization_threshold_pct", "idle_for", "grace"}); !k)
      return k;
    if (r.contains("enabled")) {
      if (!r["enabled"].is_boolean()) return make_error(src + ": reclaim.enabled must be true or false");
      c.reclaim.enabled = r["enabled"].get<bool>();
    }
    if (r.contains("utilization_threshold_pct")) {
      auto p = percent_value(r["utilization_threshold_pct"], src + ": reclaim.utilization_threshold_pct");
      if (!p) return p.error();
      c.reclaim.utilization_threshold_pct = *p;
    }
    for (auto [key, out] : {std::pair{"idle_for", &c.reclaim.idle_for}, std::pair{"grace", &c.reclaim.grace}})
      if (r.contains(key)) {
        auto d = duration_value(r[key], src + ": reclaim." + key);
        if (!d) return d.error();
        *out = *d;
      }
  }
  return {};
}

}  // namespace

Result<ServeConfig> serve_config_from_json(const std::string& text, const std::string& src, ServeConfig c) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return make_error(src + ": not valid JSON");
  if (!j.is_object()) return make_error(src + ": expected a JSON object");
  // clang-format off
  static const std::set<std::string> kKeys{
      "listen",     "interval_s",      "node_name",         "static_dir",  "db",
      "token_file", "read_token_file", "auth_read",         "history",     "alerts",
      "websocket",  "allowed_origins", "allowed_hosts",     "limits",      "usage",
      "reclaim",    "socket",          "max_user_priority", "admin_group", "max_gpus_per_user",
      "max_jobs_per_user", "job_retention", "jobs"};
  // clang-format on
  if (auto r = check_keys(j, src, kKeys); !r) return r.error();
  auto str = [&](const char* key, std::string& out) -> Result<void> {
    if (!j.contains(key)) return {};
    if (!j[key].is_string()) return make_error(fmt::format("{}: '{}' must be a string", src, key));
    out = j[key].get<std::string>();
    return {};
  };
  if (j.contains("listen")) {
    if (!j["listen"].is_string()) return make_error(src + ": 'listen' must be a string like \"127.0.0.1:9401\"");
    auto l = parse_listen(j["listen"].get<std::string>());
    if (!l) return make_error(src + ": " + l.error().message);
    c.server.host = l->first;
    c.server.port = l->second;
  }
  if (j.contains("interval_s")) {
    if (!j["interval_s"].is_number()) return make_error(src + ": 'interval_s' must be a number of seconds");
    if (auto r = set_interval(c, j["interval_s"].get<double>(), src + ": interval_s"); !r) return r.error();
  }
  for (auto [key, out] :
       {std::pair{"node_name", &c.node_name}, std::pair{"static_dir", &c.static_dir}, std::pair{"db", &c.db},
        std::pair{"token_file", &c.token_file}, std::pair{"read_token_file", &c.read_token_file},
        std::pair{"socket", &c.socket}, std::pair{"admin_group", &c.admin_group}})
    if (auto r = str(key, *out); !r) return r.error();
  if (j.contains("max_user_priority")) {
    const json& v = j["max_user_priority"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < -1000000 || v.get<std::int64_t>() > 1000000)
      return make_error(src + ": 'max_user_priority' must be an integer from -1000000 to 1000000");
    c.max_user_priority = static_cast<int>(v.get<std::int64_t>());
  }
  if (j.contains("max_gpus_per_user")) {
    const json& v = j["max_gpus_per_user"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 1024)
      return make_error(src + ": 'max_gpus_per_user' must be an integer from 0 (no quota) to 1024");
    c.max_gpus_per_user = static_cast<unsigned>(v.get<std::int64_t>());
  }
  if (j.contains("jobs")) {
    const json& jb = j["jobs"];
    if (!jb.is_object()) return make_error(src + ": 'jobs' must be an object like {\"submit\": true}");
    if (auto r = check_keys(jb, src + ": jobs", {"submit", "max_in_flight"}); !r) return r.error();
    if (jb.contains("submit")) {
      if (!jb["submit"].is_boolean()) return make_error(src + ": jobs.submit must be true or false");
      c.jobs_submit = jb["submit"].get<bool>();
    }
    if (jb.contains("max_in_flight")) {
      const json& v = jb["max_in_flight"];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1024)
        return make_error(src + ": jobs.max_in_flight must be an integer from 1 to 1024");
      c.jobs_max_in_flight = static_cast<std::size_t>(v.get<std::int64_t>());
    }
  }
  if (j.contains("max_jobs_per_user")) {
    const json& v = j["max_jobs_per_user"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > kMaxJobsPerUser)
      return make_error(
          fmt::format("{}: 'max_jobs_per_user' must be an integer from 0 (no cap) to {}", src, kMaxJobsPerUser));
    c.max_jobs_per_user = static_cast<std::uint64_t>(v.get<std::int64_t>());
  }
  if (j.contains("job_retention")) {
    const json& v = j["job_retention"];
    if ((v.is_number() && v.get<double>() == 0) || (v.is_string() && v.get<std::string>() == "0")) {
      c.job_retention = std::chrono::seconds(0);
    } else {
      auto d = v.is_number() && v.get<double>() > static_cast<double>(kMaxJobRetention.count())
                   ? Result<std::chrono::seconds>(kMaxJobRetention + std::chrono::seconds(1))
                   : duration_value(v, src + ": job_retention");
      if (!d) return make_error(d.error().message + " (0: kept for ever)");
      if (*d > kMaxJobRetention) return make_error(src + ": job_retention: at most 36500d (0: kept for ever)");
      c.job_retention = *d;
    }
  }
  if (j.contains("auth_read")) {
    if (!j["auth_read"].is_boolean()) return make_error(src + ": 'auth_read' must be true or false");
    c.server.auth_read = j["auth_read"].get<bool>();
  }
  if (j.contains("history")) {
    const json& h = j["history"];
    if (h.is_boolean()) {
      c.history = h.get<bool>();
    } else if (h.is_object()) {
      if (auto r = check_keys(h, src + ": history", {"enabled", "raw_retention", "minute_retention", "hour_retention"});
          !r)
        return r.error();
      if (h.contains("enabled")) {
        if (!h["enabled"].is_boolean()) return make_error(src + ": history.enabled must be true or false");
        c.history = h["enabled"].get<bool>();
      }
      for (auto [key, out] : {std::pair{"raw_retention", &c.history_options.raw_retention},
                              std::pair{"minute_retention", &c.history_options.minute_retention},
                              std::pair{"hour_retention", &c.history_options.hour_retention}})
        if (h.contains(key)) {
          auto d = duration_value(h[key], src + ": history." + key);
          if (!d) return d.error();
          *out = *d;
        }
    } else {
      return make_error(src + ": 'history' must be an object (or false)");
    }
  }
  if (auto r = usage_keys(j, src, c); !r) return r.error();
  if (j.contains("alerts")) {
    auto rules = config::parse_alert_rules(j["alerts"]);
    if (!rules) return make_error(src + ": " + rules.error().message);
    c.alert_rules = std::move(*rules);
  }
  if (j.contains("websocket")) {
    const json& w = j["websocket"];
    if (!w.is_object()) return make_error(src + ": 'websocket' must be an object");
    if (auto r = check_keys(w, src + ": websocket", {"max_clients", "default_period_ms", "queue", "stall_timeout_s"});
        !r)
      return r.error();
    auto num = [&](const char* key, double lo, double hi) -> Result<std::optional<double>> {
      if (!w.contains(key)) return std::optional<double>{};
      if (!w[key].is_number() || w[key].get<double>() < lo || w[key].get<double>() > hi)
        return make_error(fmt::format("{}: websocket.{} must be a number from {} to {}", src, key, lo, hi));
      return std::optional<double>{w[key].get<double>()};
    };
    auto mc = num("max_clients", 1, 100000);
    auto dp = num("default_period_ms", 100, 3600000);
    auto q = num("queue", 1, 10000);
    auto st = num("stall_timeout_s", 1, 3600);
    for (const auto* r : {&mc, &dp, &q, &st})
      if (!*r) return r->error();
    if (*mc) c.ws.max_clients = static_cast<std::size_t>(**mc);
    if (*dp) c.ws.default_period = std::chrono::milliseconds(static_cast<long long>(**dp));
    if (*q) c.server.ws_queue = static_cast<std::size_t>(**q);
    if (*st) c.server.ws_stall_timeout = std::chrono::milliseconds(static_cast<long long>(**st * 1000));
  }
  if (j.contains("allowed_origins")) {
    const json& o = j["allowed_origins"];
    if (!o.is_array())
      return make_error(src + ": 'allowed_origins' must be a list of origins like \"https://grafana.example\"");
    for (const auto& v : o) {
      if (!v.is_string()) return make_error(src + ": 'allowed_origins' must hold strings");
      c.server.allowed_origins.push_back(v.get<std::string>());
    }
  }
  if (j.contains("allowed_hosts")) {
    const json& o = j["allowed_hosts"];
    if (!o.is_array())
      return make_error(src + ": 'allowed_hosts' must be a list of host names like \"gpu-3.lab.example\"");
    for (const auto& v : o) {
      if (!v.is_string() || v.get<std::string>().empty())
        return make_error(src + ": 'allowed_hosts' must hold host names (non-empty strings)");
      c.server.allowed_hosts.push_back(v.get<std::string>());
    }
  }
  if (j.contains("limits")) {
    const json& l = j["limits"];
    if (!l.is_object()) return make_error(src + ": 'limits' must be an object");
    if (auto r = check_keys(l, src + ": limits",
                            {"max_header_bytes", "max_body_bytes", "request_timeout_s", "header_timeout_s",
                             "keep_alive_timeout_s", "max_connections", "max_connections_per_address"});
        !r)
      return r.error();
    auto num = [&](const char* key, double lo, double hi, auto apply) -> Result<void> {
      if (!l.contains(key)) return {};
      if (!l[key].is_number() || l[key].get<double>() < lo || l[key].get<double>() > hi)
        return make_error(fmt::format("{}: limits.{} must be a number from {} to {}", src, key, lo, hi));
      apply(l[key].get<double>());
      return {};
    };
    for (const auto& r :
         {num("max_header_bytes", 1024, 1 << 20,
              [&](double v) { c.server.header_limit = static_cast<std::size_t>(v); }),
          num("max_body_bytes", 1024, 64 << 20, [&](double v) { c.server.body_limit = static_cast<std::size_t>(v); }),
          num("request_timeout_s", 1, 3600,
              [&](double v) {
                c.server.request_timeout = std::chrono::milliseconds(static_cast<long long>(v * 1000));
              }),
          num("header_timeout_s", 1, 3600,
              [&](double v) { c.server.header_timeout = std::chrono::milliseconds(static_cast<long long>(v * 1000)); }),
          num("keep_alive_timeout_s", 1, 3600,
              [&](double v) {
                c.server.keep_alive_timeout = std::chrono::milliseconds(static_cast<long long>(v * 1000));
              }),
          num("max_connections", 16, 1000000,
              [&](double v) { c.server.max_connections = static_cast<std::size_t>(v); }),
          num("max_connections_per_address", 1, 1000000,
              [&](double v) { c.server.max_connections_per_address = static_cast<std::size_t>(v); })})
      if (!r) return r.error();
  }
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
    auto l = parse_listen(*cmd.listen);
    if (!l) return l.error();
    c.server.host = l->first;
    c.server.port = l->second;
  }
  if (cmd.interval_s)
    if (auto r = set_interval(c, *cmd.interval_s, "--interval"); !r) return r.error();
  if (cmd.node_name) c.node_name = *cmd.node_name;
  if (cmd.static_dir) c.static_dir = *cmd.static_dir;
  if (cmd.db) c.db = *cmd.db;
  if (cmd.token_file) c.token_file = *cmd.token_file;
  if (cmd.read_token_file) c.read_token_file = *cmd.read_token_file;
  if (cmd.socket) c.socket = *cmd.socket;
  if (cmd.max_jobs_per_user) {
    if (*cmd.max_jobs_per_user > kMaxJobsPerUser)
      return make_error(ErrorKind::Usage, fmt::format("--max-jobs-per-user: at most {} (0: no cap)", kMaxJobsPerUser));
    c.max_jobs_per_user = *cmd.max_jobs_per_user;
  }
  if (cmd.job_retention) {
    if (*cmd.job_retention == "0") {
      c.job_retention = std::chrono::seconds(0);
    } else {
      auto d = parse_duration(*cmd.job_retention);
      if (!d) return make_error(ErrorKind::Usage, "--job-retention " + d.error().message + " (0: kept for ever)");
      if (*d > kMaxJobRetention) return make_error(ErrorKind::Usage, "--job-retention: at most 36500d (0: for ever)");
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
