// Node summaries and node selection (see node_rank.hpp for the rules).
#include "allocator/node_rank.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>

#include "core/text.hpp"

namespace gf::allocator {
namespace {

std::string pct(const std::optional<double>& v) {
  return v ? fmt::format("{:.1f}%", *v) : std::string("n/a (no metrics)");
}

double seconds(std::chrono::system_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The node's unhealthy GPUs: counted, their reasons (distinct, the first three) and a problem line each.
void note_unhealthy(NodeSummary& n, const core::NodeMetrics& m) {
  std::vector<std::string_view> reasons;
  bool more = false;
  for (const auto& g : m.gpus) {
    if (g.unhealthy.empty()) continue;
    ++n.unhealthy.count;
    n.problems.push_back(fmt::format("GPU {} is unhealthy: {}", g.index, g.unhealthy));
    if (std::find(reasons.begin(), reasons.end(), std::string_view(g.unhealthy)) != reasons.end()) continue;
    if (reasons.size() < 3)
      reasons.push_back(g.unhealthy);
    else
      more = true;
  }
  n.unhealthy.why = fmt::format("{}{}", fmt::join(reasons, "; "), more ? "; …" : "");
}

// The metrics side of one node: which GPUs count, the averages, and what is wrong with them.
void apply_metrics(NodeSummary& n, const core::NodeMetrics* m, const RankOptions& o) {
  if (m == nullptr) {
    n.problems.push_back("no metrics for this node");
    n.health = std::min(n.health, NodeHealth::NoMetrics);
    return;
  }
  n.metrics_source = m->source;
  n.agent_url = m->agent_url;
  n.observed = m->observed;
  if (!m->error.empty()) {
    const bool agent = m->source == "agent";
    n.problems.push_back((agent ? "agent unreachable: " : "metrics failed: ") + m->error);
    n.health = std::min(n.health, agent ? NodeHealth::AgentUnreachable : NodeHealth::MetricsError);
    return;
  }
  // Even from older metrics: a GPU said to be unhealthy is not offered (a reset would show in fresh ones).
  note_unhealthy(n, *m);
  if (m->observed && o.max_age.count() > 0 && o.now - *m->observed > o.max_age) {
    n.problems.push_back(fmt::format("metrics are {:.0f} s old (more than the {:.0f} s allowed)",
                                     seconds(o.now - *m->observed), std::chrono::duration<double>(o.max_age).count()));
    n.health = std::min(n.health, NodeHealth::MetricsStale);
    return;
  }
  double util_sum = 0, mem_sum = 0, temp_sum = 0, power_sum = 0;
  unsigned temps = 0, powers = 0, stale = 0;
  std::uint64_t idle = 0;
  for (const auto& g : m->gpus) {
    if (!g.utilization_pct || !g.memory_used_mib || !g.memory_total_mib || *g.memory_total_mib <= 0) continue;
    // A GPU whose own series stopped counts as one without metrics, even beside fresh GPUs.
    if (g.observed && o.max_age.count() > 0 && o.now - *g.observed > o.max_age) {
      ++stale;
      continue;
    }
    ++n.gpus_with_metrics;
    util_sum += *g.utilization_pct;
    mem_sum += *g.memory_used_mib / *g.memory_total_mib * 100.0;
    if (gpu_is_idle(g, o.idle)) ++idle;
    if (g.temperature_c) temp_sum += *g.temperature_c, ++temps;
    if (g.power_w) power_sum += *g.power_w, ++powers;
  }
  if (stale > 0)
    n.problems.push_back(fmt::format("{} GPU(s) with metrics older than the {:.0f} s allowed (counted as no metrics)",
                                     stale, std::chrono::duration<double>(o.max_age).count()));
  if (n.gpus_with_metrics == 0) {
    if (stale > 0) {
      n.health = std::min(n.health, NodeHealth::MetricsStale);
      return;
    }
    n.problems.push_back("the metrics name no GPU with both utilization and memory");
    n.health = std::min(n.health, NodeHealth::NoMetrics);
    return;
  }
  n.has_metrics = true;
  const auto count = static_cast<double>(n.gpus_with_metrics);
  n.avg_utilization = util_sum / count;
  n.avg_memory_usage = mem_sum / count;
  if (temps) n.avg_temperature_c = temp_sum / temps;
  if (powers) n.total_power_w = power_sum;
  n.idle_gpu_count = idle;
  const bool agent = m->source == "agent", exec = m->source == "exec";
  n.from.idle_gpu_count = agent  ? "agent: utilization and memory under the thresholds"
                          : exec ? "exec: nvidia-smi's utilization and memory under the thresholds"
                                 : "prometheus: utilization and memory under the thresholds";
  n.from.utilization = agent ? "agent" : exec ? "exec: nvidia-smi in a GPU pod" : "prometheus";
}

// One vendor's resource when every GPU's model names the same vendor; empty otherwise.
std::string_view resource_of_models(const core::NodeMetrics& m) {
  std::string_view found;
  for (const auto& g : m.gpus) {
    const auto r = gpu_resource_of_model(g.model);
    if (r.empty() || (!found.empty() && r != found)) return {};
    found = r;
  }
  return found;
}

// " (2 GPU(s) unhealthy: …)" after a count that the unhealthy GPUs lowered; empty when none.
std::string lost_to_health(const NodeSummary& n) {
  return n.unhealthy.count ? " (" + unhealthy_words(n.unhealthy) + ")" : std::string();
}

// "; GPUs lost to health: 'b': 2 GPU(s) unhealthy: …" for the first three nodes that lost GPUs to health.
std::string lost_to_health(const std::vector<NodeSummary>& nodes) {
  std::vector<std::string> parts;
  std::size_t more = 0;
  for (const auto& n : nodes)
    if (n.unhealthy.count) {
      if (parts.size() < 3)
        parts.push_back(fmt::format("'{}': {}", n.name, unhealthy_words(n.unhealthy)));
      else
        ++more;
    }
  if (parts.empty()) return {};
  if (more) parts.push_back(fmt::format("and {} more node(s)", more));
  return fmt::format("; GPUs lost to health: {}", fmt::join(parts, "; "));
}

bool ranks_before(const NodeSummary& a, const NodeSummary& b, std::uint64_t required) {
  const bool ea = a.idle_gpu_count >= required, eb = b.idle_gpu_count >= required;
  if (ea != eb) return ea;
  if (a.idle_gpu_count != b.idle_gpu_count) return a.idle_gpu_count > b.idle_gpu_count;
  // No metrics: nothing measured runs there, so it ranks as 0 % (the seed's rule).
  const double ua = a.avg_utilization.value_or(0), ub = b.avg_utilization.value_or(0);
  if (ua != ub) return ua < ub;
  if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;  // tightest fit
  return a.name < b.name;
}

bool loads_less(const NodeSummary& a, const NodeSummary& b) {
  const double ua = a.avg_utilization.value_or(0), ub = b.avg_utilization.value_or(0);
  if (ua != ub) return ua < ub;
  const double ma = a.avg_memory_usage.value_or(0), mb = b.avg_memory_usage.value_or(0);
  if (ma != mb) return ma < mb;
  if (a.idle_gpu_count != b.idle_gpu_count) return a.idle_gpu_count > b.idle_gpu_count;
  if (a.free_gpus != b.free_gpus) return a.free_gpus < b.free_gpus;
  return a.name < b.name;
}

void describe_choice(std::vector<std::string>& lines, const NodeSummary& n) {
  lines.push_back(fmt::format("Selected node '{}' for deployment:", n.name));
  lines.push_back(fmt::format("  - Allocatable GPUs: {}/{}", n.allocatable_gpus, n.total_gpus));
  lines.push_back(fmt::format("  - Free GPUs: {} ({} requested)", n.free_gpus, n.requested_gpus));
  lines.push_back(fmt::format("  - Idle GPUs: {}", n.idle_gpu_count));
  if (n.unhealthy.count)
    lines.push_back(fmt::format("  - Unhealthy GPUs: {} ({})", n.unhealthy.count, n.unhealthy.why));
  lines.push_back(fmt::format("  - Avg Utilization: {}", pct(n.avg_utilization)));
  lines.push_back(fmt::format("  - Avg Memory Usage: {}", pct(n.avg_memory_usage)));
  lines.push_back(fmt::format("\u2713 Selected node: {}", n.name));
}

}  // namespace

std::string unhealthy_words(const UnhealthyGpus& u) {
  return u.count ? fmt::format("{} GPU(s) unhealthy: {}", u.count, u.why) : std::string();
}

std::string_view health_name(NodeHealth h) noexcept {
  switch (h) {
    case NodeHealth::NotReady: return "not_ready";
    case NodeHealth::Unschedulable: return "unschedulable";
    case NodeHealth::AgentUnreachable: return "agent_unreachable";
    case NodeHealth::MetricsError: return "metrics_error";
    case NodeHealth::MetricsStale: return "metrics_stale";
    case NodeHealth::NoMetrics: return "no_metrics";
    case NodeHealth::Ok: return "ok";
  }
  return "unknown";
}

std::string_view gpu_resource_of_model(std::string_view model) noexcept {
  const std::string lower = core::lower(model);
  const auto has = [&lower](std::string_view w) { return lower.find(w) != std::string::npos; };
  const std::string_view l = lower;
  if (has("nvidia") || l.starts_with("tesla") || has("geforce") || has("quadro")) return "nvidia.com/gpu";
  if (l.starts_with("amd ") || l == "amd" || has(" amd ") || has("instinct") || has("radeon")) return "amd.com/gpu";
  return {};
}

bool gpu_is_idle(const core::FleetGpu& g, const IdleThresholds& t) noexcept {
  if (!g.unhealthy.empty()) return false;  // never offered, whatever its load
  if (!g.utilization_pct || !g.memory_used_mib || !g.memory_total_mib || *g.memory_total_mib <= 0) return false;
  return *g.utilization_pct < t.utilization_pct && *g.memory_used_mib / *g.memory_total_mib * 100.0 < t.memory_pct;
}

namespace {

// Where each of a node's first metrics entry is: node name → index in facts.metrics.
using FirstEntries = std::unordered_map<std::string_view, std::size_t>;

const core::NodeMetrics* metrics_of(const core::FleetFacts& facts, const FirstEntries& by_node,
                                    const std::string& name) {
  const auto it = by_node.find(name);
  return it == by_node.end() ? nullptr : &facts.metrics[it->second];
}

std::string first_model(const core::NodeMetrics* m) {
  if (m)
    for (const auto& g : m->gpus)
      if (!g.model.empty()) return g.model;
  return std::string();
}

// What Kubernetes says of a node: its GPU resource and counts, Ready and cordon.
void fill_from_kube(NodeSummary& n, const core::KubeNode& k) {
  n.name = k.name;
  n.in_kubernetes = true;
  n.gpu_resource = k.gpu_resource;
  n.gpu_product = k.gpu_product;
  n.total_gpus = k.gpu_capacity;
  n.allocatable_gpus = k.gpu_allocatable;
  n.requested_gpus = k.gpu_requested;
  n.free_gpus = k.gpu_allocatable > k.gpu_requested ? k.gpu_allocatable - k.gpu_requested : 0;
  n.ready = k.ready;
  n.schedulable = !k.unschedulable;
  n.health = NodeHealth::Ok;
  n.from.total_gpus = "kubernetes: capacity";
  n.from.allocatable_gpus = "kubernetes: allocatable";
  n.from.requested_gpus = "kubernetes: requests of running pods";
  n.from.free_gpus = "kubernetes: allocatable - requested";
  n.from.gpu_resource = k.gpu_resource.empty() ? "unknown: no GPU resource on the node" : "kubernetes: node resources";
  if (!k.ready) n.problems.push_back("not Ready"), n.health = NodeHealth::NotReady;
  if (k.unschedulable)
    n.problems.push_back("unschedulable (cordoned)"), n.health = std::min(n.health, NodeHealth::Unschedulable);
}

// A GPU Kubernetes gave to a pod is not idle, whatever its load: idle GPUs are at most the free ones.
void cap_idle_at_free(NodeSummary& n, const core::NodeMetrics& m) {
  if (!n.has_metrics || n.idle_gpu_count <= n.free_gpus) return;
  n.idle_gpu_count = n.free_gpus;
  n.from.idle_gpu_count =
      m.source == "agent"  ? "agent: utilization and memory under the thresholds, capped at the free GPUs"
      : m.source == "exec" ? "exec: nvidia-smi's utilization and memory under the thresholds, capped at the free "
                             "GPUs"
                           : "prometheus: utilization and memory under the thresholds, capped at the free GPUs";
}

// Kubernetes counts a GPU as free until a pod requests it, healthy or not (unless the device plugin
// took it out of allocatable): the unhealthy GPUs the metrics name are not free.
void cap_free_at_healthy(NodeSummary& n) {
  if (n.unhealthy.count == 0) return;
  const std::uint64_t healthy = n.total_gpus > n.unhealthy.count ? n.total_gpus - n.unhealthy.count : 0;
  const std::uint64_t usable = std::min(n.allocatable_gpus, healthy);
  const std::uint64_t free = usable > n.requested_gpus ? usable - n.requested_gpus : 0;
  if (free >= n.free_gpus) return;
  n.free_gpus = free;
  n.from.free_gpus = "kubernetes: min(allocatable, capacity - unhealthy GPUs the metrics name) - requested";
}

// Kubernetes is a source: one summary per node it lists, with that node's metrics if any; metrics for
// other nodes only name them in unknown_nodes.
void summarize_kube_nodes(const core::FleetFacts& facts, const RankOptions& o, const FirstEntries& by_node,
                          Summaries& out) {
  // Sorted through pointers, so that summaries are built in their final order and never moved.
  std::vector<const core::KubeNode*> order;
  order.reserve(facts.kube->size());
  for (const auto& k : *facts.kube) order.push_back(&k);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  std::vector<bool> matched(facts.metrics.size(), false);
  out.nodes.reserve(order.size());
  for (const auto* kp : order) {
    NodeSummary& n = out.nodes.emplace_back();
    fill_from_kube(n, *kp);
    const auto* m = metrics_of(facts, by_node, kp->name);
    if (m) matched[static_cast<std::size_t>(m - facts.metrics.data())] = true;
    apply_metrics(n, m, o);
    cap_free_at_healthy(n);
    if (m) cap_idle_at_free(n, *m);
    if (n.gpu_product.empty() && n.has_metrics) n.gpu_product = first_model(m);
  }
  for (std::size_t i = 0; i < facts.metrics.size(); ++i)
    if (!matched[i] && metrics_of(facts, by_node, facts.metrics[i].node) == &facts.metrics[i])
      out.unknown_nodes.push_back(facts.metrics[i].node);
  std::sort(out.unknown_nodes.begin(), out.unknown_nodes.end());
}

// No Kubernetes (none named, or it did not answer): a node is what its metrics show.
void fill_from_metrics(NodeSummary& n, const core::NodeMetrics& m, bool kube_failed) {
  n.name = m.node;
  n.total_gpus = n.allocatable_gpus = n.free_gpus = m.gpus.size();
  n.ready = n.schedulable = true;  // nothing says otherwise without Kubernetes
  n.health = NodeHealth::Ok;
  if (kube_failed) {
    n.from.total_gpus = "metrics: GPUs seen (Kubernetes did not answer)";
    n.from.allocatable_gpus = n.from.free_gpus = "= total (Kubernetes did not answer)";
    n.from.requested_gpus = "unknown (Kubernetes did not answer)";
    n.problems.push_back("Kubernetes did not answer: Ready, cordon and requested GPUs unknown");
  } else {
    n.from.total_gpus = "metrics: GPUs seen (no Kubernetes)";
    n.from.allocatable_gpus = n.from.free_gpus = "= total (no Kubernetes)";
    n.from.requested_gpus = "none known (no Kubernetes)";
  }
  n.gpu_product = first_model(&m);
  if (!m.gpu_resource.empty()) {
    n.gpu_resource = m.gpu_resource;
    n.from.gpu_resource = "the agent's backend (no Kubernetes)";
  } else {
    n.gpu_resource = std::string(resource_of_models(m));
    n.from.gpu_resource = n.gpu_resource.empty() ? "unknown: the GPU model names no vendor (any resource may go there)"
                                                 : "inferred from the GPU model names (no Kubernetes)";
  }
}

void summarize_metrics_nodes(const core::FleetFacts& facts, const RankOptions& o, const FirstEntries& by_node,
                             Summaries& out) {
  std::vector<const core::NodeMetrics*> order;
  order.reserve(facts.metrics.size());
  for (std::size_t i = 0; i < facts.metrics.size(); ++i)
    if (by_node.at(facts.metrics[i].node) == i) order.push_back(&facts.metrics[i]);  // a node's first entry only
  std::sort(order.begin(), order.end(),
            [](const core::NodeMetrics* a, const core::NodeMetrics* b) { return a->node < b->node; });
  out.nodes.reserve(order.size());
  for (const auto* m : order) {
    NodeSummary& n = out.nodes.emplace_back();
    fill_from_metrics(n, *m, facts.kube_error.has_value());
    apply_metrics(n, m, o);
    if (n.unhealthy.count) {  // without Kubernetes, an unhealthy GPU is not free to place on
      n.free_gpus -= std::min(n.free_gpus, n.unhealthy.count);
      n.from.free_gpus = "metrics: GPUs seen less the unhealthy ones";
    }
  }
}

}  // namespace

Summaries summarize(const core::FleetFacts& facts, const RankOptions& o) {
  Summaries out;
  out.kube_error = facts.kube_error;
  FirstEntries by_node;
  by_node.reserve(facts.metrics.size());
  for (std::size_t i = 0; i < facts.metrics.size(); ++i) by_node.emplace(facts.metrics[i].node, i);
  if (facts.kube)
    summarize_kube_nodes(facts, o, by_node, out);
  else
    summarize_metrics_nodes(facts, o, by_node, out);
  for (auto& n : out.nodes)
    if (!n.has_metrics) {
      n.idle_gpu_count = n.free_gpus;
      n.from.idle_gpu_count = "assumed: no metrics, free GPUs counted idle";
      n.from.utilization = "none";
    }
  return out;
}

namespace {

// Why no node can host `required` GPUs: the first five refused candidates and why each is refused.
std::string none_can_host(const std::vector<Candidate>& refused, std::uint64_t required, const std::string& of_resource,
                          bool resource_asked) {
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < refused.size() && i < 5; ++i)
    parts.push_back(refused[i].node + ": " + refused[i].why_not);
  if (refused.size() > 5) parts.push_back(fmt::format("and {} more", refused.size() - 5));
  return fmt::format("no node can host {} GPU(s){} (Ready, schedulable, enough free GPUs{}): {}", required, of_resource,
                     resource_asked ? ", that resource" : "", fmt::join(parts, "; "));
}

}  // namespace

NodeChoice select_node(const Summaries& s, std::uint64_t required, Fallback fallback, std::string_view gpu_resource) {
  if (required == 0) required = 1;
  NodeChoice c;
  c.gpu_resource = std::string(gpu_resource);
  const std::string of_resource = gpu_resource.empty() ? std::string() : fmt::format(" of {}", gpu_resource);
  if (s.kube_error) {
    // Without Kubernetes' answer every node would look Ready, uncordoned and free: no pin on that.
    c.source_failed = true;
    c.reason = fmt::format("{}; no node is chosen without Kubernetes (readiness, cordons and requested GPUs unknown)",
                           *s.kube_error);
    c.reasoning.push_back("=== GPU Node Selection ===");
    c.reasoning.push_back(fmt::format("Looking for node with {} idle GPU(s){}...", required, of_resource));
    c.reasoning.push_back("No suitable node found: " + c.reason);
    c.reasoning.push_back("No node pinned: the Kubernetes scheduler decides.");
    c.reasoning.push_back("==========================");
    return c;
  }
  // A node is refused for a resource only when it is known to have another one. Unknown happens only
  // without Kubernetes (there a node without a GPU resource has no free GPUs anyway): model names such as
  // "A100-SXM4-40GB" name no vendor, and dcgm-exporter's series do not say it either.
  const auto right_resource = [gpu_resource](const NodeSummary& n) {
    return gpu_resource.empty() || n.gpu_resource.empty() || n.gpu_resource == gpu_resource;
  };
  std::vector<const NodeSummary*> eligible, others;
  for (const auto& n : s.nodes)
    (n.ready && n.schedulable && n.free_gpus >= required && right_resource(n) ? eligible : others).push_back(&n);
  std::sort(eligible.begin(), eligible.end(),
            [required](const NodeSummary* a, const NodeSummary* b) { return ranks_before(*a, *b, required); });
  c.candidates.reserve(s.nodes.size());
  for (const auto* n : eligible) c.candidates.push_back({n->name, true, n->idle_gpu_count >= required, {}, n});
  for (const auto* n : others) {
    std::vector<std::string> why;
    if (!n->ready) why.push_back("not Ready");
    if (!n->schedulable) why.push_back("unschedulable (cordoned)");
    if (n->free_gpus < required)
      why.push_back(fmt::format("{} free GPU(s) < {}{}", n->free_gpus, required, lost_to_health(*n)));
    if (!right_resource(*n)) why.push_back(fmt::format("{}, not {}", n->gpu_resource, gpu_resource));
    c.candidates.push_back({n->name, false, n->idle_gpu_count >= required, fmt::format("{}", fmt::join(why, "; ")), n});
  }

  c.reasoning.push_back("=== GPU Node Selection ===");
  c.reasoning.push_back(fmt::format("Looking for node with {} idle GPU(s){}...", required, of_resource));
  if (!eligible.empty() && eligible.front()->idle_gpu_count >= required) {
    const auto& n = *eligible.front();
    c.node = n.name;
    c.reason = fmt::format(
        "node '{}' has {} idle GPU(s) ({} needed) and average utilization {}; best of {} node(s) that can host {} "
        "GPU(s)",
        n.name, n.idle_gpu_count, required, pct(n.avg_utilization), eligible.size(), required);
    describe_choice(c.reasoning, n);
  } else if (eligible.empty()) {
    c.reason = s.nodes.empty() ? std::string("no GPU nodes are known")
                               : none_can_host(c.candidates, required, of_resource, !gpu_resource.empty());
    c.reasoning.push_back("No suitable node found: " + c.reason);
    c.reasoning.push_back("No node pinned: the Kubernetes scheduler decides.");
  } else if (fallback == Fallback::LeastLoaded) {
    const auto* best = *std::min_element(eligible.begin(), eligible.end(),
                                         [](const NodeSummary* a, const NodeSummary* b) { return loads_less(*a, *b); });
    c.node = best->name;
    c.fallback_used = true;
    c.reason =
        fmt::format("no node has {} idle GPU(s); least-loaded node with {} free GPU(s): '{}' (average utilization {})",
                    required, required, best->name, pct(best->avg_utilization));
    c.reasoning.push_back(fmt::format(
        "No node has {} idle GPU(s); falling back to the least-loaded node with enough free GPUs.", required));
    describe_choice(c.reasoning, *best);
  } else {
    const auto& most = *eligible.front();
    c.reason = fmt::format(
        "no node has {} idle GPU(s) (the most: '{}' with {} idle of {} free){}; not pinned, the Kubernetes scheduler "
        "decides",
        required, most.name, most.idle_gpu_count, most.free_gpus, lost_to_health(s.nodes));
    c.reasoning.push_back("No suitable node found: " + c.reason);
    c.reasoning.push_back("No node pinned: the Kubernetes scheduler decides.");
  }
  c.reasoning.push_back("==========================");
  return c;
}

}  // namespace gf::allocator
