#include "config/serve_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "config/alert_config.hpp"
#include "core/text.hpp"

namespace gf::config {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The file's durations beyond a century are refused by the callers with their own words.
constexpr seconds kMaxDuration = std::chrono::days(365 * 1000);

Result<void> check_keys(const json& obj, const std::string& where, const std::set<std::string>& allowed) {
  for (const auto& [k, v] : obj.items())
    if (!allowed.contains(k)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return make_error(fmt::format("{}: unknown key '{}' (expected one of {})", where, k, list));
    }
  return {};
}

// A duration: a positive number of seconds (rounded up) or the duration grammar ("1h", "90").
Result<seconds> duration_value(const json& v, const std::string& where) {
  if (v.is_number() && v.get<double>() > 0 && std::isfinite(v.get<double>()))
    return seconds(static_cast<long long>(std::ceil(v.get<double>())));
  if (v.is_string()) {
    auto d = core::parse_duration(v.get<std::string>(), core::BareNumber::Seconds, kMaxDuration);
    if (!d) return make_error(where + ": " + d.error().message);
    return d;
  }
  return make_error(where + ": expected a duration like \"1h\" or a number of seconds");
}

Result<unsigned> percent_value(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 100)
    return make_error(where + ": expected a whole percentage from 0 to 100");
  return static_cast<unsigned>(v.get<long long>());
}

// An integer key of the top level from lo to hi; `expected` ends the error ("an integer from 0 to 1024").
Result<std::optional<std::int64_t>> integer_key(const json& j, const std::string& src, const char* key, std::int64_t lo,
                                                std::int64_t hi, const std::string& expected) {
  if (!j.contains(key)) return std::optional<std::int64_t>{};
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    return make_error(fmt::format("{}: '{}' must be {}", src, key, expected));
  return std::optional<std::int64_t>{v.get<std::int64_t>()};
}

Result<void> bool_key(const json& obj, const std::string& where, const char* key, bool& out) {
  if (!obj.contains(key)) return {};
  if (!obj[key].is_boolean()) return make_error(where + " must be true or false");
  out = obj[key].get<bool>();
  return {};
}

// "listen", "interval_s", the strings, "auth_read".
Result<void> top_keys(const json& j, const std::string& src, ServeSettings& c) {
  if (j.contains("listen")) {
    if (!j["listen"].is_string()) return make_error(src + ": 'listen' must be a string like \"127.0.0.1:9401\"");
    auto l = parse_listen(j["listen"].get<std::string>());
    if (!l) return make_error(src + ": " + l.error().message);
    c.http.host = l->first;
    c.http.port = l->second;
  }
  if (j.contains("interval_s")) {
    if (!j["interval_s"].is_number()) return make_error(src + ": 'interval_s' must be a number of seconds");
    auto i = interval_from_seconds(j["interval_s"].get<double>(), src + ": interval_s");
    if (!i) return i.error();
    c.interval = *i;
  }
  for (auto [key, out] :
       {std::pair{"node_name", &c.node_name}, std::pair{"static_dir", &c.static_dir}, std::pair{"db", &c.db},
        std::pair{"token_file", &c.token_file}, std::pair{"read_token_file", &c.read_token_file},
        std::pair{"socket", &c.socket}, std::pair{"admin_group", &c.admin_group}})
    if (j.contains(key)) {
      if (!j[key].is_string()) return make_error(fmt::format("{}: '{}' must be a string", src, key));
      *out = j[key].get<std::string>();
    }
  if (j.contains("auth_read")) {
    if (!j["auth_read"].is_boolean()) return make_error(src + ": 'auth_read' must be true or false");
    c.http.auth_read = j["auth_read"].get<bool>();
  }
  return {};
}

// "max_user_priority", "max_gpus_per_user", "jobs", "max_jobs_per_user", "job_retention".
Result<void> job_keys(const json& j, const std::string& src, ServeSettings& c) {
  auto prio = integer_key(j, src, "max_user_priority", -1000000, 1000000, "an integer from -1000000 to 1000000");
  if (!prio) return prio.error();
  if (*prio) c.max_user_priority = static_cast<int>(**prio);
  auto gpus = integer_key(j, src, "max_gpus_per_user", 0, 1024, "an integer from 0 (no quota) to 1024");
  if (!gpus) return gpus.error();
  if (*gpus) c.max_gpus_per_user = static_cast<unsigned>(**gpus);
  if (j.contains("jobs")) {
    const json& jb = j["jobs"];
    if (!jb.is_object()) return make_error(src + ": 'jobs' must be an object like {\"submit\": true}");
    if (auto r = check_keys(jb, src + ": jobs", {"submit", "max_in_flight"}); !r) return r.error();
    if (auto r = bool_key(jb, src + ": jobs.submit", "submit", c.jobs_submit); !r) return r;
    if (jb.contains("max_in_flight")) {
      const json& v = jb["max_in_flight"];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1024)
        return make_error(src + ": jobs.max_in_flight must be an integer from 1 to 1024");
      c.jobs_max_in_flight = static_cast<std::size_t>(v.get<std::int64_t>());
    }
  }
  auto cap = integer_key(j, src, "max_jobs_per_user", 0, static_cast<std::int64_t>(kMaxJobsPerUser),
                         fmt::format("an integer from 0 (no cap) to {}", kMaxJobsPerUser));
  if (!cap) return cap.error();
  if (*cap) c.max_jobs_per_user = static_cast<std::uint64_t>(**cap);
  if (j.contains("job_retention")) {
    const json& v = j["job_retention"];
    if ((v.is_number() && v.get<double>() == 0) || (v.is_string() && v.get<std::string>() == "0")) {
      c.job_retention = seconds(0);
    } else {
      auto d = v.is_number() && v.get<double>() > static_cast<double>(kMaxJobRetention.count())
                   ? Result<seconds>(kMaxJobRetention + seconds(1))
                   : duration_value(v, src + ": job_retention");
      if (!d) return make_error(d.error().message + " (0: kept for ever)");
      if (*d > kMaxJobRetention) return make_error(src + ": job_retention: at most 36500d (0: kept for ever)");
      c.job_retention = *d;
    }
  }
  return {};
}

// "history": false, or {"enabled", "raw_retention", "minute_retention", "hour_retention"}.
Result<void> history_keys(const json& j, const std::string& src, ServeSettings& c) {
  if (!j.contains("history")) return {};
  const json& h = j["history"];
  if (h.is_boolean()) {
    c.history = h.get<bool>();
    return {};
  }
  if (!h.is_object()) return make_error(src + ": 'history' must be an object (or false)");
  if (auto r = check_keys(h, src + ": history", {"enabled", "raw_retention", "minute_retention", "hour_retention"}); !r)
    return r.error();
  if (auto r = bool_key(h, src + ": history.enabled", "enabled", c.history); !r) return r;
  for (auto [key, out] : {std::pair{"raw_retention", &c.history_retention.raw},
                          std::pair{"minute_retention", &c.history_retention.minute},
                          std::pair{"hour_retention", &c.history_retention.hour}})
    if (h.contains(key)) {
      auto d = duration_value(h[key], src + ": history." + key);
      if (!d) return d.error();
      *out = *d;
    }
  return {};
}

// "usage": {"busy_threshold_pct"}; "reclaim": {"enabled", "utilization_threshold_pct", "idle_for", "grace"}.
Result<void> usage_keys(const json& j, const std::string& src, ServeSettings& c) {
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
  if (!j.contains("reclaim")) return {};
  const json& r = j["reclaim"];
  if (!r.is_object()) return make_error(src + ": 'reclaim' must be an object");
  if (auto k = check_keys(r, src + ": reclaim", {"enabled", "utilization_threshold_pct", "idle_for", "grace"}); !k)
    return k;
  if (auto b = bool_key(r, src + ": reclaim.enabled", "enabled", c.reclaim.enabled); !b) return b;
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
  return {};
}

// "websocket": {"max_clients", "default_period_ms", "queue", "stall_timeout_s", "socketio_sessions_per_address"}.
Result<void> websocket_keys(const json& j, const std::string& src, ServeSettings& c) {
  if (!j.contains("websocket")) return {};
  const json& w = j["websocket"];
  if (!w.is_object()) return make_error(src + ": 'websocket' must be an object");
  if (auto r =
          check_keys(w, src + ": websocket",
                     {"max_clients", "default_period_ms", "queue", "stall_timeout_s", "socketio_sessions_per_address"});
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
  auto spa = num("socketio_sessions_per_address", 1, 100000);
  for (const auto* r : {&mc, &dp, &q, &st, &spa})
    if (!*r) return r->error();
  if (*mc) c.websocket.max_clients = static_cast<std::size_t>(**mc);
  if (*dp) c.websocket.default_period = milliseconds(static_cast<long long>(**dp));
  if (*q) c.http.ws_queue = static_cast<std::size_t>(**q);
  if (*spa) c.websocket.sio_sessions_per_address = static_cast<std::size_t>(**spa);
  if (*st) c.http.ws_stall_timeout = milliseconds(static_cast<long long>(**st * 1000));
  return {};
}

// "allowed_origins" and "allowed_hosts": lists of strings (host names not empty).
Result<void> allowed_keys(const json& j, const std::string& src, ServeSettings& c) {
  if (j.contains("allowed_origins")) {
    const json& o = j["allowed_origins"];
    if (!o.is_array())
      return make_error(src + ": 'allowed_origins' must be a list of origins like \"https://grafana.example\"");
    for (const auto& v : o) {
      if (!v.is_string()) return make_error(src + ": 'allowed_origins' must hold strings");
      c.http.allowed_origins.push_back(v.get<std::string>());
    }
  }
  if (j.contains("allowed_hosts")) {
    const json& o = j["allowed_hosts"];
    if (!o.is_array())
      return make_error(src + ": 'allowed_hosts' must be a list of host names like \"gpu-3.lab.example\"");
    for (const auto& v : o) {
      if (!v.is_string() || v.get<std::string>().empty())
        return make_error(src + ": 'allowed_hosts' must hold host names (non-empty strings)");
      c.http.allowed_hosts.push_back(v.get<std::string>());
    }
  }
  return {};
}

// "limits": the HTTP server's bounds.
Result<void> limits_keys(const json& j, const std::string& src, ServeSettings& c) {
  if (!j.contains("limits")) return {};
  const json& l = j["limits"];
  if (!l.is_object()) return make_error(src + ": 'limits' must be an object");
  if (auto r = check_keys(l, src + ": limits",
                          {"max_header_bytes", "max_body_bytes", "request_timeout_s", "header_timeout_s",
                           "keep_alive_timeout_s", "max_connections", "max_connections_per_address"});
      !r)
    return r.error();
  auto count = [&](const char* key, double lo, double hi, std::optional<std::size_t>& out) -> Result<void> {
    if (!l.contains(key)) return {};
    if (!l[key].is_number() || l[key].get<double>() < lo || l[key].get<double>() > hi)
      return make_error(fmt::format("{}: limits.{} must be a number from {} to {}", src, key, lo, hi));
    out = static_cast<std::size_t>(l[key].get<double>());
    return {};
  };
  auto secs = [&](const char* key, std::optional<milliseconds>& out) -> Result<void> {
    if (!l.contains(key)) return {};
    if (!l[key].is_number() || l[key].get<double>() < 1 || l[key].get<double>() > 3600)
      return make_error(fmt::format("{}: limits.{} must be a number from {} to {}", src, key, 1, 3600));
    out = milliseconds(static_cast<long long>(l[key].get<double>() * 1000));
    return {};
  };
  auto& h = c.http;
  for (const auto& r :
       {count("max_header_bytes", 1024, 1 << 20, h.header_limit), count("max_body_bytes", 1024, 64 << 20, h.body_limit),
        secs("request_timeout_s", h.request_timeout), secs("header_timeout_s", h.header_timeout),
        secs("keep_alive_timeout_s", h.keep_alive_timeout), count("max_connections", 16, 1000000, h.max_connections),
        count("max_connections_per_address", 1, 1000000, h.max_connections_per_address)})
    if (!r) return r.error();
  return {};
}

}  // namespace

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
  if (port.size() > 5) return bad();
  auto p = core::parse_uint(port, 0, 65535);
  if (!p) return bad();
  return std::pair<std::string, unsigned short>{host, static_cast<unsigned short>(*p)};
}

Result<milliseconds> interval_from_seconds(double s, const std::string& where) {
  if (!(s >= 0.05 && s <= 3600))
    return make_error(fmt::format("{}: the interval must be from 0.05 to 3600 seconds (got {})", where, s));
  return milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

Result<ServeSettings> serve_settings_from_json(const std::string& text, const std::string& src, ServeSettings c) {
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
  for (auto section : {top_keys, job_keys, history_keys, usage_keys})
    if (auto r = section(j, src, c); !r) return r.error();
  if (j.contains("alerts")) {
    auto rules = parse_alert_rules(j["alerts"]);
    if (!rules) return make_error(src + ": " + rules.error().message);
    c.alert_rules = std::move(*rules);
  }
  for (auto section : {websocket_keys, allowed_keys, limits_keys})
    if (auto r = section(j, src, c); !r) return r.error();
  return c;
}

}  // namespace gf::config
