#pragma once
// NodeAllocator: who gets which GPUs of this node, and when. Decisions are made inside the lease
// store's write lock, on the leases the store holds then, so two allocations that race (threads or
// processes) never get the same GPU. The reading a decision is made on is passed in, as the clock is:
// the CLI (no agent) brings a new driver query taken just before, the node's arbiter its agent's
// recent published reading. Waiters are served first-come first-served within a priority; a release anywhere
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

// A new driver query (the CLI's, each time a waiting allocation tries again).
using ReadingQuery = std::function<Result<core::SnapshotPtr>()>;

// The need, and what the lease records. With need.mig_profile the lease's one LeasedGpu is the
// parent's index with the instance's "MIG-…" UUID.
struct AllocationRequest {
  core::GpuNeed need;
  std::string job_id;
  std::string name;
  int priority = 0;
  core::LeaseOwner owner;
  core::LeaseTie tie = core::LeaseTie::None;  // recorded with the lease
};

// "GPU 0,1 held by train (lease 3f2a…, pid 4242, alice (uid 1001)); GPU 2 held by …": who holds the
// GPUs, in the one wording both the CLI and the agent use after "holders: " (no uid for a lease written
// without the agent). Empty for no leases.
std::string holders_text(const std::vector<core::Lease>& active);

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
  // The store and the clock outlive the allocator. topology: the node's (empty when unknown).
  NodeAllocator(core::LeaseStore& store, core::Topology topology, const core::Clock& clock = platform::system_clock())
      : store_(store), topology_(std::move(topology)), scores_(topology_), clock_(clock) {}

  // One attempt now on `reading`, not queued: the lease, or an error saying for each GPU why it was
  // refused ("cannot read the GPUs: …" when `reading` is an error). The error's kind tells "not enough
  // GPUs now" (Unavailable) from a failure of the store (Failed).
  Result<Allocation> allocate(const AllocationRequest& req, const Result<core::SnapshotPtr>& reading);
  // Queues the request and waits up to opts.timeout, asking `query` for a new reading at each try. The
  // error of a timeout starts with "Insufficient GPUs after waiting" (or "Cancelled after waiting") and
  // is Unavailable; a failed query is retried until the deadline; a store failure ends the wait at once
  // (Failed).
  Result<Allocation> wait_and_allocate(const AllocationRequest& req, const ReadingQuery& query,
                                       const WaitOptions& opts);

  // What one decision found: the allocation, or why not now, with the leases held and the waiters
  // ahead as the store saw them inside its lock.
  struct Attempt {
    std::optional<Allocation> granted;
    std::string why_not;  // set when granted is empty
    std::vector<core::Lease> holders;
    std::size_t ahead = 0;
  };
  // One decision inside the store's write lock, on `reading` (an error there — a failed driver query —
  // is "not now", its message the why_not). The error is a failure of the store (the GPUs not being
  // available now is an Attempt without a grant). waiter_id names the caller's row in the store's
  // queue (empty: not queued; the node's arbiter keeps its own queue and calls this for the waiter it
  // serves).
  Result<Attempt> attempt(const AllocationRequest& req, const std::string& waiter_id,
                          const Result<core::SnapshotPtr>& reading);

 private:
  core::LeaseStore& store_;
  core::Topology topology_;
  allocator::LinkScores scores_;  // topology_'s pair scores, made once (topology_ never changes)
  const core::Clock& clock_;
};

}  // namespace gf::scheduler
