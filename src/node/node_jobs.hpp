#pragma once
// NodeJobs: the node's job service — a job store (leases, the wait queue, job records) and an allocator
// over it, behind one lock, because a store connection is single-threaded. Allocation decides on a
// fresh driver query, like the CLI's `alloc`. It knows the store through the JobStore port only.
// Thread-safe.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/ports/clock.hpp"
#include "core/ports/job_store.hpp"
#include "platform/clock.hpp"
#include "sampler/monitor.hpp"
#include "scheduler/node_allocator.hpp"

namespace gf::node {

class NodeJobs {
 public:
  // The monitor and the clock outlive this object.
  NodeJobs(std::unique_ptr<core::JobStore> store, sampler::Monitor& monitor,
           const core::Clock& clock = platform::system_clock());
  // Runs f(store, allocator) under the lock and returns what it returns.
  template <class F>
  auto with(F&& f) {
    std::lock_guard lock(mu_);
    return f(*store_, *allocator_);
  }
  const std::string& path() const { return store_->path(); }

  struct Counts {
    std::size_t active_leases = 0;
    std::size_t waiting = 0;
    std::size_t jobs_running = 0;
    std::uint64_t jobs_finished = 0;
  };
  // Counted at most once a second (on the clock); never waits for a store another request holds (the
  // last counts are returned then). nullopt when they could never be read.
  std::optional<Counts> counts();

 private:
  const core::Clock& clock_;
  std::mutex mu_;
  std::optional<Counts> cached_;
  std::chrono::steady_clock::time_point counted_at_{};
  std::unique_ptr<core::JobStore> store_;
  std::unique_ptr<scheduler::NodeAllocator> allocator_;
};

}  // namespace gf::node
