#pragma once
// Fleet placement policy: per-node GPU summaries built from what Kubernetes says of each node
// (core::KubeNode, optional: a fleet without Kubernetes has only metrics) and what metrics say of its
// GPUs (core::NodeMetrics, from Prometheus or gpufleet agents), and the choice of one node for a job
// that needs N GPUs, in the order of the OME seed:
//   1. nodes with at least N idle GPUs first,
//   2. then more idle GPUs,
//   3. then lower mean utilization,
//   4. then the tightest fit (fewest free GPUs), so large free blocks stay whole for large jobs,
//   5. then the name, so equal nodes always give the same answer.
// Only nodes that can host the job are candidates: Ready, schedulable, at least N free GPUs, and the
// GPU resource (vendor) the job asks for when it names one.
//
// An unhealthy GPU (core::FleetGpu::unhealthy: a critical XID, a failed row remap, lost) is neither
// idle nor free. Without Kubernetes free is the healthy GPUs seen. With Kubernetes, free is at most
// min(allocatable, capacity - unhealthy) - requested: NVIDIA's device plugin may already have taken an
// unhealthy GPU out of allocatable, and then nothing is taken twice. Refusals and the choice say how
// many GPUs a node lost to health and why ("2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus)").
//
// A GPU is idle when its utilization is below utilization_pct AND its used memory is below
// memory_pct of its total (capacity, not NVML's "memory utilization", which is bandwidth). A node
// without usable metrics counts its free GPUs as idle (the seed's rule: nothing measured runs there);
// where Kubernetes knows the node, idle never exceeds free.
//
// Pure functions: no I/O, and the time is passed in. Safe to call from any thread.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/fleet.hpp"

namespace gf::allocator {

// Both bounds are strict: a GPU at exactly 30 % utilization is not idle.
struct IdleThresholds {
  double utilization_pct = 30.0;
  double memory_pct = 50.0;
};

struct RankOptions {
  IdleThresholds idle;
  std::chrono::system_clock::time_point now{};
  // Metrics whose newest sample is older than this count as no metrics. Zero: never stale.
  std::chrono::milliseconds max_age{60000};
};

// The node's state, worst first when several apply (the summary keeps the worst; `problems` has all).
enum class NodeHealth { NotReady, Unschedulable, AgentUnreachable, MetricsError, MetricsStale, NoMetrics, Ok };
// "not_ready", "unschedulable", "agent_unreachable", "metrics_error", "metrics_stale", "no_metrics", "ok".
std::string_view health_name(NodeHealth h) noexcept;

// Where each number of a summary came from, in words ("kubernetes: capacity", "prometheus",
// "assumed: no metrics, free GPUs counted idle", …). Static text: copying a summary copies no string.
struct Provenance {
  std::string_view total_gpus;
  std::string_view allocatable_gpus;
  std::string_view requested_gpus;
  std::string_view free_gpus;
  std::string_view idle_gpu_count;
  std::string_view utilization;   // avg_utilization and avg_memory_usage
  std::string_view gpu_resource;  // "kubernetes: node resources", "inferred from the GPU model", "unknown"
};

// The node's unhealthy GPUs as its fresh metrics name them.
struct UnhealthyGpus {
  std::uint64_t count = 0;
  // "XID 79 (GPU has fallen off the bus)", or several reasons joined by "; " (the first three, then
  // "…"); empty when count is 0.
  std::string why;
};
// "2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus)"; empty when none.
std::string unhealthy_words(const UnhealthyGpus& u);

struct NodeSummary {
  std::string name;
  bool in_kubernetes = false;  // Kubernetes reported the node
  // "nvidia.com/gpu", "amd.com/gpu": Kubernetes' resource for the node's GPUs; without Kubernetes,
  // inferred from the model names the metrics report (gpu_resource_of_model). Empty when unknown.
  std::string gpu_resource;
  std::string gpu_product;  // Kubernetes' product label, else the model metrics name
  std::uint64_t total_gpus = 0;
  std::uint64_t allocatable_gpus = 0;
  std::uint64_t requested_gpus = 0;
  std::uint64_t free_gpus = 0;  // allocatable - requested (never below 0)
  std::uint64_t idle_gpu_count = 0;
  std::uint64_t gpus_with_metrics = 0;     // GPUs with utilization and memory used/total
  std::optional<double> avg_utilization;   // %, over gpus_with_metrics; nullopt without metrics
  std::optional<double> avg_memory_usage;  // % of capacity, same GPUs
  std::optional<double> avg_temperature_c;
  std::optional<double> total_power_w;
  UnhealthyGpus unhealthy;  // not counted in free_gpus nor idle_gpu_count
  bool ready = false;
  bool schedulable = false;
  bool has_metrics = false;    // usable, fresh metrics
  std::string metrics_source;  // "prometheus", "agent"; empty: none
  std::string agent_url;
  std::optional<std::chrono::system_clock::time_point> observed;
  NodeHealth health = NodeHealth::NoMetrics;
  std::vector<std::string> problems;  // every reason the node is less than fully known or usable
  Provenance from;
};

// One summary per node known to either side, sorted by name. Metrics for a node Kubernetes does not
// list still make a summary when `facts.kube` is nullopt (metrics-only fleet); when Kubernetes is a
// source, such nodes are left out (they are not nodes the scheduler could place on) — unknown_nodes
// names them.
struct Summaries {
  std::vector<NodeSummary> nodes;
  std::vector<std::string> unknown_nodes;  // metrics for nodes Kubernetes does not list
  std::optional<std::string> kube_error;   // core::FleetFacts::kube_error: select_node chooses no node
};
Summaries summarize(const core::FleetFacts& facts, const RankOptions& options);

// Whether one GPU is idle under the thresholds; false when its utilization or memory is unknown.
bool gpu_is_idle(const core::FleetGpu& g, const IdleThresholds& t) noexcept;

// The Kubernetes resource a GPU model name belongs to: "nvidia.com/gpu" for NVIDIA's names ("NVIDIA H100
// 80GB HBM3", "Tesla V100-SXM2-16GB", GeForce, Quadro), "amd.com/gpu" for AMD's ("AMD Instinct MI300X",
// "AMD GPU [1002:74a1]", Radeon); empty when the name says neither.
std::string_view gpu_resource_of_model(std::string_view model) noexcept;

enum class Fallback {
  None,         // no node with enough idle GPUs: no pin, the reason says why (the default)
  LeastLoaded,  // then the candidate with the lowest mean utilization that has enough free GPUs
};

struct Candidate {
  std::string node;
  bool eligible = false;                 // Ready, schedulable, enough free GPUs
  bool enough_idle = false;              // idle_gpu_count >= required
  std::string why_not;                   // for an ineligible node: one sentence
  const NodeSummary* summary = nullptr;  // into the Summaries passed to select_node
};

struct NodeChoice {
  std::optional<std::string> node;     // nullopt: no pin
  bool fallback_used = false;          // chosen by Fallback::LeastLoaded
  bool source_failed = false;          // Kubernetes did not answer (Summaries::kube_error): nothing chosen
  std::string gpu_resource;            // the GPU resource asked for; empty: any
  std::string reason;                  // one sentence: why this node, or why none
  std::vector<std::string> reasoning;  // the seed's lines ("Selected node 'x' for deployment:", …)
  std::vector<Candidate> candidates;   // eligible nodes in rank order, then the others by name
};

// Chooses the node for a job of `required_gpus` (at least 1). `gpu_resource` ("nvidia.com/gpu",
// "amd.com/gpu") limits the candidates to nodes whose GPUs are that resource: a workload built for one
// vendor's GPUs never lands on the other's (a node whose resource is unknown is no candidate either).
// Empty: any GPU node. When s.kube_error is set no node is chosen (source_failed), whatever the rest.
NodeChoice select_node(const Summaries& s, std::uint64_t required_gpus, Fallback fallback = Fallback::None,
                       std::string_view gpu_resource = {});

}  // namespace gf::allocator
