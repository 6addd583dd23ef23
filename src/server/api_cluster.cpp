// The fleet routes (see api_cluster.hpp).
#include "server/api_cluster.hpp"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "core/text.hpp"
#include "wire/fleet_json.hpp"

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
  std::shared_ptr<const allocator::FleetFacts> facts;
  allocator::Summaries summaries;
  wire::FleetQueryInfo info;
};

// The cached facts summarized under the request's thresholds, or the error response.
std::optional<Response> prepare(const ClusterView* view, const core::Clock& clock, const Request& req, Prepared& p) {
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
  allocator::RankOptions o;
  o.idle = p.info.idle;
  o.now = clock.wall_now();
  p.info.now = o.now;
  o.max_age = view->max_age;
  p.summaries = allocator::summarize(*p.facts, o);
  return std::nullopt;
}

}  // namespace

void add_cluster_routes(Router& r, const ClusterView* view, const core::Clock& clock) {
  r.add(Method::Get, "/api/v1/cluster/nodes", Access::Read, Exec::Blocking, [view, &clock](const Request& req) {
    Prepared p;
    if (auto e = prepare(view, clock, req, p)) return *e;
    return json_response(200, wire::fleet_nodes_json(p.summaries, *p.facts, p.info));
  });
  r.add(Method::Get, "/api/v1/cluster/gpus", Access::Read, Exec::Blocking, [view, &clock](const Request& req) {
    Prepared p;
    if (auto e = prepare(view, clock, req, p)) return *e;
    return json_response(200, wire::fleet_gpus_json(p.summaries, *p.facts, p.info));
  });
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
