#pragma once
// The agent's REST API: handlers registered on a Router. They read what the collection loop published
// (Agent) and, for leases and jobs, the node store (NodeJobs). No HTTP library here.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "sampler/monitor.hpp"
#include "scheduler/node_allocator.hpp"
#include "server/agent.hpp"
#include "server/router.hpp"
#include "server/ws_hub.hpp"
#include "store/node_store.hpp"

namespace gf::server {

// The node store and an allocator over it, behind one lock (a store connection is single-threaded).
// Allocation decides on a fresh driver query, like the CLI's `alloc`.
class NodeJobs {
 public:
  NodeJobs(std::unique_ptr<store::NodeStore> store, sampler::Monitor& monitor);
  template <class F>
  auto with(F&& f) {
    std::lock_guard lock(mu_);
    return f(*store_, *allocator_);
  }
  const std::string& path() const { return store_->path(); }

  struct Counts {
    std::size_t active_leases = 0;
    std::size_t waiting = 0;
    std::size_t jobs_running = 0;
    std::uint64_t jobs_finished = 0;
  };
  // Counted at most once a second; never waits for a store another request holds (the last counts
  // are returned then). nullopt when they could never be read.
  std::optional<Counts> counts();

 private:
  std::mutex mu_;
  std::optional<Counts> cached_;
  std::chrono::steady_clock::time_point counted_at_{};
  std::unique_ptr<store::NodeStore> store_;
  std::unique_ptr<scheduler::NodeAllocator> allocator_;
};

struct ApiContext {
  Agent* agent = nullptr;
  sampler::Monitor* monitor = nullptr;
  WsHub* ws = nullptr;          // may be null (no WebSocket)
  NodeJobs* jobs = nullptr;     // may be null: the store could not be opened (endpoints answer 503)
  std::string store_error;      // why jobs is null
  std::string version;
  std::string node_name;
  std::chrono::steady_clock::time_point started{};
  std::chrono::milliseconds interval{1000};
};

void add_monitoring_routes(Router& r, ApiContext& ctx);
void add_job_routes(Router& r, ApiContext& ctx);
// GET /api/openapi.json, GET /metrics.
void add_meta_routes(Router& r, ApiContext& ctx);

// The OpenAPI 3 document describing every route (api_openapi.cpp).
const std::string& openapi_document();

// Query helpers shared by the handlers. Each returns an error sentence for a 400 when the value is bad.
Result<std::optional<std::int64_t>> query_int(const Request& req, const std::string& key, std::int64_t min, std::int64_t max);
// Epoch seconds (fractions allowed), ISO 8601 UTC ("2026-11-23T10:00:00Z"), or a duration before now
// ("90s", "15m", "2h", "7d").
Result<std::chrono::system_clock::time_point> parse_time(std::string_view text, std::chrono::system_clock::time_point now);

}  // namespace gf::server
