#pragma once
// Monitor: the node's view of its GPUs. Owns the backend, caches the last snapshot for a TTL, resolves
// processes (name, user, command, container) from /proc, and scores availability.
// Thread-safe: every public member may be called from any thread; backend queries are serialised.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.hpp"
#include "core/ports/clock.hpp"
#include "core/score.hpp"
#include "platform/procfs.hpp"
#include "sampler/health_clears.hpp"

namespace gf::sampler {

struct MonitorOptions {
  std::chrono::milliseconds cache_ttl{5000};
  core::ScoreWeights weights{};
  std::string proc_root = "/proc";
  // GPU processes whose /proc directory the monitor holds open (a file descriptor each) to tell, with one
  // lookup per collection, that the process it resolved is still the one with that pid; past it, their
  // start time is read instead.
  std::size_t max_held_processes = 512;
  // Shown in the snapshot when there is no backend (why none could be opened).
  std::vector<std::string> no_backend_reasons;
};

class Monitor {
 public:
  // backend may be null: the monitor then serves empty snapshots (backend "none") that say why.
  Monitor(std::unique_ptr<backends::Backend> backend, const core::Clock& clock, MonitorOptions opts = {});

  // The latest snapshot: from the cache when younger than the TTL and use_cache, else a fresh query.
  // An error only when the backend failed; the cache keeps the last good snapshot.
  Result<core::SnapshotPtr> snapshot(bool use_cache = true);
  // A fresh query in which the backend reads every counter afresh (Backend::fresh_counters): the
  // energy counter exact at this moment. Cached like any query.
  Result<core::SnapshotPtr> snapshot_with_fresh_counters();
  // Takes a reading made elsewhere (auto-detection's probe) as the current snapshot, processed
  // (processes resolved, scored) and cached as if just queried.
  void prime(core::Snapshot raw);
  // One GPU's reading, or nullopt when there is no such index.
  Result<std::optional<core::GpuReading>> gpu(unsigned index, bool use_cache = true);

  // Clears the XIDs recorded so far on one GPU (`which`: its index or UUID), as `dcgmi health --clear`
  // does: this reading and every later one no longer list them (sampler/health_clears.hpp). Takes a
  // fresh reading first (blocking). nullopt: no such GPU.
  struct XidsCleared {
    core::GpuReading before;  // the fresh reading, earlier clears applied
    core::GpuReading after;   // the same with this clear applied
    HealthClears::Cleared cleared;
  };
  Result<std::optional<XidsCleared>> clear_xids(std::string_view which, std::chrono::system_clock::time_point at);

  // How the GPUs are connected (empty Topology when there is no backend or it cannot tell).
  Result<core::Topology> topology();
  std::string backend_name() const;
  bool has_backend() const noexcept { return backend_ != nullptr; }

 private:
  Result<core::SnapshotPtr> refresh_locked();
  core::SnapshotPtr finish_locked(core::Snapshot s);  // resolve, attribute, score, cache
  void resolve_processes(core::Snapshot& s);

  std::unique_ptr<backends::Backend> backend_;
  const core::Clock& clock_;
  MonitorOptions opts_;
  platform::ProcReader proc_;
  bool in_child_pid_ns_ = false;  // read once: a process does not change pid namespace
  // query_mu_ serialises the backend and guards proc_cache_; cache_mu_ guards only the cached snapshot,
  // so a reader the cache can serve never waits behind a driver query in progress (a slow nvidia-smi).
  // Order: query_mu_ before cache_mu_.
  mutable std::mutex query_mu_;
  mutable std::mutex cache_mu_;
  core::SnapshotPtr cached_;
  std::chrono::steady_clock::time_point cached_at_{};
  HealthClears clears_;  // applied by finish_locked
  // Resolved /proc details by pid, valid while that process lives: told by its /proc directory held open
  // (one lookup per collection), or, past max_held_processes or where it cannot be held, by its start
  // time (a read of its stat file, which the kernel writes out field by field).
  struct KnownProc {
    platform::ProcInfo info;
    platform::ProcHandle handle;
  };
  std::unordered_map<std::uint32_t, KnownProc> proc_cache_;
  std::size_t held_ = 0;  // valid handles in proc_cache_
  // The known entry for pid when it is still the same process, else a fresh one (nullptr: not visible).
  const platform::ProcInfo* known_process(std::uint32_t pid);
};

}  // namespace gf::sampler
