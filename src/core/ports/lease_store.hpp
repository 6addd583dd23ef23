#pragma once
// LeaseStore port: where GPU leases and the wait queue live, shared by every gpufleet process of a
// node. The scheduler decides; the store makes the decision atomic. Implemented by store/ (SQLite).
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/result.hpp"

namespace gf::core {

struct LeaseOwner {
  std::uint32_t pid = 0;
  unsigned long long start_time = 0;  // clock ticks since boot (from /proc/<pid>/stat): tells reused pids apart
  std::string user;
  // The Unix uid that owns the lease, job or queue entry (from the agent's peer credentials). Rows
  // written by binaries older than the arbiter have none.
  std::optional<std::uint32_t> uid = std::nullopt;
};

// What keeps a lease alive when the node's arbiter granted it: the client's connection (ends when it
// closes) or a process (ends when that process ends). None: written directly to the store (no agent).
enum class LeaseTie { None, Connection, Process };
// "", "connection", "process" (the store's and the protocol's words).
inline const char* tie_name(LeaseTie t) {
  return t == LeaseTie::Connection ? "connection" : t == LeaseTie::Process ? "process" : "";
}
inline LeaseTie tie_from_name(const std::string& s) {
  return s == "connection" ? LeaseTie::Connection : s == "process" ? LeaseTie::Process : LeaseTie::None;
}

struct LeasedGpu {
  unsigned index = 0;
  std::string uuid;
};

struct Lease {
  std::string id;
  std::string job_id;
  std::string name;
  std::vector<LeasedGpu> gpus;
  LeaseOwner owner;
  std::int64_t created_at_ms = 0;  // Unix epoch milliseconds
  std::optional<std::int64_t> released_at_ms;
  std::string release_reason;  // "released", "job ended", "owner gone", …
  LeaseTie tie = LeaseTie::None;
};

struct Waiter {
  std::string id;
  std::string name;
  int priority = 0;  // higher first
  std::int64_t enqueued_at_ms = 0;
  unsigned gpus = 0;
  LeaseOwner owner;
};

struct LeaseRequest {
  std::string job_id;
  std::string name;
  LeaseOwner owner;
  std::string waiter_id;  // empty: not queued (take the GPUs now or not at all)
  LeaseTie tie = LeaseTie::None;
};

// Implementations need not be thread-safe: one LeaseStore (connection) per thread.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  // The decider sees the active leases and the live waiters queued ahead of request.waiter_id (at
  // least the first of them, when there are any), and returns the GPUs to lease (nullopt: not now).
  // Runs inside the store's write lock.
  using Decide = std::function<Result<std::optional<std::vector<LeasedGpu>>>(const std::vector<Lease>& active,
                                                                             const std::vector<Waiter>& ahead)>;
  // Atomically against every process sharing the store: ends leases whose owner is gone, calls
  // decide, records the lease it picks (and dequeues the waiter). nullopt when decide said "not now".
  virtual Result<std::optional<Lease>> acquire(const LeaseRequest& request, const Decide& decide) = 0;
  // Ends a lease; false when there was no active lease with that id.
  virtual Result<bool> release(const std::string& lease_id, const std::string& reason) = 0;
  // Active leases (dead owners' leases ended first).
  virtual Result<std::vector<Lease>> active() = 0;
  // How many GPUs uid's active leases hold (the per-user quota's count). An implementation may count
  // from what it already knows, without ending dead owners' leases first: one whose owner just died may
  // still count until the next sweep (acquire's, or active()'s). This default counts active()'s list.
  virtual Result<unsigned> gpus_held_by(std::uint32_t uid) {
    auto leases = active();
    if (!leases) return leases.error();
    unsigned n = 0;
    for (const auto& l : *leases)
      if (l.owner.uid && *l.owner.uid == uid) n += static_cast<unsigned>(l.gpus.size());
    return n;
  }
  virtual Result<std::vector<Waiter>> waiters() = 0;
  virtual Result<void> enqueue(const Waiter& w) = 0;
  virtual Result<void> dequeue(const std::string& waiter_id) = 0;
  // Blocks until some process releases a lease or dequeues, or until the timeout; true when woken.
  virtual bool wait_for_change(std::chrono::milliseconds timeout) = 0;
};

}  // namespace gf::core
