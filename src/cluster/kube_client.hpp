#pragma once
// A small client of the Kubernetes API server: the GPU view of each node (capacity, allocatable, what
// the node's live pods request, readiness, cordon) and raw requests for the callers that write objects
// (cluster place --apply). Every request goes through platform::http_perform with the configured TLS,
// bearer token and timeout.
//
// The JSON → KubeNode parsing is in pure functions below, tested on fixtures and fuzzed.
// Thread-safety: a KubeClient holds only its configuration; concurrent calls on one client are safe.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/kubeconfig.hpp"
#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::cluster {

// The extended resources counted as GPUs, in the order a node with both is described by.
inline constexpr std::string_view kNvidiaGpu = "nvidia.com/gpu";
inline constexpr std::string_view kAmdGpu = "amd.com/gpu";

struct KubeOptions {
  std::chrono::milliseconds timeout{10000};  // each request, connection included
  unsigned page_size = 500;                  // `limit` of each list request
  std::size_t max_page_bytes = 64u << 20;    // a larger answer is an error (a page of 500 pods is ~5 MiB)
};

// One page of a NodeList: the nodes (gpu_requested still 0) and the continue token ("" on the last page).
struct NodePage {
  std::vector<core::KubeNode> nodes;
  std::string continue_token;
};

// What one pod asks of the GPU resources, by resource name; only pods that ask for some are kept.
struct PodGpuRequest {
  std::string namespace_;
  std::string name;
  std::string node;                           // spec.nodeName; empty: not scheduled
  std::string phase;                          // status.phase
  std::map<std::string, std::uint64_t> gpus;  // "nvidia.com/gpu" → 2
  // The first of spec.containers that asks for a GPU resource itself (empty: only init containers do),
  // and whether status.containerStatuses says it is running: where `kubectl exec -c` would go to see
  // the pod's GPUs.
  std::string gpu_container;
  bool gpu_container_running = false;
};

struct PodPage {
  std::vector<PodGpuRequest> pods;
  std::string continue_token;
};

// A resource quantity as a whole count ("8", "1k", "2Ki", "1e3", "1500m" → 2: fractions round up, as
// Kubernetes' Value() does). Errors on negative, malformed or too-large (> 2^53) quantities.
Result<std::uint64_t> parse_quantity_count(std::string_view quantity);

// A NodeList (JSON) → its nodes; per node the GPU resource with the larger capacity (nvidia.com/gpu on
// a tie), its product label (nvidia.com/gpu.product, amd.com/gpu.product-name,
// beta.amd.com/gpu.product-name), Ready and spec.unschedulable, all labels. Nodes without a GPU
// resource are kept with gpu_resource "" and 0 GPUs.
Result<NodePage> parse_node_list(std::string_view json);

// A PodList (JSON) → the pods that request GPUs. Per pod and resource the effective request as the
// scheduler computes it: containers and sidecars (init containers with restartPolicy Always) add up;
// an ordinary init container runs alone with the sidecars started before it; the pod needs the larger
// of the two. Per container: requests, else limits (extended resources may give only limits).
Result<PodPage> parse_pod_list(std::string_view json);

// Whether a pod in this phase holds its GPUs (every phase but Succeeded and Failed).
bool pod_holds_gpus(std::string_view phase);

// Adds each pod's request for its node's GPU resource to that node's gpu_requested; pods whose node
// is not listed, or that hold no GPUs (pod_holds_gpus), count nowhere.
void add_pod_requests(std::vector<core::KubeNode>& nodes, const std::vector<PodGpuRequest>& pods);

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config, KubeOptions options = {});

  // Every node with its GPU counts and the GPUs its live pods request (two paginated list calls:
  // nodes, then pods with a fieldSelector excluding Succeeded and Failed, filtered again here for servers
  // that ignore it). Errors name the cause: 401 (the credentials and where they came from), 403 (the
  // RBAC permission missing), TLS, unreachable server, timeout, too large or malformed answer.
  Result<std::vector<core::KubeNode>> gpu_nodes();

  // The pods in phase Running that request a GPU resource, every namespace (a paginated list with
  // fieldSelector status.phase=Running, filtered again here). Errors as gpu_nodes'.
  Result<std::vector<PodGpuRequest>> running_gpu_pods();

  struct Response {
    long status = 0;
    std::string body;
    std::string content_type;
  };
  // One request to server + path_and_query ("/api/v1/namespaces/x/pods?limit=1"). Any HTTP status is a
  // Response (the caller decides); only transport failures are errors.
  Result<Response> request(std::string_view method, std::string_view path_and_query,
                           std::optional<std::string> body = {}, std::string_view content_type = "application/json");

  const KubeConfig& config() const { return config_; }

 private:
  // GET of a list page, with the error of a non-200 answer built for `what` ("list nodes").
  Result<std::string> get_list(const std::string& path_and_query, std::string_view what, std::string_view rbac);

  KubeConfig config_;
  KubeOptions options_;
};

// Each request's error text, exposed so that callers of request() word non-2xx answers the same way:
// "the API server at https://… answered 404 Not Found to GET /x: pods \"y\" not found".
std::string describe_status_error(const KubeConfig& config, long status, std::string_view method, std::string_view path,
                                  std::string_view body, std::string_view rbac = {});

}  // namespace gf::cluster
