#pragma once
// Agent: the node agent's one collection loop. Every interval it takes one snapshot through the
// SampleHub and hands it to the cache (latest()), the alert engine, the history writer and the
// listeners (WebSocket feeds). Requests read what the loop published; they never query the driver
// unless they ask for a fresh reading.
// Time comes from a core::Clock. The loop's work is callable with a time, so tests drive it on a fake
// clock: tick() handles one collection (publish, alerts, history batching) and step_history() decides
// whether the batch is written and whether maintenance runs. History goes through the MetricHistory
// port, never the store itself. A collection that throws is counted as a failed one and the loop goes
// on; so does an alert listener that throws.
// Failures are logged by episode, not by collection: the first failure after a good one logs a line
// naming the backend and the cause, a different cause within the same episode one more, and the next
// good collection says how many failed and for how long.
// A published reading carries its renderings (Renderings), each made once for every user of the reading.
// Thread-safety: every public member may be called from any thread. Listeners run on the hub's
// thread and must be quick.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/alerts.hpp"
#include "core/fields.hpp"
#include "core/ports/clock.hpp"
#include "core/ports/metric_history.hpp"
#include "core/snapshot.hpp"
#include "platform/clock.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "wire/gzip.hpp"
#include "wire/live_message.hpp"
#include "wire/object_text.hpp"

namespace gf::node {

struct AgentOptions {
  std::chrono::milliseconds interval{1000};
  std::string node_name;
  std::vector<core::AlertRule> alert_rules = core::default_alert_rules();
  std::chrono::milliseconds history_flush{2000};      // a batch is written at most this often
  std::chrono::milliseconds history_maintain{60000};  // rollups and retention
  std::size_t alert_history = 200;                    // firing/resolved episodes kept in memory
  // A fresh reading finished less than this long ago is handed to the next fresh() callers instead of
  // a new driver query (0: never); callers that come while one is under way always share it.
  std::chrono::milliseconds fresh_reuse{250};
  // false: start() runs no writer thread; the owner calls step_history(now) (tests on a fake clock).
  bool writer_thread = true;
  // Where the loop's log lines go (the message without the component); empty: platform::log_line as
  // "agent". Called without the agent's locks held, from the collecting thread.
  std::function<void(const std::string&)> log;
};

// What one step_history() did, and when the next one is due.
struct HistoryStep {
  bool flushed = false;     // a pending batch was written (or tried)
  bool maintained = false;  // rollups and retention ran
  std::chrono::steady_clock::time_point next_due{};
};

// The renderings of one snapshot on this node, each made once, the first time someone asks for it, and
// then shared by every request, scrape and live client that serves the snapshot: the agent makes one
// per snapshot (Agent::renderings_of), whichever of its users comes first.
// Thread-safe: each rendering is made once (std::call_once) whatever the threads.
class Renderings {
 public:
  using Text = std::shared_ptr<const std::string>;
  Renderings(core::SnapshotPtr snapshot, std::string node) : snapshot_(std::move(snapshot)), node_(std::move(node)) {}

  const core::SnapshotPtr& snapshot() const noexcept { return snapshot_; }
  // GET /api/v1/monitoring/gpu-metrics: snapshot_json with the node's name (and GET /api/v1/gpus with
  // the reading's freshness added).
  const wire::ObjectText& document() const;
  // The GPU half of GET /metrics (write_prometheus_gpus); each scrape appends the agent's own series.
  const Text& prometheus_gpus() const;
  // The same two texts gzip-encoded, for clients that accept it: document() as a whole member, and the
  // start of a member for /metrics (wire::gzip_tail adds the agent's series and the trailer).
  const Text& document_gzip() const;
  const std::shared_ptr<const wire::GzipHead>& prometheus_gpus_gzip() const;
  // GET /api/v1/processes (before its freshness keys): processes_json with the node's name.
  const wire::ObjectText& processes() const;
  // The live messages: gpu_status (a client's greeting) and gpu_status_update, the document as data.
  const wire::LiveMessagePtr& status_message() const;
  const wire::LiveMessagePtr& update_message() const;

 private:
  template <class T>
  struct Once {
    std::once_flag flag;
    std::optional<T> value;
  };
  template <class T, class F>
  static const T& once(Once<T>& o, F make) {
    std::call_once(o.flag, [&] { o.value.emplace(make()); });
    return *o.value;
  }
  core::SnapshotPtr snapshot_;
  std::string node_;
  mutable Once<wire::ObjectText> document_, processes_;
  mutable Once<Text> prometheus_, document_gzip_;
  mutable Once<std::shared_ptr<const wire::GzipHead>> prometheus_gzip_;
  mutable Once<wire::LiveMessagePtr> status_, update_;
};

// What the loop published last: the snapshot, when it was taken, and its renderings.
struct Published {
  core::SnapshotPtr snapshot;
  std::shared_ptr<const Renderings> renderings;
  std::chrono::steady_clock::time_point taken{};
  std::uint64_t sequence = 0;
  // GET /api/v1/monitoring/gpu-metrics.
  const std::shared_ptr<const std::string>& document() const { return renderings->document().text(); }
};

struct AgentCounters {
  std::uint64_t collections = 0;
  std::uint64_t collection_errors = 0;
  std::chrono::nanoseconds last_query_duration{0};
  std::string last_error;  // of the latest collection; empty when it succeeded
  std::optional<std::chrono::steady_clock::time_point> last_success;
  // For people (/api/health): the wall time of the last good collection, and the latest failure with
  // its time — kept after later successes, unlike last_error.
  std::optional<std::chrono::system_clock::time_point> last_success_wall;
  std::string last_failure;
  std::optional<std::chrono::system_clock::time_point> last_failure_wall;
  std::uint64_t history_batches = 0;
  std::uint64_t history_errors = 0;
  std::string history_error;  // the latest store failure; empty when the last write succeeded
};

class Agent {
 public:
  // history (the writer) and history_reader (queries) may be null: no history kept. The monitor, the
  // hub and the clock outlive the agent.
  Agent(sampler::Monitor& monitor, sampler::SampleHub& hub, std::unique_ptr<core::MetricHistory> history,
        std::unique_ptr<core::MetricHistory> history_reader, AgentOptions options,
        const core::Clock& clock = platform::system_clock());
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Publishes the monitor's current snapshot at once, then starts the loop and the history writer.
  void start();
  // Stops the loop and writes what is pending. Idempotent.
  void stop();

  std::shared_ptr<const Published> latest() const;
  // A fresh driver query (published like a tick, but not fed to the alert engine or history).
  // Single flight: concurrent callers share the one query under way, and a result younger than
  // options.fresh_reuse is reused, so a flood of ?fresh=1 requests costs one query at a time.
  Result<std::shared_ptr<const Published>> fresh();
  // Renders the gpu-metrics document for a snapshot (the node name added), anew.
  std::shared_ptr<const std::string> render(const core::Snapshot& s) const;
  // The renderings of `s`: the published reading's when it is that snapshot, else the last ones made
  // (the WebSocket groups of the same tick share them), else new ones. Never null.
  std::shared_ptr<const Renderings> renderings_of(const core::SnapshotPtr& s);

  std::vector<core::Alert> firing() const;
  // Those firing now that match q (its GPU; started before its until). q.limit does not apply.
  std::vector<core::Alert> firing(const core::AlertQuery& q) const;
  // Recent alert episodes that match q, newest first, at most q.limit: from the store when there is one
  // (filtered by its query), else from memory.
  Result<std::vector<core::Alert>> recent_alerts(const core::AlertQuery& q);
  const std::vector<core::AlertRule>& alert_rules() const noexcept { return options_.alert_rules; }

  Result<std::vector<core::HistoryPoint>> history(unsigned gpu, core::Field field,
                                                  std::chrono::system_clock::time_point since,
                                                  std::chrono::system_clock::time_point until,
                                                  std::chrono::seconds step);
  bool has_history() const noexcept { return history_ != nullptr; }
  std::string history_path() const;

  AgentCounters counters() const;
  const AgentOptions& options() const noexcept { return options_; }

  // Alert events as they happen (after they are queued for the store).
  using AlertListener = std::function<void(const std::vector<core::AlertEvent>&)>;
  void on_alerts(AlertListener l);

  // One collection, as the hub delivers it: publishes the snapshot, runs the alert engine at `taken`,
  // queues the sample and events for the history; counts a failed or throwing collection. Never throws.
  void tick(const Result<core::SnapshotPtr>& snap, std::chrono::steady_clock::time_point taken);
  // The history writer's round at `now`: writes the pending batch when history_flush has passed since
  // the last write (or none was written yet) and runs maintenance (at the clock's wall time) when
  // history_maintain has passed. Without history it does nothing. One caller at a time: the writer
  // thread, or the owner when writer_thread is false.
  HistoryStep step_history(std::chrono::steady_clock::time_point now);

 private:
  void collect(const Result<core::SnapshotPtr>& snap, std::chrono::steady_clock::time_point taken);
  void collection_failed(const std::string& message, std::chrono::steady_clock::time_point at);
  void log(const std::string& message) const;
  void publish(core::SnapshotPtr snap, std::chrono::steady_clock::time_point taken);
  void writer(std::stop_token stop);
  bool flush();

  sampler::Monitor& monitor_;
  sampler::SampleHub& hub_;
  std::unique_ptr<core::MetricHistory> history_;         // written by step_history()'s caller only
  std::unique_ptr<core::MetricHistory> history_reader_;  // queries (WAL: they do not wait for writes)
  AgentOptions options_;
  const core::Clock& clock_;

  mutable std::mutex mu_;  // guards everything below
  std::shared_ptr<const Published> latest_;
  std::shared_ptr<const Renderings> last_made_;  // the renderings renderings_of() made last
  std::uint64_t sequence_ = 0;
  core::AlertEngine engine_;
  std::vector<core::Alert> recent_;  // newest last; bounded by options_.alert_history
  AgentCounters counters_;
  // The failure episode under way (failures_ == 0: none): when it began, the latest failure's cause,
  // and whether the one line for a changed cause has been logged.
  std::uint64_t failures_ = 0;
  std::chrono::steady_clock::time_point failing_since_{};
  std::string failing_cause_;
  bool cause_change_logged_ = false;
  std::vector<core::SnapshotPtr> pending_samples_;
  std::vector<core::AlertEvent> pending_alerts_;
  std::vector<AlertListener> alert_listeners_;

  Result<std::shared_ptr<const Published>> query_fresh();

  std::mutex fresh_mu_;  // guards the fresh_ members
  std::condition_variable fresh_cv_;
  bool fresh_running_ = false;
  std::uint64_t fresh_generation_ = 0;  // counts finished fresh queries
  std::optional<Result<std::shared_ptr<const Published>>> fresh_last_;
  std::chrono::steady_clock::time_point fresh_done_at_{};

  std::mutex reader_mu_;
  std::mutex step_mu_;  // guards the two below (step_history and the final flush)
  std::optional<std::chrono::steady_clock::time_point> next_flush_, next_maintain_;
  std::condition_variable_any writer_cv_;
  sampler::SampleHub::Subscription sub_;
  std::jthread writer_;
  std::atomic<bool> started_{false}, stopped_{false};
};

}  // namespace gf::node
