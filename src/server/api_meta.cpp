// GET /metrics (Prometheus text, dcgm-exporter names), GET /api/openapi.json and GET /api/v1/fields.
#include <chrono>
#include <memory>

#include "server/api.hpp"
#include "wire/gzip.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::server {

void add_meta_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;

  r.add(Method::Get, "/metrics", Access::Read, Exec::Inline, [c](const Request& req) {
    auto p = c->agent->latest();
    if (!p) return error_response(ErrorKind::NotReady, "no reading yet");
    const auto counters = c->agent->counters();
    wire::AgentStats st;
    st.version = c->version;
    st.backend = c->monitor->backend_name();
    st.uptime_seconds = std::chrono::duration<double>(c->clock->now() - c->started).count();
    st.collections_total = counters.collections;
    st.collection_errors_total = counters.collection_errors;
    st.last_collection_duration_seconds = std::chrono::duration<double>(counters.last_query_duration).count();
    if (c->records)
      if (auto n = c->records->counts()) {
        st.active_leases = n->active_leases;
        st.waiting_jobs = n->waiting;
        st.jobs_running = n->jobs_running;
        st.jobs_finished_total = n->jobs_finished;
      }
    // While the agent runs, acquires wait in the arbiter's queue, not the store's.
    if (c->arbiter) st.waiting_jobs += c->arbiter->waiting_count();  // never waits for the arbiter's lock
    st.alerts_firing = c->agent->firing().size();
    st.websocket_clients = c->ws ? c->ws->clients() : 0;
    // The GPU half is rendered (and gzip-encoded) once per reading (node::Renderings) and sent as it is;
    // each scrape renders the agent's series after it, the tail of the answer.
    std::string agent;
    agent.reserve(2048);
    wire::write_prometheus_agent(agent, p->snapshot->backend, c->node_name, st);
    if (c->usage) {
      std::vector<wire::UserUsage> users;
      for (const auto& u : c->usage->counters()) users.push_back({u.user, u.held_gpu_s, u.busy_gpu_s, u.energy_j});
      wire::write_prometheus_users(agent, c->node_name, users);
    }
    Response r;
    if (req.accepts_gzip) {
      const auto& head = p->renderings->prometheus_gpus_gzip();
      r = encoded_response(req, 200, std::string(wire::kPrometheusContentType), nullptr,
                           std::shared_ptr<const std::string>(head, &head->bytes));
      r.tail = std::make_shared<const std::string>(wire::gzip_tail(*head, agent));
    } else {
      r = encoded_response(req, 200, std::string(wire::kPrometheusContentType), p->renderings->prometheus_gpus(),
                           nullptr);
      r.tail = std::make_shared<const std::string>(std::move(agent));
    }
    return r;
  });

  r.add(Method::Get, "/api/openapi.json", Access::Read, Exec::Inline, [](const Request&) {
    static const auto doc = std::make_shared<const std::string>(openapi_document());
    return shared_response(200, "application/json", doc);
  });

  r.add(Method::Get, "/api/v1/fields", Access::Read, Exec::Inline, [](const Request&) {
    static const auto doc = std::make_shared<const std::string>(wire::fields_json().dump());
    return shared_response(200, "application/json", doc);
  });
}

}  // namespace gf::server
