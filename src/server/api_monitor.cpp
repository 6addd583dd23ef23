// REST handlers for what the GPUs are doing: the latest reading, summaries, history, alerts,
// availability. They serve what the collection loop published; only ?fresh=1 queries the driver.
// A reading older than two collection intervals is stale: the seeds' routes (/api/v1/monitoring/*,
// /api/gpu/*) then answer with their error shapes, as the seeds did when collection failed, and
// gpufleet's own routes serve it marked "stale": true with its "age_s".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "allocator/availability.hpp"
#include "allocator/select.hpp"
#include "core/fields.hpp"
#include "core/policy.hpp"
#include "core/text.hpp"
#include "platform/host_stats.hpp"
#include "platform/log.hpp"
#include "server/api.hpp"
#include "wire/agent_docs.hpp"
#include "wire/alert_json.hpp"
#include "wire/json.hpp"
#include "wire/seed_docs.hpp"
#include "wire/time.hpp"

namespace gf::server {
namespace {

using nlohmann::json;
using std::chrono::system_clock;

Result<std::shared_ptr<const node::Published>> current(ApiContext& ctx, const Request& req) {
  if (wants_fresh(req)) return ctx.agent->fresh();
  auto p = ctx.agent->latest();
  if (!p) return make_error("no reading yet");
  return p;
}

Response unavailable(const std::string& why) { return error_response(ErrorKind::NotReady, why); }

// How old a reading is, by the routes' clock, and whether that is more than two collection intervals.
struct Age {
  double age_s = 0;
  bool stale = false;
};
Age age_of(const ApiContext& c, const node::Published& p) {
  using namespace std::chrono;
  const double age = std::max(0.0, duration<double>(c.clock->now() - p.taken).count());
  // Two intervals; at least one interval and a second, so that at a sub-second interval one slow driver
  // read or /proc scan does not flip the seed routes to their error shape.
  const double interval = duration<double>(c.interval).count();
  return {age, age > std::max(2 * interval, interval + 1.0)};
}

// The reading's "stale" and "age_s" members, to add to a document.
json freshness(const Age& a) {
  json f = json::object();
  wire::mark_freshness(f, a.stale, a.age_s);
  return f;
}

// Why a stale reading is stale: its age and what the collection said last.
std::string stale_cause(const ApiContext& c, double age_s) {
  auto why = fmt::format("the last reading is {:.1f} s old (the collection interval is {:.1f} s)", age_s,
                         std::chrono::duration<double>(c.interval).count());
  const auto err = c.agent->counters().last_error;
  return why + (err.empty() ? "; the collection loop has not published since" : "; the last collection failed: " + err);
}

// What a seed route may serve: a reading that is not stale, else why not.
Result<std::shared_ptr<const node::Published>> seed_reading(ApiContext& c, const Request& req) {
  auto p = current(c, req);
  if (!p) return p;
  if (const auto a = age_of(c, **p); a.stale) return make_error(stale_cause(c, a.age_s));
  return p;
}

// Text a process controls (its name, user, command line), capped and made printable before it goes
// into a sentence or a list a dashboard shows.
std::string clean_text(const std::string& s, std::size_t max_bytes) {
  std::size_t n = std::min(s.size(), max_bytes);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // a UTF-8 boundary
  return platform::printable(std::string_view(s).substr(0, n)) + (n < s.size() ? "…" : "");
}

core::Snapshot with_clean_processes(const core::Snapshot& s) {
  core::Snapshot out = s;
  for (auto& g : out.gpus)
    for (auto& p : g.processes) {
      p.name = clean_text(p.name, 64);
      p.user = clean_text(p.user, 64);
      p.command = clean_text(p.command, 512);
    }
  return out;
}

}  // namespace

Result<std::optional<std::int64_t>> query_int(const Request& req, const std::string& key, std::int64_t min,
                                              std::int64_t max) {
  auto it = req.query.find(key);
  if (it == req.query.end()) return std::optional<std::int64_t>{};
  const std::string& v = it->second;
  // Digits only: min is never negative here (limits, offsets, counts).
  auto n = core::parse_uint(v, static_cast<std::uint64_t>(std::max<std::int64_t>(min, 0)),
                            static_cast<std::uint64_t>(std::max<std::int64_t>(max, 0)));
  if (min < 0 || !n)
    return make_error(fmt::format("query parameter {} must be an integer from {} to {} (got '{}')", key, min, max, v));
  return std::optional<std::int64_t>{static_cast<std::int64_t>(*n)};
}

Result<bool> query_bool(const Request& req, const std::string& key, bool def) {
  auto it = req.query.find(key);
  if (it == req.query.end()) return def;
  if (it->second == "1" || it->second == "true") return true;
  if (it->second == "0" || it->second == "false") return false;
  return make_error(fmt::format("query parameter {} must be true or false (got '{}')", key, it->second));
}

namespace {
constexpr double kEndEpochS = 7258118400.0;  // 2200-01-01T00:00:00Z: a nanosecond system_clock ends in 2262
constexpr std::chrono::seconds kMaxBack = std::chrono::days(200 * 366);  // a duration before now: ~200 years
}  // namespace

Result<system_clock::time_point> parse_time(std::string_view text, system_clock::time_point now) {
  using namespace std::chrono;
  const std::string t(text);
  auto bad = [&] {
    return make_error(
        "bad time '" + t +
        "': expected epoch seconds, ISO 8601 (2026-11-23T10:00:00Z) or a duration before now (15m, 2h, 7d)");
  };
  if (t.empty() || t.size() > 40) return bad();
  // A duration before now: digits and one unit (core::parse_duration's grammar; zero is now).
  if (const char u = t.back(); (u == 's' || u == 'm' || u == 'h' || u == 'd') && t.size() > 1 &&
                               std::all_of(t.begin(), t.end() - 1, [](char c) { return c >= '0' && c <= '9'; })) {
    if (t.find_first_not_of('0') == t.size() - 1) return now;
    auto d = core::parse_duration(t, core::BareNumber::Refused, kMaxBack);
    if (!d) return bad();
    return now - *d;
  }
  // Epoch seconds, fractions allowed.
  if (std::all_of(t.begin(), t.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    if (std::count(t.begin(), t.end(), '.') > 1 || t.front() == '.') return bad();
    const double v = std::stod(t);
    if (!(v < kEndEpochS)) return bad();
    // Through microseconds: a double holds them exactly for these values; nanoseconds would round
    // ".25" down to ".249999…".
    return system_clock::time_point(round<microseconds>(duration<double>(v)));
  }
  // ISO 8601 UTC (wire::parse_iso8601), where a time without a zone is UTC too.
  auto iso = wire::parse_iso8601(t);
  if (!iso && t.find_first_of("Z+", 10) == std::string::npos) iso = wire::parse_iso8601(t + "Z");
  if (!iso) return bad();
  return *iso;
}

namespace {

// The seeds' routes: their documents, and their error shapes when there is no good reading.
void add_seed_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/v1/monitoring/gpu-metrics", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = seed_reading(*c, req);
    if (!p) return json_response(500, wire::seed_detail_error("GPU metrics", p.error().message));
    const auto& snap = *(*p)->snapshot;
    const auto& doc = (*p)->renderings->document();
    if (snap.gpus.empty())  // not an error: the document, empty, with a sentence saying why
      return shared_response(200, "application/json", doc.with({{"message", wire::no_gpu_message(snap)}}));
    // gzip-encoded once per reading, for the clients that ask for it.
    const auto& renderings = *(*p)->renderings;
    return encoded_response(req, 200, "application/json", doc.text(),
                            req.accepts_gzip ? renderings.document_gzip() : nullptr);
  });

  r.add(Method::Get, "/api/v1/monitoring/health", Access::Read, Exec::Inline, [c](const Request&) {
    return json_response(200, wire::monitoring_health_json(c->version, c->clock->wall_now()));
  });

  auto host = std::make_shared<platform::HostStats>(ctx.proc_root, ctx.disk_path, *ctx.clock);
  r.add(Method::Get, "/api/v1/monitoring/metrics", Access::Read, Exec::Blocking, [c, host](const Request&) {
    const auto h = host->read();
    if (!h.memory && h.cpu_count == 0)
      return json_response(500, wire::seed_detail_error("system metrics", "cannot read " + c->proc_root + "/stat or " +
                                                                              c->proc_root + "/meminfo"));
    wire::HostMetrics m;
    m.cpu_percent = h.cpu_percent;
    m.cpu_interval_s = h.cpu_interval_s;
    m.cpu_count = h.cpu_count;
    if (h.memory) {
      m.memory_total = h.memory->total;
      m.memory_available = h.memory->available;
      m.memory_free = h.memory->free;
    }
    m.disk_path = host->disk_path();
    if (h.disk) {
      m.disk_total = h.disk->total;
      m.disk_used = h.disk->used;
      m.disk_free = h.disk->free;
    } else {
      m.disk_error = h.disk.error().message;
    }
    return json_response(200, wire::host_metrics_json(m, c->clock->wall_now()));
  });

  r.add(Method::Get, "/api/gpu/summary", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = seed_reading(*c, req);
    if (!p) return json_response(500, wire::home_summary_error());
    const auto& snap = *(*p)->snapshot;
    auto j = wire::summary_json(snap, c->node_name, c->agent->firing().size());
    j["monitoring_available"] = c->monitor->has_backend();
    if (snap.gpus.empty()) j["message"] = wire::no_gpu_message(snap);
    return json_response(200, j);
  });

  r.add(Method::Get, "/api/gpu/metrics", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = seed_reading(*c, req);
    if (!p) return json_response(500, wire::home_metrics_error());
    const auto& snap = *(*p)->snapshot;
    auto j = wire::metrics_json(snap, c->node_name, c->agent->firing());
    if (snap.gpus.empty()) j["message"] = wire::no_gpu_message(snap);
    return json_response(200, j);
  });

  r.add(Method::Get, "/api/gpu/processes", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = seed_reading(*c, req);
    if (!p) return json_response(500, wire::home_processes_error());
    return json_response(200, wire::gpu_processes_json(with_clean_processes(*(*p)->snapshot), c->node_name));
  });
}

// GET /api/health: what is wrong, if anything (503), with the home monitor's keys.
void add_health_route(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/health", Access::Read, Exec::Inline, [c](const Request&) {
    using namespace std::chrono;
    const auto now = c->clock->now();
    const auto counters = c->agent->counters();
    const auto latest = c->agent->latest();
    std::vector<std::string> problems;
    const bool has_backend = c->monitor->has_backend();
    if (!has_backend) problems.push_back("no GPU backend is usable here");
    if (!counters.last_error.empty()) problems.push_back("the last collection failed: " + counters.last_error);
    std::optional<double> age;
    if (counters.last_success)
      age = duration<double>(now - *counters.last_success).count();
    else if (latest)
      age = duration<double>(now - latest->taken).count();
    // Stale: three intervals and two seconds without a good reading (the loop is stuck).
    const double stale_after = 3 * duration<double>(c->interval).count() + 2;
    if (age && *age > stale_after) problems.push_back(fmt::format("no reading for {:.0f} s", *age));
    if (!c->records) problems.push_back("the store is not usable: " + c->store_error);
    if (!counters.history_error.empty()) problems.push_back("history writes fail: " + counters.history_error);
    wire::HealthFacts h;
    h.node = c->node_name;
    h.version = c->version;
    h.uptime_s = duration<double>(now - c->started).count();
    h.backend_name = c->monitor->backend_name();
    h.backend_ok = has_backend && counters.last_error.empty();
    h.backend_error = counters.last_error;
    h.latest = latest ? latest->snapshot.get() : nullptr;
    h.last_collection_age_s = age;
    h.collections = counters.collections;
    h.collection_errors = counters.collection_errors;
    h.last_success = counters.last_success_wall;
    if (counters.collections + counters.collection_errors > 0)
      h.last_duration_s = duration<double>(counters.last_query_duration).count();
    h.last_failure = counters.last_failure;
    h.last_failure_at = counters.last_failure_wall;
    h.store_ok = c->records != nullptr && counters.history_error.empty();
    if (c->records) h.store_path = c->records->path();
    h.history = c->agent->has_history();
    h.store_error = !c->records ? c->store_error : counters.history_error;
    h.websocket_clients = c->ws ? c->ws->clients() : 0;
    const bool ok = problems.empty();
    h.problems = std::move(problems);
    auto j = wire::health_json(h);
    // The home monitor's keys: GPUs count as monitored only while the reading is good and fresh.
    wire::GpuMonitoring gm;
    gm.backend = h.backend_name;
    if (latest) {
      const auto a = age_of(*c, *latest);
      gm.stale = a.stale;
      gm.age_s = a.age_s;
      if (a.stale) gm.last_error = stale_cause(*c, a.age_s);
    }
    if (!counters.last_error.empty() && gm.last_error.empty()) gm.last_error = counters.last_error;
    if (!has_backend && gm.last_error.empty()) gm.last_error = "no GPU backend is usable here";
    gm.available = has_backend && latest && !gm.stale && counters.last_error.empty();
    gm.gpu_count = gm.available ? latest->snapshot->gpus.size() : 0;
    wire::add_seed_health(j, gm, h.store_ok);
    return json_response(ok ? 200 : 503, j);
  });
}

// gpufleet's own views of the reading, marked with its freshness.
void add_reading_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/v1/gpus/{index}", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    const std::string& s = req.params.at("index");
    const auto parsed = core::parse_uint(s, 0, 999999);
    if (!parsed)
      return error_response(ErrorKind::Invalid, "GPU index must be a non-negative integer (got '" + s + "')");
    const auto index = static_cast<unsigned>(*parsed);
    auto p = current(*c, req);
    if (!p) return unavailable("cannot read the GPUs: " + p.error().message);
    const auto a = age_of(*c, **p);
    for (const auto& g : (*p)->snapshot->gpus)
      if (g.index == index) {
        auto j = wire::gpu_detail_json(*(*p)->snapshot, g, c->node_name);
        wire::mark_freshness(j, a.stale, a.age_s);
        return json_response(200, j);
      }
    return error_response(ErrorKind::NotFound,
                          fmt::format("no GPU {} on this node ({} GPUs)", index, (*p)->snapshot->gpus.size()));
  });

  r.add(Method::Get, "/api/v1/processes", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = current(*c, req);
    if (!p) return unavailable("cannot read the GPUs: " + p.error().message);
    // Rendered once per reading; only the freshness is added per request.
    return shared_response(200, "application/json", (*p)->renderings->processes().with(freshness(age_of(*c, **p))));
  });

  r.add(Method::Get, "/api/v1/gpus", Access::Read, Exec::BlockingWhenFresh, [c](const Request& req) {
    auto p = current(*c, req);
    if (!p) return unavailable("cannot read the GPUs: " + p.error().message);
    // The gpu-metrics document with the reading's freshness: rendered once per reading.
    return shared_response(200, "application/json", (*p)->renderings->document().with(freshness(age_of(*c, **p))));
  });
}

// History and alert episodes (the store, through the agent).
void add_history_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/v1/history", Access::Read, Exec::Blocking, [c](const Request& req) {
    using namespace std::chrono;
    if (!c->agent->has_history())
      return error_response(ErrorKind::NotFound, "this agent keeps no history (--no-history)", "no_history");
    const auto now = c->clock->wall_now();
    auto gpu = query_int(req, "gpu", 0, 100000);
    if (!gpu) return error_response(ErrorKind::Invalid, gpu.error().message);
    const std::string metric_name = req.query.count("metric") ? req.query.at("metric") : "utilization";
    auto metric = core::parse_history_metric(metric_name);
    if (!metric) return error_response(ErrorKind::Invalid, metric.error().message);
    auto since = req.query.count("since") ? parse_time(req.query.at("since"), now)
                                          : Result<system_clock::time_point>(now - hours(1));
    if (!since) return error_response(ErrorKind::Invalid, "since: " + since.error().message);
    auto until =
        req.query.count("until") ? parse_time(req.query.at("until"), now) : Result<system_clock::time_point>(now);
    if (!until) return error_response(ErrorKind::Invalid, "until: " + until.error().message);
    if (*until <= *since) return error_response(ErrorKind::Invalid, "until must be after since");
    auto step_q = query_int(req, "step", 1, 366LL * 86400);
    if (!step_q) return error_response(ErrorKind::Invalid, step_q.error().message);
    // Server-side downsampling: at most ~500 points per series unless a step is asked for.
    const auto span = duration_cast<seconds>(*until - *since);
    seconds step = *step_q ? seconds(**step_q) : seconds(std::max<std::int64_t>(1, (span.count() + 499) / 500));
    if (span / step > 100000)
      return error_response(ErrorKind::Invalid, "too many points: use a larger step (at most 100000 per series)");

    std::vector<unsigned> gpus;
    if (*gpu) {
      gpus.push_back(static_cast<unsigned>(**gpu));
    } else if (auto p = c->agent->latest()) {
      for (const auto& g : p->snapshot->gpus) gpus.push_back(g.index);
    }
    std::vector<wire::HistorySeries> series;
    for (unsigned g : gpus) {
      auto pts = c->agent->history(g, *metric, *since, *until, step);
      if (!pts) return error_response(pts.error(), "store_error");
      series.push_back({g, std::move(*pts)});
    }
    return json_response(200, wire::history_json(*metric, c->node_name, *since, *until, step, series));
  });

  // ?gpu=N: that GPU's episodes only; ?since=&until= (the history route's syntax): those that overlap the
  // range. The store filters, so a GPU's episodes of last month are found however many newer ones the
  // other GPUs had. Without a filter: the newest `limit` episodes of all GPUs, as before.
  r.add(Method::Get, "/api/v1/alerts", Access::Read, Exec::Blocking, [c](const Request& req) {
    using std::chrono::system_clock;
    auto limit = query_int(req, "limit", 1, 10000);
    if (!limit) return error_response(ErrorKind::Invalid, limit.error().message);
    auto gpu = query_int(req, "gpu", 0, 100000);
    if (!gpu) return error_response(ErrorKind::Invalid, gpu.error().message);
    core::AlertQuery q;
    q.limit = static_cast<std::size_t>(limit->value_or(100));
    if (*gpu) q.gpu = static_cast<unsigned>(**gpu);
    const auto now = c->clock->wall_now();
    for (const char* key : {"since", "until"}) {
      if (!req.query.count(key)) continue;
      auto t = parse_time(req.query.at(key), now);
      if (!t) return error_response(ErrorKind::Invalid, std::string(key) + ": " + t.error().message);
      (key[0] == 's' ? q.since : q.until) = *t;
    }
    if (q.since && q.until && *q.until <= *q.since)
      return error_response(ErrorKind::Invalid, "until must be after since");
    auto recent = c->agent->recent_alerts(q);
    if (!recent) return error_response(recent.error(), "store_error");
    return json_response(200,
                         wire::alerts_doc_json(c->node_name, c->agent->firing(q), *recent, c->agent->alert_rules()));
  });
}

// Which GPUs a request could have now.
void add_availability_route(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/v1/availability", Access::Read, Exec::Blocking, [c](const Request& req) {
    auto gpus = query_int(req, "gpus", 1, 1024);
    auto floor = query_int(req, "min_memory_mb", 0, 1LL << 40);
    auto ceiling = query_int(req, "max_utilization", 0, 100);
    for (const auto* q : {&gpus, &floor, &ceiling})
      if (!*q) return error_response(ErrorKind::Invalid, q->error().message);
    // The seeds' rule by default: memory floor and utilization ceiling only, so a GPU with a small
    // resident process (an Xorg, an idle server) qualifies; exclusive=true also refuses every GPU that
    // runs a process gpufleet did not start.
    auto exclusive = query_bool(req, "exclusive", false);
    if (!exclusive) return error_response(ErrorKind::Invalid, exclusive.error().message);
    auto p = current(*c, req);
    if (!p) return unavailable("cannot read the GPUs: " + p.error().message);
    allocator::SelectRequest sr;
    sr.need.gpus = static_cast<unsigned>(gpus->value_or(1));
    sr.need.min_free_memory_mib = static_cast<std::uint64_t>(floor->value_or(core::kDefaultMinFreeMemoryMib));
    sr.need.max_utilization_pct = static_cast<unsigned>(ceiling->value_or(core::kDefaultMaxUtilizationPct));
    sr.need.allow_busy = !*exclusive;
    if (c->records) {
      auto active = c->records->active();
      if (!active) return error_response(active.error(), "store_error");
      for (const auto& l : *active)
        for (const auto& g : l.gpus) sr.leased.insert(g.index);
    }
    const auto& snap = *(*p)->snapshot;
    core::Topology topo;
    if (auto t = c->monitor->topology(); t) topo = std::move(*t);
    auto j = wire::availability_json(allocator::check_availability(snap, topo, sr), snap);
    const auto a = age_of(*c, **p);
    wire::mark_freshness(j, a.stale, a.age_s);
    return json_response(200, j);
  });
}

}  // namespace

void add_monitoring_routes(Router& r, ApiContext& ctx) {
  add_seed_routes(r, ctx);
  add_health_route(r, ctx);
  add_reading_routes(r, ctx);
  add_health_clear_route(r, ctx);
  add_history_routes(r, ctx);
  add_availability_route(r, ctx);
}

}  // namespace gf::server
