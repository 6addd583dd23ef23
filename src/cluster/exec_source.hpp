#pragma once
// The fleet's GPU metrics as seed 002 gathers them, with neither gpufleet agents nor an exporter: for
// each Kubernetes node whose GPUs are nvidia.com/gpu, one running pod on that node that requests
// nvidia.com/gpu is chosen, and nvidia-smi's CSV query runs inside its GPU container through pods/exec
// (exec_client.hpp). The output is parsed by the nvidia-smi backend's own parser
// (backends/nvidia_smi/csv.hpp), with the same --query-gpu field lists, newest first.
//
// Opt-in (FleetSources::exec): it runs a command in other users' containers. The command is fixed:
//   nvidia-smi --query-gpu=<the backend's field list> --format=csv,noheader,nounits
// no part of it comes from a user, a pod or the cluster.
//
// A node without such a pod has no metrics (its free GPUs count as idle, the seed's rule); a node
// whose exec fails has metrics with `error` set (source "exec"), and the other nodes go on.
// Thread-safety: exec_fleet runs its own bounded pool of threads and returns when all are done; the
// pure functions may be called from any thread.
#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backends/nvidia_smi/csv.hpp"
#include "cluster/exec_client.hpp"
#include "cluster/kube_client.hpp"
#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::cluster {

struct ExecSourceOptions {
  unsigned parallel = 8;                      // pods exec'ed at once (1..64)
  std::chrono::milliseconds timeout{10000};   // each pod's whole exec
  std::size_t max_output_bytes = 256 * 1024;  // nvidia-smi's CSV is ~300 bytes per GPU
};

// The exact command run in each pod for one field list.
std::vector<std::string> exec_nvidia_smi_command(std::span<const backends::nvidia_smi::Field> columns);

// Where to exec on each node: the node, and the pod and container chosen there.
struct ExecTarget {
  std::string node;
  std::string namespace_;
  std::string pod;
  std::string container;
};

// One target per node whose gpu_resource is nvidia.com/gpu and that has a Running pod requesting it
// whose GPU container runs; of several, the first by namespace and name (stable across rounds).
std::vector<ExecTarget> choose_exec_targets(const std::vector<core::KubeNode>& nodes,
                                            const std::vector<PodGpuRequest>& pods);

// The node's metrics from nvidia-smi's parsed table (source "exec"): per GPU its index, UUID, model,
// utilization, memory used and total, temperature and power; what nvidia-smi did not report stays absent.
core::NodeMetrics exec_node_metrics(const std::string& node, const backends::nvidia_smi::GpuTable& table,
                                    std::chrono::system_clock::time_point observed);

// Runs one exec (exec_in_pod with the KubeConfig, or a stand-in in tests).
using ExecRunner = std::function<Result<ExecOutput>(const ExecRequest&)>;

// The metrics of one target: the command, then the older field lists while nvidia-smi names a field
// it does not know. Never throws; a failure is NodeMetrics with `error` ("exec in pod ns/p: …").
core::NodeMetrics exec_target_metrics(const ExecTarget& target, const ExecRunner& run, const ExecSourceOptions& o,
                                      const std::function<std::chrono::system_clock::time_point()>& now);

// Every target, at most o.parallel at once; the results in the targets' order.
std::vector<core::NodeMetrics> exec_fleet(const std::vector<ExecTarget>& targets, const ExecRunner& run,
                                          const ExecSourceOptions& o,
                                          const std::function<std::chrono::system_clock::time_point()>& now);

}  // namespace gf::cluster
