#pragma once
// The fleet's GPU metrics from Prometheus: a few instant queries over its HTTP API (one per metric for
// the whole fleet, never one per node) on dcgm-exporter's names, so it works for fleets that run plain
// dcgm-exporter as well as for gpufleet agents (whose /metrics uses the same names and labels).
//
//   DCGM_FI_DEV_GPU_UTIL               utilization, %
//   DCGM_FI_DEV_FB_USED, _FB_FREE      framebuffer MiB; total = used + free (dcgm-exporter has no total);
//                                      the GPU's own series ({GPU_I_ID=""}), else the sum of its MIG instances
//   DCGM_FI_DEV_GPU_TEMP               °C (optional: absent series leave it unknown)
//   DCGM_FI_DEV_POWER_USAGE            W (optional)
//   timestamp(DCGM_FI_DEV_GPU_UTIL)    when each GPU's utilization sample was taken (for --max-age, per GPU),
//                                      asked per node: `count_values by (<node label>) (…)` answers each
//                                      node's distinct sample times (one, when Prometheus scrapes a node's
//                                      GPUs together) and how many series have each. A node whose GPUs
//                                      have one time and one series each takes it for every GPU; for the
//                                      others (several times, duplicate or NaN series) a second query asks
//                                      the time per GPU, for those nodes only. (A tenth of the answer of
//                                      the per-GPU query for 10 000 nodes × 8 GPUs: 0.9 MB, not 9 MB.)
//   health, one query over three families, only the series that say something is wrong (an XID, a failed
//   row remap, gpufleet's verdict other than ok): a healthy fleet answers an empty vector.
//     DCGM_FI_DEV_XID_ERRORS           the last XID (dcgm-exporter and gpufleet agents)
//     DCGM_FI_DEV_ROW_REMAP_FAILURE    1: a row remap failed
//     gpufleet_gpu_health{state}       a gpufleet agent's own verdict: "unhealthy" or "lost"
//   A GPU is unhealthy when any of them says so (core::judge_health's rule on the last XID and the row
//   remap; XIDs 13, 31, 43 keep it healthy), and FleetGpu::unhealthy says why in a few words.
// Each is wrapped in `max by (<node label>, gpu, UUID[, modelName])`, so Prometheus sends only the labels
// used here (a third of the bytes of the raw series for 1 000 nodes) and a GPU scraped twice is one GPU.
//
// The node is the value of `node_label` (dcgm-exporter's Hostname by default; deployments relabel it to
// node, kubernetes_node, instance, …); a GPU is identified on its node by UUID, else by the gpu label.
// The parsing and joining are pure functions (fuzzed); only query_prometheus does I/O.
// Thread-safety: every function may be called from any number of threads.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::cluster {

struct PrometheusOptions {
  std::string url;  // base URL: http://prometheus:9090 (a path prefix is kept; userinfo is used, never shown)
  std::string node_label = "Hostname";
  std::chrono::milliseconds timeout{10000};  // each query
  std::string bearer_token;                  // sent when not empty
  // Temperature and power: shown by `cluster nodes`/`gpus` and the fleet view, never used to rank or to
  // qualify a node. `cluster select` leaves them out (two of the five big queries fewer: 80 000 series
  // each for 10 000 nodes × 8 GPUs).
  bool display_metrics = true;
};

// A series' labels, in the order sent (a handful: a flat list is searched faster than a map is built).
// A label sent twice keeps its last value.
class PromLabels {
 public:
  // The value of `name`; null when absent.
  const std::string* find(std::string_view name) const noexcept;
  // The value of `name`; throws std::out_of_range when absent (as std::map::at).
  const std::string& at(std::string_view name) const;
  void set(std::string name, std::string value);
  std::size_t size() const noexcept { return items_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// One series of an instant-query answer.
struct PromSample {
  PromLabels labels;
  double value = 0;        // finite (NaN and ±Inf samples are dropped by the parser)
  double timestamp_s = 0;  // the evaluation time Prometheus reports with the value
};

// Parses the body of GET /api/v1/query. Errors: not JSON, not an object, {"status":"error"} (with its
// errorType and error), a result type other than "vector", malformed samples. Never throws. It reads
// the text as a stream of SAX events straight into the samples (no JSON tree: an answer for 80 000 GPUs
// is ~10 MB).
Result<std::vector<PromSample>> parse_instant_query(std::string_view body);

// The answers of one round of queries, by metric.
struct PromAnswers {
  std::vector<PromSample> utilization;
  std::vector<PromSample> fb_used;
  std::vector<PromSample> fb_free;
  std::vector<PromSample> temperature;
  std::vector<PromSample> power;
  // Per node: count_values of timestamp(DCGM_FI_DEV_GPU_UTIL): the label kSampleTimeLabel is a sample
  // time (epoch seconds), the value how many series have it.
  std::vector<PromSample> sample_time;
  // Per GPU: timestamp(DCGM_FI_DEV_GPU_UTIL) (epoch seconds), for the nodes sample_time left undecided
  // (the second round; may name other nodes too: only the undecided ones take it).
  std::vector<PromSample> gpu_sample_time;
  std::vector<PromSample> health;  // by __name__ (and state): see the health query above
};

struct PromFleet {
  std::vector<core::NodeMetrics> nodes;  // by node name, GPUs by index
  std::vector<std::string> warnings;     // e.g. series without the node label
};

// Joins the answers into one NodeMetrics per node (source "prometheus"). Pure.
PromFleet join_answers(const PromAnswers& a, const std::string& node_label);

// The label count_values puts each node's sample time in (the node label may not be this name).
inline constexpr std::string_view kSampleTimeLabel = "gpufleet_sample_time";

// The first round's queries for this node label, in PromAnswers' order (gpu_sample_time excluded);
// without display metrics, temperature and power are left out (the others keep their order).
std::vector<std::string> prometheus_queries(const std::string& node_label, bool display_metrics = true);
// The second round's: each GPU's sample time on these nodes (every node's when `nodes` is empty or
// longer than kMaxNamedNodes, or when a name is not printable ASCII).
inline constexpr std::size_t kMaxNamedNodes = 64;
std::string gpu_sample_time_query(const std::string& node_label, const std::vector<std::string>& nodes);
// Whether `name` is a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*): the node label is spliced
// into PromQL, so nothing else may pass.
bool valid_label_name(std::string_view name) noexcept;

// Runs the queries concurrently, each answer parsed on its own thread as it arrives, and joins them in
// PromAnswers' order. An error names the URL (without its userinfo) and the
// cause: unreachable, an HTTP status, or Prometheus' own error.
Result<PromFleet> query_prometheus(const PrometheusOptions& options);

}  // namespace gf::cluster
