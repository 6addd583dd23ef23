// The fleet's JSON documents (see fleet_json.hpp).
#include "wire/fleet_json.hpp"

#include <cmath>
#include <unordered_map>

#include "core/fields.hpp"
#include "core/gpu_health.hpp"
#include "wire/json.hpp"
#include "wire/time.hpp"

namespace gf::wire {
namespace {

using json = nlohmann::json;

json round1(const std::optional<double>& v) { return v ? json(std::round(*v * 10.0) / 10.0) : json(nullptr); }
json plain(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json common(const core::FleetFacts& facts, const FleetQueryInfo& q) {
  return json{{"thresholds", {{"utilization", q.idle.utilization_pct}, {"memory", q.idle.memory_pct}}},
              {"max_age_s", std::chrono::duration<double>(q.max_age).count()},
              {"sources", q.sources},
              {"kubernetes", facts.kube.has_value()},
              {"errors", facts.source_errors},
              {"kubernetes_error", facts.kube_error ? json(*facts.kube_error) : json(nullptr)},
              {"collected", facts.collected ? json(iso8601(*facts.collected)) : json(nullptr)}};
}

}  // namespace

std::string_view fallback_name(allocator::Fallback f) noexcept {
  return f == allocator::Fallback::LeastLoaded ? "least-loaded" : "none";
}

json node_summary_json(const allocator::NodeSummary& n) {
  return json{{"name", n.name},
              {"total_gpus", n.total_gpus},
              {"allocatable_gpus", n.allocatable_gpus},
              {"requested_gpus", n.requested_gpus},
              {"free_gpus", n.free_gpus},
              {"idle_gpu_count", n.idle_gpu_count},
              {"gpus_with_metrics", n.gpus_with_metrics},
              {"avg_utilization", round1(n.avg_utilization)},
              {"avg_memory_usage", round1(n.avg_memory_usage)},
              {"avg_temperature", round1(n.avg_temperature_c)},
              {"total_power_w", round1(n.total_power_w)},
              {"unhealthy_gpus", n.unhealthy.count},
              {"unhealthy", n.unhealthy.count ? json(n.unhealthy.why) : json(nullptr)},
              {"health", std::string(allocator::health_name(n.health))},
              {"problems", n.problems},
              {"ready", n.ready},
              {"schedulable", n.schedulable},
              {"in_kubernetes", n.in_kubernetes},
              {"has_metrics", n.has_metrics},
              {"gpu_resource", n.gpu_resource.empty() ? json(nullptr) : json(n.gpu_resource)},
              {"gpu_product", n.gpu_product.empty() ? json(nullptr) : json(n.gpu_product)},
              {"metrics_source", n.metrics_source.empty() ? json(nullptr) : json(n.metrics_source)},
              {"agent_url", n.agent_url.empty() ? json(nullptr) : json(n.agent_url)},
              {"observed", n.observed ? json(iso8601(*n.observed)) : json(nullptr)},
              {"sources",
               {{"total_gpus", std::string(n.from.total_gpus)},
                {"allocatable_gpus", std::string(n.from.allocatable_gpus)},
                {"requested_gpus", std::string(n.from.requested_gpus)},
                {"free_gpus", std::string(n.from.free_gpus)},
                {"idle_gpu_count", std::string(n.from.idle_gpu_count)},
                {"utilization", std::string(n.from.utilization)},
                {"gpu_resource", std::string(n.from.gpu_resource)}}}};
}

json fleet_nodes_json(const allocator::Summaries& s, const core::FleetFacts& facts, const FleetQueryInfo& q) {
  json nodes = json::array();
  for (const auto& n : s.nodes) nodes.push_back(node_summary_json(n));
  json j = common(facts, q);
  j["nodes"] = std::move(nodes);
  j["unknown_nodes"] = s.unknown_nodes;
  return j;
}

json fleet_gpus_json(const allocator::Summaries& s, const core::FleetFacts& facts, const FleetQueryInfo& q) {
  // Only GPUs of nodes whose metrics count (fresh, no error); the others are listed with the reason.
  std::unordered_map<std::string_view, const allocator::NodeSummary*> by_name;
  for (const auto& n : s.nodes) by_name.emplace(n.name, &n);
  json gpus = json::array(), without = json::array();
  for (const auto& m : facts.metrics) {
    const auto it = by_name.find(m.node);
    if (it == by_name.end() || !it->second->has_metrics || it->second->metrics_source != m.source) continue;
    for (const auto& g : m.gpus) {
      // A GPU whose own series stopped counts as one without metrics (its node's problems say so).
      const auto now = q.now ? q.now : facts.collected;
      if (g.observed && q.max_age.count() > 0 && now && *now - *g.observed > q.max_age) continue;
      std::optional<double> usage;
      if (g.memory_used_mib && g.memory_total_mib && *g.memory_total_mib > 0)
        usage = *g.memory_used_mib / *g.memory_total_mib * 100.0;
      gpus.push_back({{"node", g.node},
                      {"index", g.index},
                      {"uuid", g.uuid.empty() ? json(nullptr) : json(g.uuid)},
                      {"model", g.model.empty() ? json(nullptr) : json(g.model)},
                      {"utilization", plain(g.utilization_pct)},
                      {"memory_used_mib", plain(g.memory_used_mib)},
                      {"memory_total_mib", plain(g.memory_total_mib)},
                      {"memory_usage", round1(usage)},
                      {"temperature", plain(g.temperature_c)},
                      {"power_w", plain(g.power_w)},
                      {"idle", allocator::gpu_is_idle(g, q.idle)},
                      {"healthy", g.unhealthy.empty()},
                      {"unhealthy", g.unhealthy.empty() ? json(nullptr) : json(g.unhealthy)},
                      {"source", m.source}});
    }
  }
  for (const auto& n : s.nodes)
    if (!n.has_metrics)
      without.push_back(
          {{"node", n.name}, {"health", std::string(allocator::health_name(n.health))}, {"problems", n.problems}});
  json j = common(facts, q);
  j["gpus"] = std::move(gpus);
  j["nodes_without_metrics"] = std::move(without);
  return j;
}

json node_choice_json(const allocator::NodeChoice& c, std::uint64_t required, allocator::Fallback fallback,
                      const core::FleetFacts& facts, const FleetQueryInfo& q) {
  json cands = json::array();
  std::size_t rank = 0;
  for (const auto& cand : c.candidates) {
    const auto& n = *cand.summary;
    cands.push_back({{"node", cand.node},
                     {"rank", cand.eligible ? json(++rank) : json(nullptr)},
                     {"eligible", cand.eligible},
                     {"enough_idle", cand.enough_idle},
                     {"why_not", cand.why_not.empty() ? json(nullptr) : json(cand.why_not)},
                     {"idle_gpu_count", n.idle_gpu_count},
                     {"free_gpus", n.free_gpus},
                     {"allocatable_gpus", n.allocatable_gpus},
                     {"total_gpus", n.total_gpus},
                     {"avg_utilization", round1(n.avg_utilization)},
                     {"avg_memory_usage", round1(n.avg_memory_usage)},
                     {"unhealthy_gpus", n.unhealthy.count},
                     {"health", std::string(allocator::health_name(n.health))}});
  }
  json j = common(facts, q);
  j["node"] = c.node ? json(*c.node) : json(nullptr);
  j["reason"] = c.reason;
  j["required_gpus"] = required;
  j["fallback"] = std::string(fallback_name(fallback));
  j["fallback_used"] = c.fallback_used;
  j["gpu_resource"] = c.gpu_resource.empty() ? json(nullptr) : json(c.gpu_resource);
  j["source_failed"] = c.source_failed;
  j["reasoning"] = c.reasoning;
  j["candidates"] = std::move(cands);
  return j;
}

namespace {

// The value at a field's json_key ("memory.used": the "used" of the "memory" object), when it is a finite
// number; nullopt for null, absent or anything else.
std::optional<double> field_number(const json& gpu, core::Field f) {
  const json* at = &gpu;
  std::string_view key = core::info(f).json_key;
  for (auto dot = key.find('.');; dot = key.find('.')) {
    if (!at->is_object()) return std::nullopt;
    const auto it = at->find(std::string(key.substr(0, dot)));
    if (it == at->end()) return std::nullopt;
    at = &*it;
    if (dot == std::string_view::npos) break;
    key.remove_prefix(dot + 1);
  }
  if (!at->is_number()) return std::nullopt;
  const double v = at->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string text_at(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<core::FleetGpu> fleet_gpu_from_json(const json& g, const std::string& node) {
  if (!g.is_object()) return make_error("a GPU entry is not an object");
  core::FleetGpu f;
  f.node = node;
  const auto idx = g.find("index");
  if (idx == g.end() || !idx->is_number_unsigned() || idx->get<std::uint64_t>() > (1u << 20))
    return make_error("a GPU entry has no valid \"index\"");
  f.index = idx->get<unsigned>();
  f.uuid = text_at(g, "uuid");
  f.model = text_at(g, "name");
  f.utilization_pct = field_number(g, core::Field::Utilization);
  f.memory_used_mib = field_number(g, core::Field::MemoryUsed);
  f.memory_total_mib = field_number(g, core::Field::MemoryTotal);
  f.temperature_c = field_number(g, core::Field::Temperature);
  f.power_w = field_number(g, core::Field::PowerDraw);
  if (const auto h = g.find("healthy"); h != g.end() && h->is_boolean() && !h->get<bool>()) {
    // The first problem in a few words from its code ("XID 79 (…)"), else its sentence, bounded: it is
    // another machine's text.
    std::string why = "unhealthy";
    if (const auto p = g.find("health_problems"); p != g.end() && p->is_array() && !p->empty())
      if (const auto& first = (*p)[0]; first.is_object()) {
        why = core::problem_words(text_at(first, "code"));
        if (why.empty()) why = text_at(first, "message");
      }
    f.unhealthy = why.empty() ? "unhealthy" : why.substr(0, 200);
  }
  return f;
}

}  // namespace

Result<AgentGpuMetrics> node_metrics_from_gpu_metrics(std::string_view body) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error("the gpu-metrics answer is not a JSON object");
  const auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array()) return make_error("the gpu-metrics answer has no \"gpus\" array");
  AgentGpuMetrics out;
  out.backend = text_at(j, "backend");
  core::NodeMetrics& m = out.metrics;
  m.node = text_at(j, "node");
  if (const auto ts = text_at(j, "timestamp"); !ts.empty()) {
    auto t = parse_iso8601(ts);
    if (!t) return make_error("\"timestamp\": " + t.error().message);
    m.observed = *t;
  }
  m.gpus.reserve(gpus->size());
  for (const auto& g : *gpus) {
    auto f = fleet_gpu_from_json(g, m.node);
    if (!f) return f.error();
    m.gpus.push_back(std::move(*f));
  }
  return out;
}

}  // namespace gf::wire
