#pragma once
// The fleet routes of `gpufleet serve --cluster-config FILE`:
//   GET /api/v1/cluster/nodes[?utilization_threshold=&memory_threshold=]
//   GET /api/v1/cluster/gpus[?utilization_threshold=&memory_threshold=]
//   GET /api/v1/cluster/select?gpus=N[&utilization_threshold=&memory_threshold=&fallback=none|least-loaded
//                                     &gpu_resource=nvidia.com/gpu|amd.com/gpu|any]
//   (200 with "node": null and the reason when no node qualifies, or when the configured Kubernetes
//   source did not answer — then "source_failed": true and no node is chosen from the other sources)
// They read the facts a background refresh published (never a fleet query on the request path); only
// the summaries and the ranking are computed from the cached facts: per request for select, once per
// refresh for /nodes and /gpus (the text is kept and shared until new facts come, other thresholds are
// asked for, or a node's or GPU's metrics turn stale by the clock). Without a cluster
// view (no --cluster-config) the routes exist and answer 503 saying how to turn them on.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "allocator/node_rank.hpp"
#include "core/ports/clock.hpp"
#include "platform/clock.hpp"
#include "server/router.hpp"

namespace gf::server {

struct ClusterView {
  // The latest facts; null until the first refresh has finished. Called from worker threads.
  std::function<std::shared_ptr<const core::FleetFacts>()> latest;
  allocator::IdleThresholds idle;  // defaults of the thresholds
  allocator::Fallback fallback = allocator::Fallback::None;
  std::chrono::milliseconds max_age{60000};
  std::vector<std::string> sources;  // described, for the documents
};

// view may be null (routes answer 503). The view and the clock outlive the router; the clock's wall
// time is "now" for the facts' ages (metrics older than max_age count as none).
void add_cluster_routes(Router& r, const ClusterView* view, const core::Clock& clock = platform::system_clock());

}  // namespace gf::server
