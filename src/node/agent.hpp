#pragma once
// Agent: the node agent's one collection loop. Every interval it takes one snapshot through the
// SampleHub and hands it to the cache (latest()), the alert engine, the history writer and the
// listeners (WebSocket feeds). Requests read what the loop published; they never query the driver
// unless they ask for a fresh reading.
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
#include "core/snapshot.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "store/history.hpp"

namespace gf::server {

struct AgentOptions {
  std::chrono::milliseconds interval{1000};
  std::string node_name;
  std::vector<core::AlertRule> alert_rules = core::default_alert_rules();
  std::chrono::milliseconds history_flush{2000};     // a batch is written at most this often
  std::chrono::milliseconds history_maintain{60000};  // rollups and retention
  std::size_t alert_history = 200;                     // firing/resolved episodes kept in memory
};

// What the loop published last: the snapshot and its gpu-metrics document, rendered once.
struct Published {
  core::SnapshotPtr snapshot;
  std::shared_ptr<const std::string> document;  // GET /api/v1/monitoring/gpu-metrics
  std::chrono::steady_clock::time_point taken{};
  std::uint64_t sequence = 0;
};

struct AgentCounters {
  std::uint64_t collections = 0;
  std::uint64_t collection_errors = 0;
  std::chrono::nanoseconds last_query_duration{0};
  std::string last_error;  // of the latest collection; empty when it succeeded
  std::optional<std::chrono::steady_clock::time_point> last_success;
  std::uint64_t history_batches = 0;
  std::uint64_t history_errors = 0;
  std::string history_error;  // the latest store failure; empty when the last write succeeded
};

class Agent {
 public:
  // history may be null (no history kept). The monitor and hub outlive the agent.
  Agent(sampler::Monitor& monitor, sampler::SampleHub& hub, std::unique_ptr<store::HistoryStore> history,
        std::unique_ptr<store::HistoryStore> history_reader, AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Publishes the monitor's current snapshot at once, then starts the loop and the history writer.
  void start();
  // Stops the loop and writes what is pending. Idempotent.
  void stop();

  std::shared_ptr<const Published> latest() const;
  // A fresh driver query (published like a tick, but not fed to the alert engine or history).
  Result<std::shared_ptr<const Published>> fresh();
  // Renders the gpu-metrics document for a snapshot (the node name added).
  std::shared_ptr<const std::string> render(const core::Snapshot& s) const;

  std::vector<core::Alert> firing() const;
  // Recent alert episodes, newest first: from the store when there is one, else from memory.
  Result<std::vector<core::Alert>> recent_alerts(std::size_t limit);
  const std::vector<core::AlertRule>& alert_rules() const noexcept { return options_.alert_rules; }

  Result<std::vector<store::HistoryPoint>> history(unsigned gpu, store::Metric metric,
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

 private:
  void on_tick(const Result<core::SnapshotPtr>& snap, std::chrono::steady_clock::time_point taken);
  void publish(core::SnapshotPtr snap, std::chrono::steady_clock::time_point taken);
  void writer(std::stop_token stop);
  void flush();

  sampler::Monitor& monitor_;
  sampler::SampleHub& hub_;
  std::unique_ptr<store::HistoryStore> history_;         // written by the writer thread only
  std::unique_ptr<store::HistoryStore> history_reader_;  // queries (WAL: they do not wait for writes)
  AgentOptions options_;

  mutable std::mutex mu_;  // guards everything below
  std::shared_ptr<const Published> latest_;
  std::uint64_t sequence_ = 0;
  core::AlertEngine engine_;
  std::vector<core::Alert> recent_;  // newest last; bounded by options_.alert_history
  AgentCounters counters_;
  std::vector<core::SnapshotPtr> pending_samples_;
  std::vector<core::AlertEvent> pending_alerts_;
  std::vector<AlertListener> alert_listeners_;

  std::mutex reader_mu_;
  std::condition_variable_any writer_cv_;
  sampler::SampleHub::Subscription sub_;
  std::jthread writer_;
  std::atomic<bool> started_{false}, stopped_{false};
};

}  // namespace gf::server
