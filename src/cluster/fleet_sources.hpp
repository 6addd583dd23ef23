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
  std::string prometheus_url;                // empty: no Prometheus (userinfo in it is sent, never shown)
  std::string prometheus_token_file;         // Prometheus' bearer token: this file's first line, read every round
  std::string node_label = "Hostname";       // the Prometheus label naming the node
  std::chrono::milliseconds max_age{60000};  // older metrics count as none
  std::string agents_file;                   // one agent base URL per line
  std::vector<std::string> agents;           // more agent base URLs
  std::chrono::milliseconds timeout{10000};  // each Prometheus query, each agent
  std::chrono::milliseconds refresh{15000};  // serve: how often the background refresh runs
  allocator::IdleThresholds idle;            // the default thresholds of selections
  allocator::Fallback fallback = allocator::Fallback::None;
  // Ask for what only documents show (temperature, power), not just what ranks nodes. `cluster select`
  // turns it off: its answer and reasoning never show them. Not a config key.
  bool display_metrics = true;
  // Kubernetes as configured: nullopt when nothing names it, or when the config says "kubernetes": false.
  std::optional<KubeSourceSettings> kubernetes;
  bool kubernetes_off = false;  // the config said "kubernetes": false: never fall back to the default kubeconfig
  // The Kubernetes API's GPU nodes; empty: no Kubernetes (a metrics-only fleet). Wired by the caller
  // from `kubernetes` (the loader reads no environment).
  std::function<Result<std::vector<core::KubeNode>>()> kube_nodes;
  std::string kube_description;  // where kube_nodes reads from ("/root/.kube/config, context prod"), for describe()
  // Set with kube_nodes when the API server is reached unsafely: the warning line ("TLS verification is off
  // for https://…", "sending a bearer token over plain http to http://…"); empty: nothing to say.
  std::string kube_insecure;
  // Seed 002's way to metrics: nvidia-smi's CSV query through pods/exec in a pod that requests
  // nvidia.com/gpu on each node (exec_source.hpp). Off unless asked for (--exec-nvidia-smi,
  // "exec_nvidia_smi": true): it runs a command in other users' containers. Needs Kubernetes.
  bool exec_nvidia_smi = false;
  unsigned exec_parallel = 8;                     // pods exec'ed at once
  std::chrono::milliseconds exec_timeout{10000};  // each pod's whole exec
  // The exec round for these nodes (the Kubernetes GPU nodes without metrics from another source),
  // wired by the caller with kube_nodes when exec_nvidia_smi is on. An error when the pods cannot be
  // listed; a node whose exec fails is a NodeMetrics with `error`.
  std::function<Result<std::vector<core::NodeMetrics>>(const std::vector<core::KubeNode>&)> exec_metrics;

  bool any() const { return !prometheus_url.empty() || !agents_file.empty() || !agents.empty() || kube_nodes; }
  // "kubernetes (…)", "prometheus http://…", "agents file F", "3 agent(s)" — for documents and messages.
  // URLs without userinfo; a source reached unsafely ends its parentheses with "; insecure".
  std::vector<std::string> describe() const;
  // The warning about Prometheus when a credential (the bearer token, or the URL's user name and
  // password) would go over plain http; empty otherwise.
  std::string prometheus_insecure() const;
  // kube_insecure and prometheus_insecure(), the ones that are not empty: one stderr line each at start.
  std::vector<std::string> insecure_warnings() const;
};

// Reads Prometheus' bearer token from `path` as platform::read_token_file does, following links and
// accepting a root-owned file (Kubernetes mounts secrets as links into a root-owned directory), and
// refusing one that others may write. `readable_by_others` (may be null) says whether group or others
// may read it. Errors are one line naming the file.
Result<std::string> read_prometheus_token(const std::string& path, bool* readable_by_others = nullptr);

// Checks, before anything runs, that the token file can be used: an error when prometheus_token_file
// is given without a Prometheus URL or cannot be read (missing, empty, refused). The warnings to print
// (a token file that group or others may read); empty when there is no token file.
Result<std::vector<std::string>> check_prometheus_token(const FleetSources& s);

// The insecure-transport warnings that belong to a round's failures: kube_insecure when Kubernetes
// failed, prometheus_insecure() when Prometheus did. serve logs them with every failed refresh.
std::vector<std::string> insecure_warnings_for(const FleetSources& s, const core::FleetFacts& facts);

// Reads a JSON config: {"prometheus", "prometheus_token_file", "node_label", "max_age_s", "agents_file", "agents",
// "timeout_s", "refresh_interval_s", "utilization_threshold", "memory_threshold", "fallback", "kubernetes",
// "kubeconfig", "context", "in_cluster", "exec_nvidia_smi", "exec_parallel", "exec_timeout_s"}. Keys given replace
// those of `base`; an unknown key or a bad value is an error naming the file and the key. A relative agents_file,
// prometheus_token_file or kubeconfig is taken relative to the config file's directory. "kubernetes": true turns
// Kubernetes on with the usual kubeconfig search; "kubeconfig", "context" or "in_cluster": true turn it on too;
// "kubernetes": false turns it off (and may not be combined with the other three).
Result<FleetSources> fleet_sources_from_json(const std::string& text, const std::string& source,
                                             FleetSources base = {});
Result<FleetSources> load_fleet_sources(const std::string& path, FleetSources base = {});

// "none" | "least-loaded" (also "least_loaded").
Result<allocator::Fallback> parse_fallback(const std::string& text);

// One round: every source asked at once where it can be. A failing source is recorded in
// source_errors and the others still count (a failing Kubernetes source also in kube_error, which
// stops node selection: see core::FleetFacts); an error only when the sources cannot even be read
// (no source at all, an unreadable or malformed agents file).
// Metrics of a node from a reachable agent win over Prometheus; Prometheus wins over an unreachable agent.
// The exec source (exec_metrics) runs after Kubernetes has answered, only for the GPU nodes that no
// agent or Prometheus describes; its metrics rank after theirs and before any failed source's.
Result<core::FleetFacts> gather_fleet(const FleetSources& s, std::chrono::system_clock::time_point now);

}  // namespace gf::cluster
