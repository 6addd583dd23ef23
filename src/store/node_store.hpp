#pragma once
// The node's SQLite store (one file, WAL): GPU leases, the wait queue and the record of job runs.
// Every gpufleet process of the node opens the same file; SQLite's write lock makes each
// acquire/release atomic across them. Not thread-safe: one NodeStore per thread.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ports/lease_store.hpp"
#include "platform/change_signal.hpp"
#include "store/sqlite.hpp"

namespace gf::store {

// The default store path: $GPUFLEET_DB, else /var/lib/gpufleet/gpufleet.db for root, else
// $XDG_STATE_HOME/gpufleet/gpufleet.db (~/.local/state/gpufleet/gpufleet.db).
std::string default_db_path();

// A short random id (12 hex digits), like Docker's short ids.
std::string new_id();

std::int64_t now_ms();

struct Experiment {
  std::string id;
  std::string name;
  std::string status;   // "waiting", "running", "succeeded", "failed", "no_gpus", "interrupted"
  std::string command;  // JSON array text
  std::optional<int> exit_code;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> ended_at_ms;
  std::string lease_id;
  std::string record;   // the whole record as JSON text (gpu_info, metrics, …)
  core::LeaseOwner owner;  // the gpufleet process running it: a dead owner turns waiting/running into "lost"
};

class NodeStore final : public core::LeaseStore {
 public:
  // alive: is this lease owner still running? (default: same pid with the same start time in /proc)
  using Alive = std::function<bool(const core::LeaseOwner&)>;
  static Result<std::unique_ptr<NodeStore>> open(const std::string& path, Alive alive = {});

  Result<std::optional<core::Lease>> acquire(const core::LeaseRequest& request, const Decide& decide) override;
  Result<bool> release(const std::string& lease_id, const std::string& reason) override;
  Result<std::vector<core::Lease>> active() override;
  Result<std::vector<core::Waiter>> waiters() override;
  Result<void> enqueue(const core::Waiter& w) override;
  Result<void> dequeue(const std::string& waiter_id) override;
  bool wait_for_change(std::chrono::milliseconds timeout) override;

  // Leases ended or not, newest first.
  Result<std::vector<core::Lease>> history(std::size_t limit);

  Result<void> put_experiment(const Experiment& e);  // insert or replace
  Result<std::optional<Experiment>> experiment(const std::string& id);
  Result<std::vector<Experiment>> experiments(std::size_t limit);
  // How many experiments are in each status ("running", "succeeded", …).
  Result<std::map<std::string, std::uint64_t>> experiment_counts();

  const std::string& path() const noexcept { return db_.path(); }

 private:
  NodeStore(Db db, Alive alive);
  Result<void> reap_locked(bool& changed);  // ends leases and waiters of dead owners
  Result<std::vector<core::Lease>> load_leases(const char* where_sql, std::size_t limit);
  Result<std::vector<core::Waiter>> load_waiters();
  // Marks waiting/running experiments whose owner process is gone as "lost".
  Result<void> reconcile_experiments();
  // The first live waiter queued ahead of waiter_id (empty: none); dead ones met on the way are removed.
  Result<std::vector<core::Waiter>> live_waiters_ahead(const std::string& waiter_id, bool& changed);

  Db db_;
  Alive alive_;
  platform::ChangeSignal signal_;
};

}  // namespace gf::store
