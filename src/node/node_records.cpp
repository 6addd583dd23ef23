#include "node/node_records.hpp"

namespace gf::node {

NodeRecords::NodeRecords(std::unique_ptr<core::JobStore> store, const core::Clock& clock)
    : clock_(clock), store_(std::move(store)) {}

Result<std::vector<core::Lease>> NodeRecords::active() {
  std::lock_guard lock(mu_);
  return store_->active();
}

Result<std::vector<core::Lease>> NodeRecords::history(std::size_t limit) {
  std::lock_guard lock(mu_);
  return store_->history(limit);
}

Result<std::vector<core::Lease>> NodeRecords::ended_since(std::int64_t since_ms, std::size_t limit) {
  std::lock_guard lock(mu_);
  return store_->ended_since(since_ms, limit);
}

Result<core::JobPage> NodeRecords::jobs_page(const core::JobQuery& q) {
  std::lock_guard lock(mu_);
  return store_->jobs_page(q);
}

Result<core::TaskPage> NodeRecords::task_totals(const core::JobQuery& q) {
  std::lock_guard lock(mu_);
  return store_->task_totals(q);
}

Result<std::optional<core::Job>> NodeRecords::job(const std::string& id) {
  std::lock_guard lock(mu_);
  return store_->job(id);
}

std::optional<NodeRecords::Counts> NodeRecords::counts() {
  using namespace std::chrono;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {  // a read holds the connection: the last counts will do
    std::lock_guard cached(cached_mu_);
    return cached_;
  }
  const auto now = clock_.now();
  if (cached_ && now - counted_at_ < seconds(1)) return cached_;
  auto active = store_->active();
  auto waiting = store_->waiters();
  auto exps = store_->job_counts();
  if (!active || !waiting || !exps) return cached_;
  Counts c;
  c.active_leases = active->size();
  c.waiting = waiting->size();
  for (const auto& [status, n] : *exps) {
    if (status == "running")
      c.jobs_running += n;
    else if (status != "waiting")
      c.jobs_finished += n;
  }
  {
    std::lock_guard cached(cached_mu_);
    cached_ = c;
  }
  counted_at_ = now;
  return c;
}

}  // namespace gf::node
