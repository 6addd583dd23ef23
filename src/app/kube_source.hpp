#pragma once
// Kubernetes as a fleet source: the step from what the user said (--kubeconfig, --context, --in-cluster,
// or the config file's keys) and the process environment to a working FleetSources::kube_nodes.
// The environment is read here, in app/, and nowhere in cluster/, so the cluster code stays testable.
#include <optional>
#include <string>

#include "cluster/fleet_sources.hpp"
#include "cluster/kubeconfig.hpp"
#include "core/result.hpp"

namespace gf::app {

// The variables of the kubeconfig convention, read once.
struct KubeEnvironment {
  std::string kubeconfig;    // $KUBECONFIG
  std::string home;          // $HOME
  std::string service_host;  // $KUBERNETES_SERVICE_HOST
  std::string service_port;  // $KUBERNETES_SERVICE_PORT

  static KubeEnvironment from_process();
};

cluster::KubeConfigOptions kube_options(const cluster::KubeSourceSettings& settings, const KubeEnvironment& env);

// Whether the usual search would find something without any option: $KUBECONFIG set, ~/.kube/config
// present, or running in a pod (KUBERNETES_SERVICE_HOST). Used when no fleet source is named at all.
bool default_kube_available(const KubeEnvironment& env);

// Loads the kubeconfig `s.kubernetes` names (an error when it cannot: a missing file, context or
// credentials) and sets s.kube_nodes, s.kube_description and s.kube_insecure. The kubeconfig is read again on every
// call of kube_nodes, so a long-running agent follows rotated service-account tokens. Nothing happens
// when s.kubernetes is nullopt.
Result<void> wire_kubernetes(cluster::FleetSources& s, const KubeEnvironment& env);

}  // namespace gf::app
