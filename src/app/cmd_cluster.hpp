#pragma once
// `gpufleet cluster nodes|gpus|select|place`: the fleet seen through the Kubernetes API, Prometheus and
// gpufleet agents: per-node GPU summaries, every GPU, the node a job of N GPUs should go to, and a
// Kubernetes manifest pinned to that node (optionally applied through the API server).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/context.hpp"
#include "app/kube_source.hpp"
#include "cluster/fleet_sources.hpp"
#include "core/result.hpp"

namespace gf::app {

struct ClusterCommand {
  std::string verb;  // "nodes", "gpus", "select", "place"
  std::string config;
  // Kubernetes
  std::optional<std::string> kubeconfig;
  std::optional<std::string> context;
  bool in_cluster = false;
  // Prometheus and agents
  std::optional<std::string> prometheus;
  std::optional<std::string> prometheus_token_file;  // Prometheus' bearer token, the file's first line
  std::optional<std::string> node_label;
  std::optional<double> max_age_s;
  std::optional<std::string> agents_file;
  std::vector<std::string> agents;
  std::optional<double> timeout_s;
  // nvidia-smi through pods/exec (seed 002's way)
  bool exec_nvidia_smi = false;
  std::optional<unsigned> exec_parallel;
  std::optional<double> exec_timeout_s;
  // Selection
  std::optional<double> utilization_threshold;
  std::optional<double> memory_threshold;
  std::optional<std::string> fallback;
  unsigned gpus = 1;         // select
  std::string gpu_resource;  // select: "nvidia.com/gpu", "amd.com/gpu"; empty or "any": any GPU node
  bool json = false;
  // place
  std::string manifest;                // -f: a file, or "-" for stdin
  std::optional<unsigned> place_gpus;  // --gpus: wins over what the manifest says
  bool apply = false;
  bool no_gpu_selection = false;
  std::string output;  // -o: the manifest goes to this file instead of stdout
  std::optional<std::string> namespace_name;
};

// Exit codes: 0; 75 (select) no node qualifies, the reason on stderr; 1 every source failed, (select)
// the configured Kubernetes source failed (no node is chosen on the other sources' partial facts), or
// (place) an API or I/O error; 2 bad options, config or manifest. `place` exits 0 when selection fails:
// the manifest goes through unpinned and the Kubernetes scheduler decides.
int run_cluster(const GlobalOptions& g, const ClusterCommand& c);

// --- shared by the cluster verbs (cmd_cluster.cpp, cmd_place.cpp) ---

// The config file, then the command line over it. When neither names any source, the default kubeconfig
// is used if the usual search would find one (default_kube_available); else an error listing the
// options. Kubernetes is wired (FleetSources::kube_nodes). Errors are bad options or config, and a
// Prometheus token file that cannot be used. Prints one warning line to stderr for a source reached
// unsafely (FleetSources::insecure_warnings) and for a token file others may read, except the lines in
// `already_said`.
Result<cluster::FleetSources> fleet_sources_of(const ClusterCommand& c, const KubeEnvironment& env,
                                               const std::vector<std::string>& already_said = {});

// `gpufleet serve`: the fleet view's sources from --cluster-config (c.config) and the same source
// options as the cluster verbs, the options winning over the file. nullopt when neither names anything
// (no fleet view); never the default kubeconfig (an agent does not guess one). Errors are bad options
// or config, a config naming no source, fleet options given without any source, and a Prometheus token
// file that cannot be used. Prints the same warnings as fleet_sources_of.
Result<std::optional<cluster::FleetSources>> serve_fleet_sources(const ClusterCommand& c, const KubeEnvironment& env);

// Kubernetes settings of a command that must reach the API server (place --apply): the command line
// over the config file; the usual search when neither says anything.
Result<cluster::KubeSourceSettings> kube_settings_of(const ClusterCommand& c);

int run_cluster_place(const ClusterCommand& c, const KubeEnvironment& env);

}  // namespace gf::app
