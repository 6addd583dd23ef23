#pragma once
// The node's SQLite store (one file, WAL): GPU leases, the wait queue and the record of jobs.
// Every gpufleet process of the node opens the same file; SQLite's write lock makes each
// acquire/release atomic across them. Not thread-safe: one NodeStore per thread.
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/job.hpp"
#include "core/ports/clock.hpp"
#include "core/ports/job_store.hpp"
#include "core/ports/lease_store.hpp"
#include "platform/change_signal.hpp"
#include "platform/clock.hpp"
#include "store/sqlite.hpp"

namespace gf::store {

// The default store path: $GPUFLEET_DB, else /var/lib/gpufleet/gpufleet.db for root, else
// $XDG_STATE_HOME/gpufleet/gpufleet.db (~/.local/state/gpufleet/gpufleet.db).
std::string default_db_path();

// A short random id (12 hex digits), like Docker's short ids.
std::string new_id();

// Now on the real clock, in Unix epoch milliseconds (for records written outside a NodeStore).
std::int64_t now_ms();

using Job = core::Job;

class NodeStore final : public core::JobStore {
 public:
  // alive: is this lease owner still running? (default: same pid with the same start time in /proc)
  using Alive = std::function<bool(const core::LeaseOwner&)>;
  // Lease, queue and job times are read from clock (its wall time).
  static Result<std::unique_ptr<NodeStore>> open(const std::string& path, Alive alive = {},
                                                 const core::Clock& clock = platform::system_clock());

  // The dead-owner sweep runs here at most once a second on the way to a grant, and before a "not now"
  // unless one ran in the last 100 ms (then the decider is asked again); active() sweeps on every call.
  // A decision that does not commit (an error, a decider that throws) makes the sweep due again.
  Result<std::optional<core::Lease>> acquire(const core::LeaseRequest& request, const Decide& decide) override;
  Result<bool> release(const std::string& lease_id, const std::string& reason) override;
  Result<std::vector<core::Lease>> active() override;
  // From the kept list of active leases (read again only when another connection wrote): no sweep, no copy.
  Result<unsigned> gpus_held_by(std::uint32_t uid) override;
  Result<std::vector<core::Waiter>> waiters() override;
  Result<void> enqueue(const core::Waiter& w) override;
  Result<void> dequeue(const std::string& waiter_id) override;
  bool wait_for_change(std::chrono::milliseconds timeout) override;

  // Leases ended or not, newest first.
  Result<std::vector<core::Lease>> history(std::size_t limit) override;
  Result<std::vector<core::Lease>> ended_since(std::int64_t since_ms, std::size_t limit) override;

  // Jobs (recorded runs). They live in the table "experiments", its name since the first schema:
  // every gpufleet process of the node shares this file, and an older binary still running beside a
  // newer one must keep finding its rows.
  Result<void> put_job(const Job& j) override;  // insert or replace
  Result<std::optional<Job>> job(const std::string& id) override;
  Result<std::vector<Job>> jobs(std::size_t limit) override;  // newest first
  Result<core::JobPage> jobs_page(const core::JobQuery& q) override;
  Result<core::TaskPage> task_totals(const core::JobQuery& q) override;
  // How many jobs are in each status ("running", "succeeded", …).
  Result<std::map<std::string, std::uint64_t>> job_counts() override;
  // Bounds on the record (core/ports/job_store.hpp): ages by the row's written_ms, this store's clock.
  Result<std::uint64_t> count_jobs(std::uint32_t uid) override;
  Result<std::size_t> prune_oldest_finished(std::uint32_t uid, std::size_t n) override;
  Result<std::size_t> prune_finished_older_than(std::chrono::milliseconds age) override;

  const std::string& path() const noexcept override { return db_.path(); }
  // Tests only: called between the two reads of a lease listing (the leases, then their GPUs), where
  // another connection's write must not be seen.
  void set_between_lease_reads_for_test(std::function<void()> f) { between_lease_reads_ = std::move(f); }
  // Now on the store's clock, in Unix epoch milliseconds.
  std::int64_t now_ms() const;

 private:
  NodeStore(Db db, Alive alive, const core::Clock& clock);
  // Ends the leases of dead owners; true when it ended any (the store changed).
  Result<bool> reap_locked();
  // Active, every lease, or those ended at or after since_ms; newest first, at most limit.
  enum class LeaseSet { Active, All, EndedSince };
  Result<std::vector<core::Lease>> load_leases(LeaseSet which, std::size_t limit, std::int64_t since_ms = 0);
  Result<std::vector<core::Waiter>> load_waiters();
  // Marks waiting/running jobs whose owner process is gone as "lost".
  Result<void> reconcile_jobs();
  // The one dead-owner sweep under reap_locked and reconcile_jobs: each row `select_sql` finds (id,
  // owner_pid, owner_start) whose owner process is gone gets every statement of `updates` run with
  // ?1 = now and ?2 = its id. A row with owner_pid 0 (no process recorded) is judged like any other
  // with PidZero::Judge, and left alone with PidZero::Spare. Returns how many rows it swept.
  enum class PidZero : bool { Judge, Spare };
  Result<std::size_t> sweep_dead_owners(const char* select_sql, std::initializer_list<const char*> updates,
                                        PidZero pid_zero);
  // The first live waiter queued ahead of waiter_id (empty: none); dead ones met on the way are removed
  // (removed_dead: the store changed).
  struct Ahead {
    std::vector<core::Waiter> waiters;
    bool removed_dead = false;
  };
  Result<Ahead> live_waiters_ahead(const std::string& waiter_id);

  Db db_;
  Alive alive_;
  const core::Clock& clock_;
  platform::ChangeSignal signal_;
  // The active leases as this connection last read or wrote them, valid while active_version_ is the
  // file's PRAGMA data_version (no other connection committed since). Read inside the write lock for a
  // decision, outside it by gpus_held_by (a version read before the list it loads only reloads sooner);
  // this connection's writes change it after their commit, and a rolled-back sweep drops it.
  Result<const std::vector<core::Lease>*> active_locked();
  Result<std::int64_t> data_version();  // PRAGMA data_version (-1 when it gives no row)
  // active()'s way round the write transaction: the kept list is the file's (data_version unchanged)
  // and none of its owners is gone, so a sweep would change nothing.
  bool kept_list_current_and_owners_alive();
  std::optional<std::vector<core::Lease>> active_cache_;
  std::int64_t active_version_ = -1;
  // acquire()'s dead-owner sweep: due again at next_sweep_ (store clock), or before a "not now" when the
  // last one (last_sweep_) is more than kSweepGap old.
  static constexpr std::chrono::milliseconds kSweepEvery{1000};
  static constexpr std::chrono::milliseconds kSweepGap{100};
  std::chrono::steady_clock::time_point next_sweep_{}, last_sweep_{};
  std::function<void()> between_lease_reads_;
};

}  // namespace gf::store
