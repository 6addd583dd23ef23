#pragma once
// NodeRecords: the read-only view of the node store that the agent's REST routes read — leases (active
// and ended), job records (a page, one job, task totals) and the counts /metrics shows. It decides and
// changes nothing: every lease, queue and job-record change goes through the node's one writer,
// node::Arbiter. It reads through a connection of its own (SQLite's WAL lets reads run beside the
// arbiter's writes), so a listing never waits for an allocation. It knows the store through the
// JobStore port only. Thread-safe (one lock; a store connection is single-threaded).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/job.hpp"
#include "core/ports/clock.hpp"
#include "core/ports/job_store.hpp"
#include "platform/clock.hpp"

namespace gf::node {

class NodeRecords {
 public:
  // The clock outlives this object.
  explicit NodeRecords(std::unique_ptr<core::JobStore> store, const core::Clock& clock = platform::system_clock());

  const std::string& path() const { return store_->path(); }
  Result<std::vector<core::Lease>> active();
  Result<std::vector<core::Lease>> history(std::size_t limit);  // newest first, ended ones included
  // Released at or after since_ms, newest first (JobStore::ended_since).
  Result<std::vector<core::Lease>> ended_since(std::int64_t since_ms, std::size_t limit);
  Result<core::JobPage> jobs_page(const core::JobQuery& q);
  Result<core::TaskPage> task_totals(const core::JobQuery& q);
  Result<std::optional<core::Job>> job(const std::string& id);

  struct Counts {
    std::size_t active_leases = 0;
    std::size_t waiting = 0;  // the store's queue (the CLI's without an agent)
    std::size_t jobs_running = 0;
    std::uint64_t jobs_finished = 0;
  };
  // Counted at most once a second (on the clock); never waits for a read another request holds (the
  // last counts are returned then). nullopt when they could never be read.
  std::optional<Counts> counts();

 private:
  const core::Clock& clock_;
  std::mutex mu_;
  std::mutex cached_mu_;  // cached_ is written under both locks, read under either
  std::optional<Counts> cached_;
  std::chrono::steady_clock::time_point counted_at_{};
  std::unique_ptr<core::JobStore> store_;
};

}  // namespace gf::node
