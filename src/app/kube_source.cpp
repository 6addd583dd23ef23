// Kubernetes as a fleet source (see kube_source.hpp).
#include "app/kube_source.hpp"

#include <sys/stat.h>

#include "cluster/exec_source.hpp"
#include "cluster/kube_client.hpp"
#include "platform/fs.hpp"

namespace gf::app {

KubeEnvironment KubeEnvironment::from_process() {
  KubeEnvironment e;
  e.kubeconfig = platform::env("KUBECONFIG").value_or("");
  e.home = platform::env("HOME").value_or("");
  e.service_host = platform::env("KUBERNETES_SERVICE_HOST").value_or("");
  e.service_port = platform::env("KUBERNETES_SERVICE_PORT").value_or("");
  return e;
}

cluster::KubeConfigOptions kube_options(const cluster::KubeSourceSettings& settings, const KubeEnvironment& env) {
  cluster::KubeConfigOptions o;
  o.kubeconfig = settings.kubeconfig;
  o.context = settings.context;
  o.in_cluster = settings.in_cluster;
  o.env_kubeconfig = env.kubeconfig;
  o.home = env.home;
  o.service_host = env.service_host;
  o.service_port = env.service_port;
  return o;
}

bool default_kube_available(const KubeEnvironment& env) {
  if (!env.kubeconfig.empty() || !env.service_host.empty()) return true;
  if (env.home.empty()) return false;
  struct stat st {};
  return ::stat((env.home + "/.kube/config").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Result<void> wire_kubernetes(cluster::FleetSources& s, const KubeEnvironment& env) {
  if (!s.kubernetes) {
    if (s.exec_nvidia_smi)
      return make_error(
          "exec_nvidia_smi (--exec-nvidia-smi) needs the Kubernetes source: --kubeconfig FILE, --context NAME, "
          "--in-cluster, or \"kubernetes\": true");
    return {};
  }
  const auto options = kube_options(*s.kubernetes, env);
  // Loaded once now so that a wrong file, context or credential is reported before anything runs.
  auto config = cluster::load_kube_config(options);
  if (!config) return make_error("kubernetes: " + config.error().message);
  s.kube_description = config->source;
  s.kube_insecure = cluster::insecure_transport(*config);
  cluster::KubeOptions ko;
  ko.timeout = s.timeout;
  s.kube_nodes = [options, ko]() -> Result<std::vector<core::KubeNode>> {
    auto c = cluster::load_kube_config(options);
    if (!c) return c.error();
    return cluster::KubeClient(std::move(*c), ko).gpu_nodes();
  };
  if (s.exec_nvidia_smi) {
    cluster::ExecSourceOptions eo;
    eo.parallel = s.exec_parallel;
    eo.timeout = s.exec_timeout;
    s.exec_metrics = [options, ko,
                      eo](const std::vector<core::KubeNode>& nodes) -> Result<std::vector<core::NodeMetrics>> {
      auto c = cluster::load_kube_config(options);
      if (!c) return c.error();
      auto pods = cluster::KubeClient(*c, ko).running_gpu_pods();
      if (!pods) return pods.error();
      const cluster::KubeConfig config = std::move(*c);
      return cluster::exec_fleet(
          cluster::choose_exec_targets(nodes, *pods),
          [&config](const cluster::ExecRequest& rq) { return cluster::exec_in_pod(config, rq); }, eo,
          [] { return std::chrono::system_clock::now(); });
    };
  }
  return {};
}

}  // namespace gf::app
