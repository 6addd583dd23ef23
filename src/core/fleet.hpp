#pragma once
// The fleet's raw facts, as the discovery sources deliver them: what the Kubernetes API says of each
// node (GPU capacity, what pods request, readiness), and what metrics say of each node's GPUs
// (Prometheus or gpufleet agents). Pure data; the node summaries and ranking are built from these by
// allocator/node_rank. Units in names: _pct (0..100), _mib (2^20 bytes), _c (°C), _w (W).
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gf::core {

// One node as the Kubernetes API reports it.
struct KubeNode {
  std::string name;
  std::string gpu_resource;  // "nvidia.com/gpu", "amd.com/gpu"; empty when it has neither
  std::uint64_t gpu_capacity = 0;
  std::uint64_t gpu_allocatable = 0;
  // GPUs requested by the node's pods that are not Succeeded or Failed (per pod the larger of the sum
  // over its containers and its largest init container). Allocatable never drops when pods take GPUs:
  // free = allocatable - requested.
  std::uint64_t gpu_requested = 0;
  std::string gpu_product;     // nvidia.com/gpu.product (or the AMD equivalent); empty: unknown
  bool ready = false;          // the Ready condition is True
  bool unschedulable = false;  // spec.unschedulable (cordoned)
  std::map<std::string, std::string> labels;
};

// One GPU as metrics describe it. Absent values are nullopt, never 0.
struct FleetGpu {
  std::string node;
  unsigned index = 0;
  std::string uuid;
  std::string model;
  std::optional<double> utilization_pct;
  std::optional<double> memory_used_mib;
  std::optional<double> memory_total_mib;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  // Why the node's agent calls this GPU unhealthy (a critical XID, a failed row remap: core/gpu_health);
  // empty when healthy or not said (Prometheus). An unhealthy GPU is never idle nor free to place on.
  std::string unhealthy;
  // When this GPU's newest sample was taken, where the source says so per GPU (Prometheus); nullopt:
  // only the node's `observed` is known. A GPU whose series stopped is stale even beside fresh ones.
  std::optional<std::chrono::system_clock::time_point> observed;
};

// What one metrics source knows of one node.
struct NodeMetrics {
  std::string node;
  std::string source;     // "prometheus", "agent"
  std::string agent_url;  // the node's agent (dashboard link); empty when unknown
  // The GPUs' Kubernetes resource as the source knows it ("nvidia.com/gpu" from an agent whose backend
  // is NVML or nvidia-smi, "amd.com/gpu" from amdgpu); empty when the source does not say.
  std::string gpu_resource;
  std::vector<FleetGpu> gpus;
  std::optional<std::chrono::system_clock::time_point> observed;  // newest sample time
  std::string error;  // why there are no metrics (agent unreachable …); empty when fine
};

// Everything the fleet's sources delivered at one moment (cluster::gather_fleet), which the ranking
// (allocator::summarize) and the documents (wire/fleet_json) read.
struct FleetFacts {
  std::optional<std::vector<KubeNode>> kube;  // nullopt: no Kubernetes source (metrics only)
  std::vector<NodeMetrics> metrics;           // at most one entry per node is used (the first)
  std::vector<std::string> source_errors;     // whole sources that failed ("prometheus http://…: …")
  // Kubernetes is a configured source and its read failed ("kubernetes: HTTP 401 …"; also in
  // source_errors). Then `kube` is nullopt, the summaries are the metrics' alone, and no node is chosen:
  // readiness, cordons and the GPUs pods hold are unknown, and a pin on such partial facts could land
  // on a cordoned or full node.
  std::optional<std::string> kube_error;
  std::optional<std::chrono::system_clock::time_point> collected;  // when these facts were gathered
};

}  // namespace gf::core
