#pragma once
// Clusters for the pods/exec tests and benchmark: GPU nodes gpu-000, gpu-001, … (nvidia.com/gpu, Ready),
// each with one Running pod train/job-000, … whose container "cuda" requests a GPU and runs, as the
// stand-in Kubernetes API (kube_standin.hpp) serves them.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

namespace gf::fakes {

inline std::string exec_node_name(unsigned i) { return fmt::format("gpu-{:03}", i); }
inline std::string exec_pod_name(unsigned i) { return fmt::format("job-{:03}", i); }

inline nlohmann::json exec_gpu_node(const std::string& name, unsigned gpus) {
  using nlohmann::json;
  return json{{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
              {"spec", json::object()},
              {"status",
               {{"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                {"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                {"conditions", json::array({json{{"type", "Ready"}, {"status", "True"}}})}}}};
}

inline nlohmann::json exec_gpu_pod(const std::string& ns, const std::string& name, const std::string& node,
                                   bool running = true) {
  using nlohmann::json;
  return json{
      {"metadata", {{"namespace", ns}, {"name", name}}},
      {"spec",
       {{"nodeName", node},
        {"containers", json::array({json{{"name", "sidecar"}},
                                    json{{"name", "cuda"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}})}}},
      {"status",
       {{"phase", "Running"},
        {"containerStatuses",
         json::array({json{{"name", "sidecar"}, {"state", {{"running", json::object()}}}},
                      json{{"name", "cuda"},
                           {"state", running ? json{{"running", json::object()}}
                                             : json{{"waiting", {{"reason", "CrashLoopBackOff"}}}}}}})}}}};
}

inline std::string exec_cluster_json(unsigned nodes, unsigned gpus = 8) {
  using nlohmann::json;
  json doc{{"nodes", json::array()}, {"pods", json::array()}};
  for (unsigned i = 0; i < nodes; ++i) {
    doc["nodes"].push_back(exec_gpu_node(exec_node_name(i), gpus));
    doc["pods"].push_back(exec_gpu_pod("train", exec_pod_name(i), exec_node_name(i)));
  }
  return doc.dump();
}

}  // namespace gf::fakes
