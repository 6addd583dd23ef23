// gpufleet cluster nodes|gpus|select, and the fleet sources every cluster verb shares (see cmd_cluster.hpp).
#include "app/cmd_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "allocator/node_rank.hpp"
#include "app/exit_codes.hpp"
#include "app/kube_source.hpp"
#include "cluster/agent_source.hpp"
#include "cluster/fleet_sources.hpp"
#include "cluster/prometheus_source.hpp"
#include "platform/log.hpp"
#include "wire/fleet_json.hpp"

namespace gf::app {

// Names, labels and messages come from Prometheus labels, the API server and other servers: control
// characters are shown escaped so that they cannot move the cursor or rewrite the terminal.
namespace {

using platform::printable;

std::string pct(const std::optional<double>& v) { return v ? fmt::format("{:.1f}%", *v) : std::string("-"); }
std::string num(const std::optional<double>& v, const char* unit) {
  return v ? fmt::format("{:.0f}{}", *v, unit) : std::string("-");
}

void print_nodes(const allocator::Summaries& s) {
  std::printf("%-24s %5s %5s %5s %5s %7s %7s %7s  %-17s %s\n", "NODE", "TOTAL", "ALLOC", "FREE", "IDLE", "METRICS",
              "UTIL", "MEM", "HEALTH", "SOURCE");
  for (const auto& n : s.nodes)
    std::printf(
        "%-24s %5llu %5llu %5llu %5llu %7llu %7s %7s  %-17s %s\n", printable(n.name).c_str(),
        static_cast<unsigned long long>(n.total_gpus), static_cast<unsigned long long>(n.allocatable_gpus),
        static_cast<unsigned long long>(n.free_gpus), static_cast<unsigned long long>(n.idle_gpu_count),
        static_cast<unsigned long long>(n.gpus_with_metrics), pct(n.avg_utilization).c_str(),
        pct(n.avg_memory_usage).c_str(), std::string(allocator::health_name(n.health)).c_str(),
        printable(n.metrics_source.empty() ? (n.in_kubernetes ? "kubernetes" : "-") : n.metrics_source).c_str());
  for (const auto& n : s.nodes)
    for (const auto& p : n.problems)
      if (n.health != allocator::NodeHealth::Ok || n.unhealthy.count)
        std::printf("  %s: %s\n", printable(n.name).c_str(), printable(p).c_str());
  for (const auto& u : s.unknown_nodes)
    std::printf("  %s: has metrics but Kubernetes does not list it (left out)\n", printable(u).c_str());
}

void print_gpus(const allocator::Summaries& s, const core::FleetFacts& f, const allocator::IdleThresholds& idle) {
  std::printf("%-24s %4s %-26s %6s %17s %6s %7s %s\n", "NODE", "GPU", "MODEL", "UTIL", "MEMORY (MiB)", "TEMP", "POWER",
              "IDLE");
  for (const auto& n : s.nodes) {
    if (!n.has_metrics) {
      std::printf("%-24s    - (no metrics: %s)\n", printable(n.name).c_str(),
                  printable(n.problems.empty() ? "unknown" : n.problems.back()).c_str());
      continue;
    }
    for (const auto& m : f.metrics) {
      if (m.node != n.name || m.source != n.metrics_source) continue;
      for (const auto& g : m.gpus) {
        const std::string mem = g.memory_used_mib && g.memory_total_mib
                                    ? fmt::format("{:.0f}/{:.0f}", *g.memory_used_mib, *g.memory_total_mib)
                                    : std::string("-");
        std::printf("%-24s %4u %-26s %6s %17s %6s %7s %s\n", printable(n.name).c_str(), g.index,
                    printable(g.model.empty() ? "-" : g.model).c_str(), pct(g.utilization_pct).c_str(), mem.c_str(),
                    num(g.temperature_c, "C").c_str(), num(g.power_w, "W").c_str(),
                    g.unhealthy.empty() ? (allocator::gpu_is_idle(g, idle) ? "yes" : "no")
                                        : printable("no, unhealthy: " + g.unhealthy).c_str());
      }
      break;
    }
  }
}

// The command line over the config file over the defaults; Kubernetes not yet wired, no default yet.
Result<cluster::FleetSources> configured_sources(const ClusterCommand& c) {
  cluster::FleetSources s;
  if (!c.config.empty()) {
    auto f = cluster::load_fleet_sources(c.config);
    if (!f) return f.error();
    s = std::move(*f);
  }
  if (c.kubeconfig || c.context || c.in_cluster) {
    auto& k = s.kubernetes ? *s.kubernetes : s.kubernetes.emplace();
    if (c.kubeconfig) k.kubeconfig = *c.kubeconfig;
    if (c.context) k.context = *c.context;
    if (c.in_cluster) k.in_cluster = true;
    if (c.kubeconfig) k.in_cluster = c.in_cluster;  // --kubeconfig replaces the config file's in_cluster
  }
  if (c.prometheus) s.prometheus_url = *c.prometheus;
  if (c.prometheus_token_file) {
    if (c.prometheus_token_file->empty()) return make_error("--prometheus-token-file needs a file name");
    s.prometheus_token_file = *c.prometheus_token_file;
  }
  if (c.node_label) {
    if (!cluster::valid_label_name(*c.node_label))
      return make_error("--node-label '" + *c.node_label + "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)");
    s.node_label = *c.node_label;
  }
  if (c.max_age_s) s.max_age = std::chrono::milliseconds(static_cast<long long>(*c.max_age_s * 1000));
  if (c.agents_file) s.agents_file = *c.agents_file;
  for (const auto& a : c.agents) {
    auto u = cluster::normalize_agent_url(a);
    if (!u) return make_error("--agent: " + u.error().message);
    s.agents.push_back(*u);
  }
  if (c.timeout_s) s.timeout = std::chrono::milliseconds(static_cast<long long>(*c.timeout_s * 1000));
  if (c.exec_nvidia_smi) s.exec_nvidia_smi = true;
  if (c.exec_parallel) s.exec_parallel = *c.exec_parallel;
  if (c.exec_timeout_s) s.exec_timeout = std::chrono::milliseconds(static_cast<long long>(*c.exec_timeout_s * 1000));
  if ((c.exec_parallel || c.exec_timeout_s) && !s.exec_nvidia_smi)
    return make_error("--exec-parallel and --exec-timeout need --exec-nvidia-smi (or \"exec_nvidia_smi\": true)");
  if (c.utilization_threshold) s.idle.utilization_pct = *c.utilization_threshold;
  if (c.memory_threshold) s.idle.memory_pct = *c.memory_threshold;
  if (c.fallback) {
    auto f = cluster::parse_fallback(*c.fallback);
    if (!f) return make_error("--fallback: " + f.error().message);
    s.fallback = *f;
  }
  return s;
}

// The lines said once at start: a token file others may read, and each source reached unsafely
// (TLS verification off, a credential over plain http). An error when the token file is unusable.
Result<void> warn_at_start(const cluster::FleetSources& s, const std::vector<std::string>& already_said) {
  auto token = cluster::check_prometheus_token(s);
  if (!token) return token.error();
  auto lines = std::move(*token);
  for (auto& w : s.insecure_warnings()) lines.push_back(std::move(w));
  for (const auto& w : lines)
    if (std::find(already_said.begin(), already_said.end(), w) == already_said.end()) print_error("warning: " + w);
  return {};
}

}  // namespace

Result<cluster::FleetSources> fleet_sources_of(const ClusterCommand& c, const KubeEnvironment& env,
                                               const std::vector<std::string>& already_said) {
  auto s = configured_sources(c);
  if (!s) return s.error();
  // Nothing named at all: the kubeconfig kubectl would use, when there is one.
  if (!s->any() && !s->kubernetes && !s->kubernetes_off && default_kube_available(env)) s->kubernetes.emplace();
  if (auto w = wire_kubernetes(*s, env); !w) return w.error();
  if (!s->any())
    return make_error(
        "no fleet source: give --kubeconfig FILE (or --context NAME, --in-cluster), --prometheus URL, "
        "--agents FILE or --agent URL, or --config FILE (no $KUBECONFIG or ~/.kube/config was found either)");
  if (auto w = warn_at_start(*s, already_said); !w) return w.error();
  return s;
}

bool names_a_source(const ClusterCommand& c) {
  return c.kubeconfig || c.context || c.in_cluster || c.prometheus || c.agents_file || !c.agents.empty();
}

Result<std::optional<cluster::FleetSources>> serve_fleet_sources(const ClusterCommand& c, const KubeEnvironment& env) {
  if (c.config.empty() && !names_a_source(c)) {
    if (c.node_label || c.max_age_s || c.timeout_s || c.utilization_threshold || c.memory_threshold || c.fallback ||
        c.prometheus_token_file || c.exec_nvidia_smi || c.exec_parallel || c.exec_timeout_s)
      return make_error(
          "the fleet options (--node-label, --max-age, --timeout, --utilization-threshold, --memory-threshold, "
          "--fallback, --prometheus-token-file, --exec-nvidia-smi) need a fleet source: --cluster-config FILE, "
          "--kubeconfig FILE, "
          "--context NAME, "
          "--in-cluster, --prometheus URL, --agents FILE or --agent URL");
    return std::optional<cluster::FleetSources>{};
  }
  auto s = configured_sources(c);
  if (!s) return s.error();
  if (auto w = wire_kubernetes(*s, env); !w)
    return make_error(c.config.empty() ? w.error().message : c.config + ": " + w.error().message);
  if (!s->any())
    return make_error(
        c.config +
        ": names no fleet source (kubernetes, kubeconfig, in_cluster, prometheus, agents_file or agents), and "
        "no source option is given either");
  if (auto w = warn_at_start(*s, {}); !w) return w.error();
  return std::optional<cluster::FleetSources>{std::move(*s)};
}

Result<cluster::KubeSourceSettings> kube_settings_of(const ClusterCommand& c) {
  auto s = configured_sources(c);
  if (!s) return s.error();
  return s->kubernetes.value_or(cluster::KubeSourceSettings{});
}

int run_cluster(const GlobalOptions&, const ClusterCommand& c) {
  const auto env = KubeEnvironment::from_process();
  if (c.verb == "place") return run_cluster_place(c, env);
  auto src = fleet_sources_of(c, env);
  if (!src) {
    print_error("cluster: " + printable(src.error().message));
    return kExitUsage;
  }
  // select shows neither temperature nor power (text or JSON): Prometheus is not asked for them.
  src->display_metrics = c.verb != "select";
  const auto now = std::chrono::system_clock::now();
  auto facts = cluster::gather_fleet(*src, now);
  if (!facts) {
    print_error("cluster: " + facts.error().message);
    return kExitUsage;
  }
  if (facts->metrics.empty() && !facts->kube && !facts->source_errors.empty()) {
    // Nothing answered: one line when one source was asked, else each source's line and a summary.
    if (facts->source_errors.size() == 1) {
      print_error("cluster: " + printable(facts->source_errors.front()));
    } else {
      for (const auto& e : facts->source_errors) print_error("cluster: " + printable(e));
      print_error("cluster: no source answered");
    }
    return kExitError;
  }
  // select without Kubernetes' answer ends with one line naming that error (below); the others are printed.
  const bool select_blocked = c.verb == "select" && facts->kube_error.has_value();
  for (const auto& e : facts->source_errors)
    if (!select_blocked || e != *facts->kube_error) print_error("cluster: " + printable(e));

  allocator::RankOptions ro;
  ro.idle = src->idle;
  ro.now = now;
  ro.max_age = src->max_age;
  const auto sums = allocator::summarize(*facts, ro);
  wire::FleetQueryInfo q{src->idle, src->max_age, src->describe(), now};

  if (c.verb == "nodes") {
    if (c.json)
      std::printf("%s\n", wire::fleet_nodes_json(sums, *facts, q).dump(2).c_str());
    else
      print_nodes(sums);
    return kExitOk;
  }
  if (c.verb == "gpus") {
    if (c.json)
      std::printf("%s\n", wire::fleet_gpus_json(sums, *facts, q).dump(2).c_str());
    else
      print_gpus(sums, *facts, src->idle);
    return kExitOk;
  }
  const auto choice =
      allocator::select_node(sums, c.gpus, src->fallback, c.gpu_resource == "any" ? "" : c.gpu_resource);
  if (c.json) {
    std::printf("%s\n", wire::node_choice_json(choice, c.gpus, src->fallback, *facts, q).dump(2).c_str());
  } else {
    for (const auto& line : choice.reasoning) std::printf("%s\n", printable(line).c_str());
  }
  std::fflush(stdout);
  if (!choice.node) {
    print_error("cluster select: " + printable(choice.reason));
    // A configured source that failed is an error, not "no node qualifies now" (75).
    return choice.source_failed ? kExitError : kExitNoGpus;
  }
  return kExitOk;
}

}  // namespace gf::app
