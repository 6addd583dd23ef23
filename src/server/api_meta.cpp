// GET /metrics (Prometheus text, dcgm-exporter names), GET /api/openapi.json and GET /api/v1/fields.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/api.hpp"
#include "wire/gzip.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::server {

namespace {

// The agent's own series (uptime, collection counters, leases and jobs, alerts, WebSocket clients, the
// users' accounting), rendered at most once a second on the routes' clock and again for each new
// reading, with their gzip end for that reading's compressed GPU part: a scrape between two renderings
// sends prebuilt buffers only. They may so be up to a second old (as the store's counts already are,
// node::NodeRecords::counts); the GPU series are the reading's.
class AgentSeries {
 public:
  struct Texts {
    std::shared_ptr<const std::string> plain;
    std::shared_ptr<const std::string> gz;  // null unless asked for with gzip
  };
  // The texts for reading p at `now`; gz made too when `gzip` is set.
  Texts get(const ApiContext& c, const node::Published& p, std::chrono::steady_clock::time_point now, bool gzip) {
    std::lock_guard lock(mu_);
    if (!plain_ || p.sequence != sequence_ || now < made_ || now - made_ >= std::chrono::seconds(1)) {
      plain_ = std::make_shared<const std::string>(render(c, p, now));
      gz_.reset();
      sequence_ = p.sequence;
      made_ = now;
    }
    if (gzip && !gz_) {
      const auto& head = p.renderings->prometheus_gpus_gzip();
      gz_ = std::make_shared<const std::string>(wire::gzip_tail(*head, *plain_));
    }
    return {plain_, gzip ? gz_ : nullptr};
  }

 private:
  static std::string render(const ApiContext& c, const node::Published& p, std::chrono::steady_clock::time_point now) {
    const auto counters = c.agent->counters();
    wire::AgentStats st;
    st.version = c.version;
    st.backend = c.monitor->backend_name();
    st.uptime_seconds = std::chrono::duration<double>(now - c.started).count();
    st.collections_total = counters.collections;
    st.collection_errors_total = counters.collection_errors;
    st.last_collection_duration_seconds = std::chrono::duration<double>(counters.last_query_duration).count();
    if (c.records)
      if (auto n = c.records->counts()) {
        st.active_leases = n->active_leases;
        st.waiting_jobs = n->waiting;
        st.jobs_running = n->jobs_running;
        st.jobs_finished_total = n->jobs_finished;
      }
    // While the agent runs, acquires wait in the arbiter's queue, not the store's.
    if (c.arbiter) st.waiting_jobs += c.arbiter->waiting_count();  // never waits for the arbiter's lock
    st.alerts_firing = c.agent->firing().size();
    st.websocket_clients = c.ws ? c.ws->clients() : 0;
    std::string agent;
    agent.reserve(2048);
    wire::write_prometheus_agent(agent, p.snapshot->backend, c.node_name, st);
    if (c.usage) {
      std::vector<wire::UserUsage> users;
      for (const auto& u : c.usage->counters()) users.push_back({u.user, u.held_gpu_s, u.busy_gpu_s, u.energy_j});
      wire::write_prometheus_users(agent, c.node_name, users);
    }
    return agent;
  }

  std::mutex mu_;
  std::shared_ptr<const std::string> plain_, gz_;
  std::uint64_t sequence_ = 0;
  std::chrono::steady_clock::time_point made_{};
};

}  // namespace

void add_meta_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;

  // The GPU half is rendered (and gzip-encoded) once per reading (node::Renderings), the agent's series
  // at most once a second (AgentSeries); both go out as they are, the agent's as the answer's tail.
  r.add(Method::Get, "/metrics", Access::Read, Exec::Inline,
        [c, series = std::make_shared<AgentSeries>()](const Request& req) {
          auto p = c->agent->latest();
          if (!p) return error_response(ErrorKind::NotReady, "no reading yet");
          auto agent = series->get(*c, *p, c->clock->now(), req.accepts_gzip);
          Response r;
          if (req.accepts_gzip) {
            const auto& head = p->renderings->prometheus_gpus_gzip();
            r = encoded_response(req, 200, std::string(wire::kPrometheusContentType), nullptr,
                                 std::shared_ptr<const std::string>(head, &head->bytes));
            r.tail = std::move(agent.gz);
          } else {
            r = encoded_response(req, 200, std::string(wire::kPrometheusContentType), p->renderings->prometheus_gpus(),
                                 nullptr);
            r.tail = std::move(agent.plain);
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
