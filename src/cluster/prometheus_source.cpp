// Prometheus instant queries → per-node GPU metrics (see prometheus_source.hpp).
#include "cluster/prometheus_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/gpu_health.hpp"
#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

std::string label(const PromSample& s, const std::string& key) {
  const auto* v = s.labels.find(key);
  return v ? *v : std::string();
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

bool valid_label_name(std::string_view n) noexcept {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

namespace {

// The metrics of the first round (PromAnswers' order) that are asked.
constexpr std::size_t kTemperature = 3, kPower = 4;
std::vector<std::size_t> first_round(bool display_metrics) {
  if (display_metrics) return {0, 1, 2, kTemperature, kPower, 5, 6};
  return {0, 1, 2, 5, 6};
}

}  // namespace

std::vector<std::string> prometheus_queries(const std::string& l, bool display_metrics) {
  const std::string gpu = fmt::format("max by ({}, gpu, UUID) ", l);
  // Framebuffer: one series per GPU and per MIG instance (whose series carry GPU_I_ID); join_answers
  // takes a GPU's own series when it has one, else the sum of its instances. (PromQL's `A or sum by
  // (…) (B)` says the same, at ten times the cost in Prometheus for 80 000 GPUs.)
  const auto fb = [&](const char* m) { return fmt::format("max by ({}, gpu, UUID, GPU_I_ID) ({})", l, m); };
  const std::string all[] = {
      fmt::format("max by ({}, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_UTIL)", l), fb("DCGM_FI_DEV_FB_USED"),
      fb("DCGM_FI_DEV_FB_FREE"), gpu + "(DCGM_FI_DEV_GPU_TEMP)", gpu + "(DCGM_FI_DEV_POWER_USAGE)",
      // Per node: each distinct sample time and how many series have it (see the header).
      fmt::format("count_values by ({}) (\"{}\", timestamp(DCGM_FI_DEV_GPU_UTIL))", l, kSampleTimeLabel),
      // Grouped by __name__ too (Prometheus keeps the name when it is a grouping label): one query
      // for the three families. A comparison keeps the name; `!= 0` drops the XID 0 and remap 0 series.
      fmt::format("max by ({}, gpu, UUID, __name__, state) ({{__name__=~\"{}|{}|{}\",state!~\"ok|error\"}} != 0)", l,
                  kXidFamily, kRowRemapFamily, kHealthFamily)};
  std::vector<std::string> out;
  for (const auto i : first_round(display_metrics)) out.push_back(all[i]);
  return out;
}

std::string gpu_sample_time_query(const std::string& l, const std::vector<std::string>& nodes) {
  const auto printable_ascii = [](const std::string& n) {
    return std::all_of(n.begin(), n.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
  };
  std::string matcher;
  if (!nodes.empty() && nodes.size() <= kMaxNamedNodes && std::all_of(nodes.begin(), nodes.end(), printable_ascii)) {
    // {l=~"a|b\\.c"} for the nodes a and b.c: each name a literal in the (anchored) regex, every punctuation escaped
    // for RE2, and then each backslash and quote for PromQL's double-quoted string.
    matcher = "{" + l + "=~\"";
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (i) matcher += '|';
      for (const char c : nodes[i]) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        if (!plain && c != ' ') matcher += "\\\\";  // RE2's escape, itself escaped for the string
        if (c == '"' || c == '\\') matcher += '\\';
        matcher += c;
      }
    }
    matcher += "\"}";
  }
  return fmt::format("max by ({}, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL{}))", l, matcher);
}

namespace {

// The join, one answer at a time, in PromAnswers' order (query_prometheus drops each answer once joined;
// the answers are parsed on threads of their own, so up to all of them may be held, parsed, while they
// wait for their turn: bench/RESULTS.md puts that peak at +30–40 MiB for 10 000 nodes).
class PromJoin {
 public:
  explicit PromJoin(const std::string& node_label) : node_label_(node_label) {}

  void add(std::size_t metric, const std::vector<PromSample>& samples);
  // The nodes the per-node sample times left undecided (after add(5)), by name.
  std::vector<std::string> undecided() const;
  // Each GPU's sample time, for the undecided nodes.
  void add_gpu_times(const std::vector<PromSample>& samples);
  PromFleet finish() &&;

 private:
  using GpuAt = std::pair<std::size_t, std::size_t>;  // (node, gpu) indices in out_.nodes
  // Up to this many GPUs a node's GPUs are found by a scan of their ids; beyond, by a map of its own.
  static constexpr std::size_t kScan = 32;
  struct NodeIds {
    std::vector<std::string> ids;                        // per GPU: its UUID, else "#" and its gpu label
    std::unordered_map<std::string, std::size_t> by_id;  // filled once the node has more than kScan
  };
  // A GPU's framebuffer: its own series, else the sum of its MIG instances' (never both: that would
  // count its memory twice).
  struct Framebuffer {
    std::optional<double> own;
    std::optional<double> instances;
    std::optional<double> value() const { return own ? own : instances; }
  };

  core::FleetGpu& gpu(GpuAt at) { return out_.nodes[at.first].gpus[at.second]; }
  std::optional<GpuAt> gpu_of(const PromSample& s, bool create);
  void framebuffer(const std::vector<PromSample>& samples, std::map<GpuAt, Framebuffer>& fb);
  void health(const std::vector<PromSample>& samples);
  void node_times(const std::vector<PromSample>& samples);

  const std::string& node_label_;
  PromFleet out_;
  std::unordered_map<std::string, std::size_t> node_at_;  // node → index in out_.nodes
  std::vector<NodeIds> ids_;                              // per node
  std::map<GpuAt, Framebuffer> used_, free_;
  std::map<GpuAt, HealthFacts> health_;
  std::vector<bool> undecided_;  // per node: its GPUs' sample times are asked per GPU
  std::size_t unlabelled_ = 0;
};

// Finds or makes the GPU a sample describes; nullopt when the sample names no node.
std::optional<PromJoin::GpuAt> PromJoin::gpu_of(const PromSample& s, bool create) {
  const std::string* node = s.labels.find(node_label_);
  if (node == nullptr || node->empty()) {
    ++unlabelled_;
    return std::nullopt;
  }
  const std::string uuid = label(s, "UUID"), index = label(s, "gpu");
  std::string id = uuid.empty() ? "#" + index : uuid;
  auto nit = node_at_.find(*node);
  if (nit != node_at_.end()) {
    const auto& n = ids_[nit->second];
    if (n.ids.size() <= kScan) {
      for (std::size_t i = 0; i < n.ids.size(); ++i)
        if (n.ids[i] == id) return GpuAt{nit->second, i};
    } else if (const auto it = n.by_id.find(id); it != n.by_id.end()) {
      return GpuAt{nit->second, it->second};
    }
  }
  if (!create) return std::nullopt;
  if (nit == node_at_.end()) {
    nit = node_at_.emplace(*node, out_.nodes.size()).first;
    core::NodeMetrics m;
    m.node = *node;
    m.source = "prometheus";
    out_.nodes.push_back(std::move(m));
    ids_.emplace_back();
  }
  auto& m = out_.nodes[nit->second];
  core::FleetGpu g;
  g.node = *node;
  g.uuid = uuid;
  g.model = label(s, "modelName");
  const auto i = core::parse_uint(index, 0, (1u << 20) - 1);
  g.index = i ? static_cast<unsigned>(*i) : static_cast<unsigned>(m.gpus.size());
  m.gpus.push_back(std::move(g));
  auto& n = ids_[nit->second];
  n.ids.push_back(std::move(id));
  if (n.ids.size() > kScan) {
    if (n.by_id.empty())
      for (std::size_t k = 0; k < n.ids.size(); ++k) n.by_id.emplace(n.ids[k], k);
    else
      n.by_id.emplace(n.ids.back(), n.ids.size() - 1);
  }
  return GpuAt{nit->second, m.gpus.size() - 1};
}

void PromJoin::framebuffer(const std::vector<PromSample>& samples, std::map<GpuAt, Framebuffer>& fb) {
  for (const auto& s : samples) {
    const auto at = gpu_of(s, true);
    if (!at) continue;
    auto& f = fb[*at];
    if (const auto* instance = s.labels.find("GPU_I_ID"); instance && !instance->empty())
      f.instances = f.instances.value_or(0) + s.value;
    else
      f.own = f.own ? std::max(*f.own, s.value) : s.value;
  }
}

// Health: only GPUs the other metrics named (a health series alone makes no GPU).
void PromJoin::health(const std::vector<PromSample>& samples) {
  for (const auto& s : samples) {
    const auto at = gpu_of(s, false);
    if (!at) continue;
    auto& h = health_[*at];
    const std::string name = label(s, "__name__");
    if (name == kXidFamily && s.value >= 1 && s.value <= 1e6)
      h.last_xid = static_cast<unsigned>(s.value);
    else if (name == kRowRemapFamily)
      h.row_remap_failure = true;  // != 0
    else if (const std::string state = label(s, "state");
             name == kHealthFamily && (state == "unhealthy" || state == "lost"))
      h.state = state;
  }
}

// Every metric may introduce a GPU (a GPU without utilization still has memory), in a fixed order.
void PromJoin::add(std::size_t metric, const std::vector<PromSample>& samples) {
  switch (metric) {
    case 0:
      for (const auto& s : samples)
        if (const auto at = gpu_of(s, true)) gpu(*at).utilization_pct = s.value;
      return;
    case 1: return framebuffer(samples, used_);
    case 2: return framebuffer(samples, free_);
    case 3:
      for (const auto& s : samples)
        if (const auto at = gpu_of(s, false)) gpu(*at).temperature_c = s.value;
      return;
    case 4:
      for (const auto& s : samples)
        if (const auto at = gpu_of(s, false)) gpu(*at).power_w = s.value;
      return;
    case 5: return node_times(samples);
    default: return health(samples);
  }
}

namespace {

// A sample time in epoch seconds as a time point; nullopt when out of range.
std::optional<std::chrono::system_clock::time_point> sample_time(double s) {
  if (!std::isfinite(s) || s < 0 || s > 1e11) return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(s)));
}

// count_values writes the value in its label as Go's shortest form ("1700000000.5", "1.7e+09").
std::optional<double> number_label(const std::string* text) {
  if (text == nullptr || text->empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(text->c_str(), &end);
  if (end != text->c_str() + text->size()) return std::nullopt;
  return d;
}

}  // namespace

// Per node: when it has one sample time and one series for each GPU with a utilization sample (the
// GPUs whose times the per-GPU query would give), that time is every such GPU's and the node's. Any
// other answer (several times, a count that differs: a GPU scraped twice, a NaN sample) leaves the
// node to the per-GPU query.
void PromJoin::node_times(const std::vector<PromSample>& samples) {
  struct Times {
    std::optional<std::chrono::system_clock::time_point> t;
    double series = 0;
    bool decided = true;
  };
  std::vector<Times> per(out_.nodes.size());
  std::vector<bool> named(out_.nodes.size());
  for (const auto& s : samples) {
    const auto it = node_at_.find(label(s, node_label_));
    if (it == node_at_.end()) continue;
    auto& n = per[it->second];
    named[it->second] = true;
    const auto value = number_label(s.labels.find(kSampleTimeLabel));
    const auto t = value ? sample_time(*value) : std::nullopt;
    if (!t || (n.t && *n.t != *t)) n.decided = false;
    if (t) n.t = n.t ? std::max(*n.t, *t) : *t;
    n.series += s.value;
  }
  undecided_.assign(out_.nodes.size(), false);
  for (std::size_t i = 0; i < per.size(); ++i) {
    if (!named[i]) continue;
    auto& m = out_.nodes[i];
    const auto with_utilization = static_cast<double>(std::count_if(
        m.gpus.begin(), m.gpus.end(), [](const core::FleetGpu& g) { return g.utilization_pct.has_value(); }));
    if (!per[i].decided || per[i].series != with_utilization) {
      undecided_[i] = true;
      continue;
    }
    m.observed = per[i].t;
    for (auto& g : m.gpus)
      if (g.utilization_pct) g.observed = per[i].t;
  }
}

std::vector<std::string> PromJoin::undecided() const {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < undecided_.size(); ++i)
    if (undecided_[i]) names.push_back(out_.nodes[i].node);
  return names;
}

// Per GPU (a GPU whose series stopped is stale beside fresh ones), and the newest per node.
void PromJoin::add_gpu_times(const std::vector<PromSample>& samples) {
  for (const auto& s : samples) {
    const auto it = node_at_.find(label(s, node_label_));
    if (it == node_at_.end() || it->second >= undecided_.size() || !undecided_[it->second]) continue;
    const auto t = sample_time(s.value);
    if (!t) continue;
    if (const auto at = gpu_of(s, false); at && (!gpu(*at).observed || *t > *gpu(*at).observed)) gpu(*at).observed = t;
    auto& observed = out_.nodes[it->second].observed;
    if (!observed || *t > *observed) observed = t;
  }
}

PromFleet PromJoin::finish() && {
  for (const auto& [at, f] : used_) gpu(at).memory_used_mib = f.value();
  for (const auto& [at, f] : free_) {
    auto& g = gpu(at);
    if (const auto v = f.value(); v && g.memory_used_mib) g.memory_total_mib = *g.memory_used_mib + *v;
  }
  for (const auto& [at, h] : health_) gpu(at).unhealthy = unhealthy_reason(h);
  for (auto& m : out_.nodes)
    std::sort(m.gpus.begin(), m.gpus.end(), [](const core::FleetGpu& x, const core::FleetGpu& y) {
      return x.index != y.index ? x.index < y.index : x.uuid < y.uuid;
    });
  std::sort(out_.nodes.begin(), out_.nodes.end(),
            [](const core::NodeMetrics& x, const core::NodeMetrics& y) { return x.node < y.node; });
  if (unlabelled_)
    out_.warnings.push_back(
        fmt::format("{} series have no '{}' label and were ignored (see --node-label)", unlabelled_, node_label_));
  return std::move(out_);
}

}  // namespace

PromFleet join_answers(const PromAnswers& a, const std::string& node_label) {
  PromJoin join(node_label);
  std::size_t i = 0;
  for (const auto* v : {&a.utilization, &a.fb_used, &a.fb_free, &a.temperature, &a.power, &a.sample_time, &a.health})
    join.add(i++, *v);
  join.add_gpu_times(a.gpu_sample_time);
  return std::move(join).finish();
}

namespace {

// One query, asked and parsed on its own thread: the samples, or the error naming the query.
Result<std::vector<PromSample>> ask(const PrometheusOptions& o, const std::string& base, const std::string& query) {
  platform::HttpRequest r;
  r.url = base + "/api/v1/query?query=" + platform::url_escape(query);
  r.timeout = o.timeout;
  r.connect_timeout = std::min(o.timeout, std::chrono::milliseconds(5000));
  r.bearer_token = o.bearer_token;
  r.headers.emplace_back("Accept", "application/json");
  auto oc = platform::http_perform(r);
  const std::string shown = platform::url_for_display(base);  // the request alone carries the userinfo
  if (!oc.ok()) {
    const bool down = oc.error().kind == platform::TransportFailure::Unreachable;
    return make_error(fmt::format("prometheus {}: {}{}", shown, down ? "unreachable: " : "", oc.error().message));
  }
  auto& resp = oc.response();
  auto parsed = parse_instant_query(resp.body);
  if (resp.status >= 300 || !parsed) {
    // Prometheus answers 400/422/503 with its JSON error: its words say more than the status alone.
    return make_error(fmt::format(
        "prometheus {}: query '{}': {}{}", shown, query,
        resp.status >= 300 ? fmt::format("HTTP {}", resp.status) : std::string(),
        parsed ? std::string()
               : (resp.status >= 300 ? " (" : "") + parsed.error().message + (resp.status >= 300 ? ")" : "")));
  }
  return parsed;  // the body (~10 MB for 80 000 GPUs) is let go here, before the join
}

// Runs `queries` at once, each parsed on its own thread as its answer comes (the parsing of one overlaps
// Prometheus' work on the others), and hands the samples to `take` in the queries' order, each let go once
// taken. The first query (in that order) that failed is the error.
Result<void> run_queries(const PrometheusOptions& o, const std::string& base, const std::vector<std::string>& queries,
                         const std::function<void(std::size_t, const std::vector<PromSample>&)>& take) {
  std::vector<std::future<Result<std::vector<PromSample>>>> answers;
  answers.reserve(queries.size());
  for (const auto& q : queries)
    answers.push_back(std::async(std::launch::async, [&o, &base, &q] { return ask(o, base, q); }));
  for (std::size_t i = 0; i < answers.size(); ++i) {
    auto samples = answers[i].get();
    if (!samples) return samples.error();  // the other futures wait for their threads as they go
    take(i, *samples);
  }
  return {};
}

}  // namespace

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
  if (!valid_label_name(o.node_label) || o.node_label == kSampleTimeLabel)
    return make_error(
        fmt::format("node label '{}' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) other than {}",
                    o.node_label, kSampleTimeLabel));
  PromJoin join(o.node_label);
  const auto metrics = first_round(o.display_metrics);
  auto first =
      run_queries(o, base, prometheus_queries(o.node_label, o.display_metrics),
                  [&](std::size_t i, const std::vector<PromSample>& samples) { join.add(metrics[i], samples); });
  if (!first) return first.error();
  // The nodes whose GPUs' sample times differ (or whose series do not match their GPUs): asked per GPU.
  if (const auto nodes = join.undecided(); !nodes.empty()) {
    auto second =
        run_queries(o, base, {gpu_sample_time_query(o.node_label, nodes)},
                    [&](std::size_t, const std::vector<PromSample>& samples) { join.add_gpu_times(samples); });
    if (!second) return second.error();
  }
  return std::move(join).finish();
}

}  // namespace gf::cluster
