#include "node/node_jobs.hpp"

namespace gf::node {

NodeJobs::NodeJobs(std::unique_ptr<core::JobStore> store, sampler::Monitor& monitor, const core::Clock& clock)
    : clock_(clock), store_(std::move(store)) {
  scheduler::SnapshotSource src;
  src.fresh = [&monitor] { return monitor.snapshot(false); };
  if (auto t = monitor.topology(); t) src.topology = std::move(*t);
  allocator_ = std::make_unique<scheduler::NodeAllocator>(*store_, std::move(src), clock_);
}

std::optional<NodeJobs::Counts> NodeJobs::counts() {
  using namespace std::chrono;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return cached_;  // an allocation holds the store: the last counts will do
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
  cached_ = c;
  counted_at_ = now;
  return cached_;
}

}  // namespace gf::node
