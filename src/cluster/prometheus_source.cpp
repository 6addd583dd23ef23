// Prometheus instant queries → per-node GPU metrics (see prometheus_source.hpp).
#include "cluster/prometheus_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/gpu_health.hpp"
#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;

// Prometheus writes sample values as strings ("37", "1.5e+03", "NaN", "+Inf").
std::optional<double> number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

std::string label(const PromSample& s, const std::string& key) {
  const auto it = s.labels.find(key);
  return it == s.labels.end() ? std::string() : it->second;
}

constexpr std::string_view kXidFamily = "DCGM_FI_DEV_XID_ERRORS";
constexpr std::string_view kRowRemapFamily = "DCGM_FI_DEV_ROW_REMAP_FAILURE";
constexpr std::string_view kHealthFamily = "gpufleet_gpu_health";

// What the health series say of one GPU.
struct HealthFacts {
  std::optional<unsigned> last_xid;
  bool row_remap_failure = false;
  std::string state;  // gpufleet's verdict when not ok: "unhealthy", "lost"
};

// The verdict of core::judge_health on what metrics carry (the last XID, the remap flag, lost), and
// gpufleet's own verdict beside it; empty when healthy.
std::string unhealthy_reason(const HealthFacts& h) {
  core::GpuReading r;
  if (h.last_xid) r.last_xid = *h.last_xid;
  r.remapped_rows_failure = h.row_remap_failure;
  if (h.state == "lost") r.health = core::Health::Lost;
  const auto v = core::judge_health(r);
  if (!v.healthy) return core::problem_words(v.problems.front().code);
  // The agent judges on every XID since its start (or its last clear); the metric keeps only the last.
  if (h.state == "unhealthy")
    return h.last_xid ? fmt::format("unhealthy (gpufleet; last XID {})", *h.last_xid) : "unhealthy (gpufleet)";
  return {};
}

}  // namespace

Result<std::vector<PromSample>> parse_instant_query(std::string_view body) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) return make_error("the answer is not JSON");
  if (!j.is_object()) return make_error("the answer is not a JSON object");
  const auto status = j.find("status");
  if (status == j.end() || !status->is_string()) return make_error("the answer has no \"status\"");
  if (*status != "success") {
    const auto type = j.find("errorType"), err = j.find("error");
    return make_error(fmt::format("Prometheus answered {}: {}: {}", status->dump(),
                                  type != j.end() && type->is_string() ? type->get<std::string>() : "(no errorType)",
                                  err != j.end() && err->is_string() ? err->get<std::string>() : "(no error)"));
  }
  const auto data = j.find("data");
  if (data == j.end() || !data->is_object()) return make_error("the answer has no \"data\" object");
  const auto type = data->find("resultType");
  if (type == data->end() || !type->is_string() || *type != "vector")
    return make_error(
        fmt::format("expected resultType \"vector\", got {}", type == data->end() ? "none" : type->dump()));
  const auto result = data->find("result");
  if (result == data->end() || !result->is_array()) return make_error("the answer has no \"result\" array");
  std::vector<PromSample> out;
  out.reserve(result->size());
  for (const auto& r : *result) {
    if (!r.is_object()) return make_error("a result entry is not an object");
    const auto metric = r.find("metric"), value = r.find("value");
    if (metric == r.end() || !metric->is_object()) return make_error("a result entry has no \"metric\" object");
    if (value == r.end() || !value->is_array() || value->size() != 2)
      return make_error("a result entry has no [time, value] pair");
    const auto t = number((*value)[0]), v = number((*value)[1]);
    if (!t || !v) return make_error("a sample's time or value is not a number");
    if (!std::isfinite(*v)) continue;
    PromSample s;
    s.value = *v;
    s.timestamp_s = *t;
    for (const auto& [k, lv] : metric->items()) {
      if (!lv.is_string()) return make_error(fmt::format("label {} is not a string", json(k).dump()));
      s.labels.emplace(k, lv.get<std::string>());
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool valid_label_name(std::string_view n) noexcept {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> prometheus_queries(const std::string& l) {
  const std::string gpu = fmt::format("max by ({}, gpu, UUID) ", l);
  // Framebuffer: a GPU's own series when it has one (a MIG instance's series carry GPU_I_ID); a GPU
  // exported only per MIG instance gets the sum of its instances. Never both: that would count its
  // memory twice.
  const auto fb = [&](const char* m) {
    return fmt::format("{}({}{{GPU_I_ID=\"\"}}) or sum by ({}, gpu, UUID) ({})", gpu, m, l, m);
  };
  return {fmt::format("max by ({}, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_UTIL)", l), fb("DCGM_FI_DEV_FB_USED"),
          fb("DCGM_FI_DEV_FB_FREE"), gpu + "(DCGM_FI_DEV_GPU_TEMP)", gpu + "(DCGM_FI_DEV_POWER_USAGE)",
          gpu + "(timestamp(DCGM_FI_DEV_GPU_UTIL))",
          // Grouped by __name__ too (Prometheus keeps the name when it is a grouping label): one query
          // for the three families. A comparison keeps the name; `!= 0` drops the XID 0 and remap 0 series.
          fmt::format("max by ({}, gpu, UUID, __name__, state) ({{__name__=~\"{}|{}|{}\",state!~\"ok|error\"}} != 0)",
                      l, kXidFamily, kRowRemapFamily, kHealthFamily)};
}

PromFleet join_answers(const PromAnswers& a, const std::string& node_label) {
  PromFleet out;
  std::unordered_map<std::string, std::size_t> node_at;                         // node → index in out.nodes
  std::unordered_map<std::string, std::pair<std::size_t, std::size_t>> gpu_at;  // node\0id → (node, gpu)
  std::size_t unlabelled = 0;

  // Finds or makes the GPU a sample describes; null when the sample names no node.
  auto gpu_of = [&](const PromSample& s, bool create) -> core::FleetGpu* {
    const std::string node = label(s, node_label);
    if (node.empty()) {
      ++unlabelled;
      return nullptr;
    }
    const std::string uuid = label(s, "UUID"), index = label(s, "gpu");
    const std::string key = node + '\0' + (uuid.empty() ? "#" + index : uuid);
    if (const auto it = gpu_at.find(key); it != gpu_at.end())
      return &out.nodes[it->second.first].gpus[it->second.second];
    if (!create) return nullptr;
    auto [nit, fresh] = node_at.try_emplace(node, out.nodes.size());
    if (fresh) {
      core::NodeMetrics m;
      m.node = node;
      m.source = "prometheus";
      out.nodes.push_back(std::move(m));
    }
    auto& m = out.nodes[nit->second];
    core::FleetGpu g;
    g.node = node;
    g.uuid = uuid;
    g.model = label(s, "modelName");
    const auto i = core::parse_uint(index, 0, (1u << 20) - 1);
    g.index = i ? static_cast<unsigned>(*i) : static_cast<unsigned>(m.gpus.size());
    m.gpus.push_back(std::move(g));
    gpu_at.emplace(key, std::make_pair(nit->second, m.gpus.size() - 1));
    return &m.gpus.back();
  };

  // Every metric may introduce a GPU (a GPU without utilization still has memory), in a fixed order.
  for (const auto& s : a.utilization)
    if (auto* g = gpu_of(s, true)) g->utilization_pct = s.value;
  std::unordered_map<core::FleetGpu*, double> free_mib;
  for (const auto& s : a.fb_used)
    if (auto* g = gpu_of(s, true)) g->memory_used_mib = s.value;
  for (const auto& s : a.fb_free)
    if (auto* g = gpu_of(s, true)) free_mib[g] = s.value;
  for (const auto& s : a.temperature)
    if (auto* g = gpu_of(s, false)) g->temperature_c = s.value;
  for (const auto& s : a.power)
    if (auto* g = gpu_of(s, false)) g->power_w = s.value;
  for (auto& m : out.nodes)
    for (auto& g : m.gpus)
      if (const auto it = free_mib.find(&g); it != free_mib.end() && g.memory_used_mib)
        g.memory_total_mib = *g.memory_used_mib + it->second;
  // Per GPU (a GPU whose series stopped is stale beside fresh ones), and the newest per node.
  for (const auto& s : a.sample_time) {
    const auto it = node_at.find(label(s, node_label));
    if (it == node_at.end() || !std::isfinite(s.value) || s.value < 0 || s.value > 1e11) continue;
    const auto t = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(s.value)));
    if (auto* g = gpu_of(s, false); g && (!g->observed || t > *g->observed)) g->observed = t;
    auto& observed = out.nodes[it->second].observed;
    if (!observed || t > *observed) observed = t;
  }
  // Health: only GPUs the other metrics named (a health series alone makes no GPU).
  std::unordered_map<core::FleetGpu*, HealthFacts> health;
  for (const auto& s : a.health) {
    auto* g = gpu_of(s, false);
    if (!g) continue;
    auto& h = health[g];
    const std::string name = label(s, "__name__");
    if (name == kXidFamily && s.value >= 1 && s.value <= 1e6)
      h.last_xid = static_cast<unsigned>(s.value);
    else if (name == kRowRemapFamily)
      h.row_remap_failure = true;  // != 0
    else if (name == kHealthFamily && (label(s, "state") == "unhealthy" || label(s, "state") == "lost"))
      h.state = label(s, "state");
  }
  for (const auto& [g, h] : health) g->unhealthy = unhealthy_reason(h);
  for (auto& m : out.nodes)
    std::sort(m.gpus.begin(), m.gpus.end(), [](const core::FleetGpu& x, const core::FleetGpu& y) {
      return x.index != y.index ? x.index < y.index : x.uuid < y.uuid;
    });
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const core::NodeMetrics& x, const core::NodeMetrics& y) { return x.node < y.node; });
  if (unlabelled)
    out.warnings.push_back(
        fmt::format("{} series have no '{}' label and were ignored (see --node-label)", unlabelled, node_label));
  return out;
}

Result<PromFleet> query_prometheus(const PrometheusOptions& o) {
  std::string base = o.url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (base.rfind("http://", 0) != 0 && base.rfind("https://", 0) != 0)
    return make_error(fmt::format("prometheus {}: not an http:// or https:// URL", platform::url_for_display(o.url)));
  if (platform::url_for_display(base).ends_with("://(hidden)"))
    return make_error(
        fmt::format("prometheus {}: the URL has an '@' after its host: percent-encode a '/', '?' or "
                    "'#' in its password (%2F, %3F, %23)",
                    platform::url_for_display(base)));
  if (!valid_label_name(o.node_label))
    return make_error(
        fmt::format("node label '{}' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)", o.node_label));
  const auto queries = prometheus_queries(o.node_label);
  std::vector<platform::HttpRequest> reqs;
  for (const auto& q : queries) {
    platform::HttpRequest r;
    r.url = base + "/api/v1/query?query=" + platform::url_escape(q);
    r.timeout = o.timeout;
    r.connect_timeout = std::min(o.timeout, std::chrono::milliseconds(5000));
    r.bearer_token = o.bearer_token;
    r.headers.emplace_back("Accept", "application/json");
    reqs.push_back(std::move(r));
  }
  auto outcomes = platform::http_perform_all(reqs);
  const std::string shown = platform::url_for_display(base);  // the request alone carries the userinfo
  std::vector<std::vector<PromSample>> answers(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i) {
    auto& oc = outcomes[i];
    if (!oc.ok()) {
      const bool down = oc.error().kind == platform::TransportFailure::Unreachable;
      return make_error(fmt::format("prometheus {}: {}{}", shown, down ? "unreachable: " : "", oc.error().message));
    }
    const auto& resp = oc.response();
    auto parsed = parse_instant_query(resp.body);
    if (resp.status >= 300 || !parsed) {
      // Prometheus answers 400/422/503 with its JSON error: its words say more than the status alone.
      return make_error(fmt::format(
          "prometheus {}: query '{}': {}{}", shown, queries[i],
          resp.status >= 300 ? fmt::format("HTTP {}", resp.status) : std::string(),
          parsed ? std::string()
                 : (resp.status >= 300 ? " (" : "") + parsed.error().message + (resp.status >= 300 ? ")" : "")));
    }
    answers[i] = std::move(*parsed);
  }
  PromAnswers a;
  a.utilization = std::move(answers[0]);
  a.fb_used = std::move(answers[1]);
  a.fb_free = std::move(answers[2]);
  a.temperature = std::move(answers[3]);
  a.power = std::move(answers[4]);
  a.sample_time = std::move(answers[5]);
  a.health = std::move(answers[6]);
  return join_answers(a, o.node_label);
}

}  // namespace gf::cluster
