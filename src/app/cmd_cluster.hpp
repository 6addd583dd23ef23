#pragma once
// `gpufleet cluster nodes|gpus|select`: the fleet seen through Prometheus and gpufleet agents (and
// Kubernetes, once wired): per-node GPU summaries, every GPU, and the node a job of N GPUs should go to.
#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"

namespace gf::app {

struct ClusterCommand {
  std::string verb;  // "nodes", "gpus", "select"
  std::string config;
  std::optional<std::string> prometheus;
  std::optional<std::string> node_label;
  std::optional<double> max_age_s;
  std::optional<std::string> agents_file;
  std::vector<std::string> agents;
  std::optional<double> timeout_s;
  std::optional<double> utilization_threshold;
  std::optional<double> memory_threshold;
  std::optional<std::string> fallback;
  unsigned gpus = 1;
  bool json = false;
};

// Exit codes: 0; 75 (select) no node qualifies, the reason on stderr; 1 every source failed;
// 2 bad options or config.
int run_cluster(const GlobalOptions& g, const ClusterCommand& c);

}  // namespace gf::app
