#pragma once
// NodeAllocator: who gets which GPUs of this node, and when. Decisions are made inside the lease
// store's write lock on a fresh snapshot, so two allocations that race (threads or processes) never
// get the same GPU. Waiters are served first-come first-served within a priority; a release anywhere
// on the node wakes them at once, and load from outside gpufleet is re-checked on a short interval.
// Time (queue times, waited, deadlines) comes from a core::Clock; the waiting itself blocks in the
// store's wait_for_change.
// Thread-safety: one NodeAllocator per thread (the store it uses is single-threaded).
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "allocator/select.hpp"
#include "core/ports/clock.hpp"
#include "core/ports/lease_store.hpp"
#include "core/snapshot.hpp"
#include "core/topology.hpp"
#include "platform/clock.hpp"

namespace gf::scheduler {

struct SnapshotSource {
  // The reading a decision is made on: a new driver query for the CLI; the agent's recent published
  // reading for the node's arbiter (node/arbiter.hpp).
  std::function<Result<core::SnapshotPtr>()> fresh;
  core::Topology topology;
};

struct AllocationRequest {
  unsigned gpus = 1;
  std::uint64_t min_memory_mib = core::kDefaultMinFreeMemoryMib;
  unsigned max_utilization_pct = core::kDefaultMaxUtilizationPct;
  bool refuse_busy = true;  // refuse GPUs running processes gpufleet did not start
  std::string job_id;
  std::string name;
  int priority = 0;
  core::LeaseOwner owner;
  core::LeaseTie tie = core::LeaseTie::None;  // recorded with the lease
  // Not empty: lease one free MIG instance of this profile ("1g.10gb") instead of whole GPUs (gpus is
  // then 1). The lease's one LeasedGpu is the parent's index with the instance's "MIG-…" UUID.
  std::string mig_profile;
};

struct Allocation {
  core::Lease lease;
  allocator::Selection selection;
  core::SnapshotPtr snapshot;  // the reading the decision was made on
};

struct WaitProgress {
  std::chrono::milliseconds waited{0};
  std::string why_not;               // why the GPUs are not available yet
  std::vector<core::Lease> holders;  // active leases (who holds the GPUs)
  std::size_t ahead = 0;             // 1 when a live waiter is ahead of us (it blocks us), else 0
};

struct WaitOptions {
  std::chrono::milliseconds timeout{300000};
  std::chrono::milliseconds recheck{2000};  // re-check of load from outside gpufleet
  std::function<void(const WaitProgress&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

class NodeAllocator {
 public:
  // The store and the clock outlive the allocator.
  NodeAllocator(core::LeaseStore& store, SnapshotSource source, const core::Clock& clock = platform::system_clock())
      : store_(store), source_(std::move(source)), clock_(clock) {}

  // One attempt now, not queued: the lease, or an error saying for each GPU why it was refused.
  // The error's kind tells "not enough GPUs" (Unavailable) from a failure of the store or the driver
  // (Failed).
  Result<Allocation> allocate(const AllocationRequest& req);
  // Queues the request and waits up to opts.timeout. The error of a timeout starts with
  // "Insufficient GPUs after waiting" (or "Cancelled after waiting") and is Unavailable; a failed
  // driver query is retried until the deadline; a store failure ends the wait at once (Failed).
  Result<Allocation> wait_and_allocate(const AllocationRequest& req, const WaitOptions& opts);

  // What one decision found: the allocation, or why not now, with the leases held and the waiters
  // ahead as the store saw them inside its lock.
  struct Attempt {
    std::optional<Allocation> granted;
    std::string why_not;  // set when granted is empty
    std::vector<core::Lease> holders;
    std::size_t ahead = 0;
  };
  // One decision inside the store's write lock. The error is a failure of the store (the GPUs not
  // being available now is an Attempt without a grant). waiter_id names the caller's row in the
  // store's queue (empty: not queued; the node's arbiter keeps its own queue and calls this for the
  // waiter it serves).
  Result<Attempt> attempt(const AllocationRequest& req, const std::string& waiter_id);

 private:
  core::LeaseStore& store_;
  SnapshotSource source_;
  const core::Clock& clock_;
};

}  // namespace gf::scheduler
