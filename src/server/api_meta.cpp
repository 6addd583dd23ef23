// GET /metrics (Prometheus text, dcgm-exporter names) and GET /api/openapi.json.
#include <chrono>

#include "server/api.hpp"
#include "wire/prometheus.hpp"

namespace gf::server {

void add_meta_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;

  r.add(Method::Get, "/metrics", Access::Read, Exec::Inline, [c](const Request&) {
    auto p = c->agent->latest();
    if (!p) return error_response(503, "unavailable", "no reading yet");
    const auto counters = c->agent->counters();
    wire::AgentStats st;
    st.version = c->version;
    st.backend = c->monitor->backend_name();
    st.uptime_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c->started).count();
    st.collections_total = counters.collections;
    st.collection_errors_total = counters.collection_errors;
    st.last_collection_duration_seconds = std::chrono::duration<double>(counters.last_query_duration).count();
    if (c->jobs)
      if (auto n = c->jobs->counts()) {
        st.active_leases = n->active_leases;
        st.waiting_jobs = n->waiting;
        st.jobs_running = n->jobs_running;
        st.jobs_finished_total = n->jobs_finished;
      }
    st.alerts_firing = c->agent->firing().size();
    st.websocket_clients = c->ws ? c->ws->clients() : 0;
    auto body = std::make_shared<std::string>();
    body->reserve(16 * 1024);
    wire::write_prometheus(*body, *p->snapshot, c->node_name, st);
    return shared_response(200, std::string(wire::kPrometheusContentType), std::move(body));
  });

  r.add(Method::Get, "/api/openapi.json", Access::Read, Exec::Inline, [](const Request&) {
    static const auto doc = std::make_shared<const std::string>(openapi_document());
    return shared_response(200, "application/json", doc);
  });
}

}  // namespace gf::server
