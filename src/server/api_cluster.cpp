// The fleet routes (see api_cluster.hpp).
#include "server/api_cluster.hpp"

#include <malloc.h>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>

#include "core/text.hpp"
#include "wire/fleet_json.hpp"
#include "wire/gzip.hpp"

namespace gf::server {
namespace {

// A query parameter as a percentage: nullopt when absent (the caller keeps its default), an Invalid
// error when malformed.
Result<std::optional<double>> percent(const Request& req, const char* key) {
  const auto it = req.query.find(key);
  if (it == req.query.end() || it->second.empty()) return std::optional<double>();
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end != it->second.c_str() + it->second.size() || !std::isfinite(v) || v < 0 || v > 100)
    return make_error(ErrorKind::Invalid, std::string(key) + " must be a number from 0 to 100");
  return std::optional<double>(v);
}

struct Prepared {
  std::shared_ptr<const core::FleetFacts> facts;
  allocator::Summaries summaries;
  wire::FleetQueryInfo info;
};

void summarize(const ClusterView* view, std::chrono::system_clock::time_point now, Prepared& p) {
  allocator::RankOptions o;
  o.idle = p.info.idle;
  o.now = now;
  p.info.now = o.now;
  o.max_age = view->max_age;
  p.summaries = allocator::summarize(*p.facts, o);
}

// The cached facts and the request's thresholds (summarized under them unless `summarized` is false),
// or the error response.
std::optional<Response> prepare(const ClusterView* view, const core::Clock& clock, const Request& req, Prepared& p,
                                bool summarized = true) {
  if (view == nullptr)
    return error_response(503, "cluster_not_configured",
                          "this agent has no fleet view: start it with --cluster-config FILE or the source "
                          "options (--kubeconfig, --prometheus, --agent, …)");
  p.info.idle = view->idle;
  p.info.max_age = view->max_age;
  p.info.sources = view->sources;
  for (auto [key, slot] : {std::pair{"utilization_threshold", &p.info.idle.utilization_pct},
                           std::pair{"memory_threshold", &p.info.idle.memory_pct}}) {
    auto v = percent(req, key);
    if (!v) return error_response(400, "bad_request", v.error().message);
    if (*v) *slot = **v;
  }
  p.facts = view->latest ? view->latest() : nullptr;
  if (!p.facts) return error_response(503, "cluster_not_ready", "the first fleet refresh has not finished yet");
  if (summarized) summarize(view, clock.wall_now(), p);
  return std::nullopt;
}

using TimePoint = std::chrono::system_clock::time_point;

// The first time after `now` at which a document rendered at `now` from `facts` may read otherwise:
// a node's or a GPU's metrics turning stale (older than max_age), or the age a stale node's problem
// states ("metrics are 75 s old", whole seconds) moving on. `now` itself when a rounding falls on it.
TimePoint valid_until(const core::FleetFacts& facts, TimePoint now, std::chrono::milliseconds max_age) {
  using std::chrono::nanoseconds;
  TimePoint until = TimePoint::max();
  if (max_age.count() <= 0) return until;
  const auto flip = [&](const std::optional<TimePoint>& observed) {
    if (!observed) return;
    if (const auto t = *observed + max_age + nanoseconds(1); t > now) until = std::min(until, t);
  };
  for (const auto& m : facts.metrics) {
    flip(m.observed);
    for (const auto& g : m.gpus) flip(g.observed);
    if (m.observed && m.error.empty() && now - *m.observed > max_age) {
      // The stated age rounds at each half second past the observation.
      const auto half = std::chrono::milliseconds(500);
      auto since = (now - *m.observed - half) % std::chrono::seconds(1);
      if (since < std::chrono::system_clock::duration::zero()) since += std::chrono::seconds(1);
      if (since == std::chrono::system_clock::duration::zero()) return now;
      until = std::min(until, now + (std::chrono::seconds(1) - since));
    }
  }
  return until;
}

// One rendered document of a route, served again while the facts, the thresholds and its validity hold.
struct Rendered {
  std::shared_ptr<const core::FleetFacts> facts;  // held: its address cannot name other facts meanwhile
  allocator::IdleThresholds idle;
  TimePoint made{}, until{};
  std::shared_ptr<const std::string> body;
  std::shared_ptr<const std::string> gz;  // the same text gzip-encoded, made for the first client that accepts it
};

// The last document of /nodes and of /gpus. A dashboard asks with the default thresholds; other
// thresholds replace the entry, and are rendered for each request while they change.
class RenderMemo {
 public:
  // The kept texts (plain, gzip or null) when they answer this request; a null plain text when not.
  std::pair<std::shared_ptr<const std::string>, std::shared_ptr<const std::string>> find(bool gpus, const Prepared& p,
                                                                                         TimePoint now) const {
    std::lock_guard lock(mu_);
    const Rendered& r = gpus ? gpus_ : nodes_;
    if (r.body && r.facts == p.facts && r.idle.utilization_pct == p.info.idle.utilization_pct &&
        r.idle.memory_pct == p.info.idle.memory_pct && now >= r.made && now < r.until)
      return {r.body, r.gz};
    return {};
  }
  void keep(bool gpus, Rendered r) {
    std::lock_guard lock(mu_);
    (gpus ? gpus_ : nodes_) = std::move(r);
  }
  // Keeps the gzip text of `body` when that is still the kept text.
  void keep_gzip(bool gpus, const std::shared_ptr<const std::string>& body, std::shared_ptr<const std::string> gz) {
    std::lock_guard lock(mu_);
    if (Rendered& r = gpus ? gpus_ : nodes_; r.body == body) r.gz = std::move(gz);
  }
  // Held while a route's text is rendered or encoded: the requests that miss together wait for one
  // rendering instead of each making its own (16 at once made 16 trees of 80 000 GPUs, ~100 MB each).
  std::mutex& making(bool gpus) { return gpus ? making_gpus_ : making_nodes_; }

 private:
  mutable std::mutex mu_;
  Rendered nodes_, gpus_;
  std::mutex making_nodes_, making_gpus_;
};

// GET /nodes or /gpus: the memoized text, else summarized and rendered once for every reader after.
Response fleet_document(const ClusterView* view, const core::Clock& clock, RenderMemo& memo, bool gpus,
                        const Request& req) {
  Prepared p;
  if (auto e = prepare(view, clock, req, p, false)) return *e;
  auto [body, gz] = memo.find(gpus, p, clock.wall_now());
  if (body && (gz || !req.accepts_gzip))
    return encoded_response(req, 200, "application/json", std::move(body), std::move(gz));
  {
    std::lock_guard one(memo.making(gpus));
    const auto now = clock.wall_now();
    std::tie(body, gz) = memo.find(gpus, p, now);  // made meanwhile by the request this one waited for?
    if (!body) {
      summarize(view, now, p);
      const auto j = gpus ? wire::fleet_gpus_json(p.summaries, *p.facts, p.info)
                          : wire::fleet_nodes_json(p.summaries, *p.facts, p.info);
      body = std::make_shared<const std::string>(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      memo.keep(gpus, Rendered{p.facts, p.info.idle, now, valid_until(*p.facts, now, view->max_age), body, nullptr});
    }
    // 10 000 nodes are 8.5 MB of JSON and 205 kB gzip-encoded: the bytes, not the rendering, limit the
    // requests a second, so the encoded text is made once too, for the first client that accepts it.
    if (req.accepts_gzip && !gz) {
      gz = std::make_shared<const std::string>(wire::gzip(*body));
      memo.keep_gzip(gpus, body, gz);
    }
  }
  // The tree the text was rendered from (~100 MB for 10 000 nodes × 8 GPUs on /gpus) is freed now, and
  // the previous facts with the text they replace: malloc keeps such pages in this worker's arena
  // unless told (RSS 516 MiB after a few refreshes and renders, most of it free).
  ::malloc_trim(0);
  return encoded_response(req, 200, "application/json", std::move(body), std::move(gz));
}

}  // namespace

void add_cluster_routes(Router& r, const ClusterView* view, const core::Clock& clock) {
  auto memo = std::make_shared<RenderMemo>();
  r.add(Method::Get, "/api/v1/cluster/nodes", Access::Read, Exec::Blocking,
        [view, &clock, memo](const Request& req) { return fleet_document(view, clock, *memo, false, req); });
  r.add(Method::Get, "/api/v1/cluster/gpus", Access::Read, Exec::Blocking,
        [view, &clock, memo](const Request& req) { return fleet_document(view, clock, *memo, true, req); });
  r.add(Method::Get, "/api/v1/cluster/select", Access::Read, Exec::Blocking, [view, &clock](const Request& req) {
    Prepared p;
    if (auto e = prepare(view, clock, req, p)) return *e;
    std::uint64_t gpus = 1;
    if (const auto it = req.query.find("gpus"); it != req.query.end()) {
      const auto v = core::parse_uint(it->second, 1, 4096);
      if (!v) return error_response(400, "bad_request", "gpus must be an integer from 1 to 4096");
      gpus = *v;
    }
    auto fallback = view->fallback;
    if (const auto it = req.query.find("fallback"); it != req.query.end()) {
      if (it->second == "none")
        fallback = allocator::Fallback::None;
      else if (it->second == "least-loaded" || it->second == "least_loaded")
        fallback = allocator::Fallback::LeastLoaded;
      else
        return error_response(400, "bad_request", "fallback must be none or least-loaded");
    }
    std::string resource;  // empty: any GPU node
    if (const auto it = req.query.find("gpu_resource"); it != req.query.end() && it->second != "any") {
      if (it->second != "nvidia.com/gpu" && it->second != "amd.com/gpu")
        return error_response(400, "bad_request", "gpu_resource must be nvidia.com/gpu, amd.com/gpu or any");
      resource = it->second;
    }
    // When Kubernetes did not answer, the document says so (node null, source_failed, the reason).
    const auto choice = allocator::select_node(p.summaries, gpus, fallback, resource);
    return json_response(200, wire::node_choice_json(choice, gpus, fallback, *p.facts, p.info));
  });
}

}  // namespace gf::server
