#pragma once
// Where the fleet's facts come from, and one round of gathering them: Kubernetes (a function the
// caller supplies, returning the GPU nodes), Prometheus, and gpufleet agents. The same settings come
// from the command line (`gpufleet cluster …`) and from a small JSON config file (`--config`,
// `serve --cluster-config`).
// Thread-safety: gather_fleet may run on any thread; it touches nothing shared.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "allocator/node_rank.hpp"
#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::cluster {

// How to reach the Kubernetes API, as a config file or the command line says it. Only what was said:
// the environment ($KUBECONFIG, $HOME, KUBERNETES_SERVICE_HOST) is read by the caller, which turns these
// settings into KubeConfigOptions and FleetSources::kube_nodes.
struct KubeSourceSettings {
  std::string kubeconfig;   // this file only; empty: the usual search ($KUBECONFIG, ~/.kube/config, in-cluster)
  std::string context;      // empty: the kubeconfig's current-context
  bool in_cluster = false;  // the pod's service account even when a kubeconfig exists
};

struct FleetSources {
  std::string prometheus_url;                // empty: no Prometheus
  std::string node_label = "Hostname";       // the Prometheus label naming the node
  std::chrono::milliseconds max_age{60000};  // older metrics count as none
  std::string agents_file;                   // one agent base URL per line
  std::vector<std::string> agents;           // more agent base URLs
  std::chrono::milliseconds timeout{10000};  // each Prometheus query, each agent
  std::chrono::milliseconds refresh{15000};  // serve: how often the background refresh runs
  allocator::IdleThresholds idle;            // the default thresholds of selections
  allocator::Fallback fallback = allocator::Fallback::None;
  // Kubernetes as configured: nullopt when nothing names it, or when the config says "kubernetes": false.
  std::optional<KubeSourceSettings> kubernetes;
  bool kubernetes_off = false;  // the config said "kubernetes": false: never fall back to the default kubeconfig
  // The Kubernetes API's GPU nodes; empty: no Kubernetes (a metrics-only fleet). Wired by the caller
  // from `kubernetes` (the loader reads no environment).
  std::function<Result<std::vector<core::KubeNode>>()> kube_nodes;
  std::string kube_description;  // where kube_nodes reads from ("/root/.kube/config, context prod"), for describe()

  bool any() const { return !prometheus_url.empty() || !agents_file.empty() || !agents.empty() || kube_nodes; }
  // "kubernetes (…)", "prometheus http://…", "agents file F", "3 agent(s)" — for documents and messages.
  std::vector<std::string> describe() const;
};

// Reads a JSON config: {"prometheus", "node_label", "max_age_s", "agents_file", "agents", "timeout_s",
// "refresh_interval_s", "utilization_threshold", "memory_threshold", "fallback", "kubernetes",
// "kubeconfig", "context", "in_cluster"}. Keys given replace those of `base`; an unknown key or a bad
// value is an error naming the file and the key. A relative agents_file or kubeconfig is taken relative
// to the config file's directory. "kubernetes": true turns Kubernetes on with the usual kubeconfig
// search; "kubeconfig", "context" or "in_cluster": true turn it on too; "kubernetes": false turns it off
// (and may not be combined with the other three).
Result<FleetSources> fleet_sources_from_json(const std::string& text, const std::string& source,
                                             FleetSources base = {});
Result<FleetSources> load_fleet_sources(const std::string& path, FleetSources base = {});

// "none" | "least-loaded" (also "least_loaded").
Result<allocator::Fallback> parse_fallback(const std::string& text);

// One round: every source asked at once where it can be. A failing source is recorded in
// source_errors and the others still count (a failing Kubernetes source also in kube_error, which
// stops node selection: see allocator::FleetFacts); an error only when the sources cannot even be read
// (no source at all, an unreadable or malformed agents file).
// Metrics of a node from a reachable agent win over Prometheus; Prometheus wins over an unreachable agent.
Result<allocator::FleetFacts> gather_fleet(const FleetSources& s, std::chrono::system_clock::time_point now);

}  // namespace gf::cluster
