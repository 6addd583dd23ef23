#pragma once
// The fleet's JSON documents (`gpufleet cluster … --json` and GET /api/v1/cluster/…): node summaries,
// GPUs, and a node selection. Pure encoders: no I/O. Keys are the OME seed's where it has them
// (total_gpus, allocatable_gpus, idle_gpu_count, avg_utilization, …); percentages are 0..100 rounded
// to 0.1, memory in MiB; an unknown value is null, never 0.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "allocator/node_rank.hpp"
#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::wire {

// What a document says about the query that produced it.
struct FleetQueryInfo {
  allocator::IdleThresholds idle;
  std::chrono::milliseconds max_age{60000};
  std::vector<std::string> sources;  // "prometheus http://…", "agents (3)"
  // "Now" of the summaries (RankOptions::now): a GPU's series older than max_age at this time counts as
  // no metrics in the GPU list as in the node summaries. Unset: the facts' collection time.
  std::optional<std::chrono::system_clock::time_point> now;
};

nlohmann::json node_summary_json(const allocator::NodeSummary& n);
// {"nodes": [...], "unknown_nodes": [...], "errors": [...], "thresholds": {...}, "sources": [...], "collected": …}
nlohmann::json fleet_nodes_json(const allocator::Summaries& s, const core::FleetFacts& facts, const FleetQueryInfo& q);
// {"gpus": [...every GPU with fresh metrics...], "nodes_without_metrics": [{"node", "health", "reason"}], …}
nlohmann::json fleet_gpus_json(const allocator::Summaries& s, const core::FleetFacts& facts, const FleetQueryInfo& q);
// {"node": NAME or null, "reason": …, "required_gpus": N, "fallback": …, "fallback_used": …,
//  "gpu_resource": NAME or null (any), "source_failed": true when Kubernetes did not answer and so no
//  node was chosen, "reasoning": [...], "candidates": [...], "thresholds": {...}, "errors": [...],
//  "kubernetes_error": the Kubernetes source's error or null}
nlohmann::json node_choice_json(const allocator::NodeChoice& c, std::uint64_t required_gpus,
                                allocator::Fallback fallback, const core::FleetFacts& facts, const FleetQueryInfo& q);

std::string_view fallback_name(allocator::Fallback f) noexcept;  // "none", "least-loaded"

// An agent's GET /api/v1/monitoring/gpu-metrics (snapshot_json, wire/json.hpp) as the fleet reads it:
// each GPU's index, uuid, name, utilization, memory used and total, temperature, power and health. The
// metrics are read at their field table keys (core::info(Field::…).json_key), as the encoder writes them.
// `metrics.node` is the document's "node" (empty when it has none); source, agent_url and gpu_resource
// are the caller's to fill; `backend` is the document's "backend". Errors name what is wrong: not a JSON
// object, no "gpus" array, a GPU without a valid index, a "timestamp" that parse_iso8601 refuses.
// Never throws.
struct AgentGpuMetrics {
  core::NodeMetrics metrics;
  std::string backend;
};
Result<AgentGpuMetrics> node_metrics_from_gpu_metrics(std::string_view body);

}  // namespace gf::wire
