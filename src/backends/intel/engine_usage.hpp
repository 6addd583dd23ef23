#pragma once
// Engine busy and memory per process from DRM fdinfo, for i915 and xe (the kernel's
// Documentation/gpu/drm-usage-stats.rst). Pure: the tally comes from a /proc scan, time is passed in.
//
// Engine busy is a counter, so a share needs two collections: EngineUsage keeps each client's
// counters from the last one. A client's share of an engine class over the interval is
//   i915: Δ drm-engine-<class> (ns) / (Δ wall time (ns) × capacity)
//   xe:   Δ drm-cycles-<class> / (Δ drm-total-cycles-<class> × capacity)
// where capacity is drm-engine-capacity-<class> (1 when absent). A counter that goes backwards is
// held at its larger earlier value, as the spec asks.
//
// What is reported (decided here, see docs/backends.md):
// - a process's utilization: for each engine class, the sum of its clients' shares; the busiest
//   class, capped at 100 %. Absent Unavailable on the first collection that sees the client, and
//   NotSupported when the kernel prints no engine keys.
// - a GPU's utilization: the same over every client on the GPU (each client once, however many
//   processes hold it): the busiest engine class, capped at 100 %. Absent Unavailable on the first
//   collection; NoPermission when some processes' fds could not be read (the figure would be a
//   silent undercount). A client first seen in this collection adds nothing until the next.
// Thread-safety: an EngineUsage is not; the backend that owns it serialises calls.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backends/drm/drm_clients.hpp"
#include "core/reading.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::intel {

class EngineUsage {
 public:
  // Takes a new collection: tally is this scan's, now its (steady) time. complete: the scan saw every
  // process's fds. Replaces the previous collection's results.
  void update(const drm::DrmClientTally& tally, std::chrono::steady_clock::time_point now, bool complete);

  // The results of the last update() for the GPU at pdev and for one of its processes.
  core::Reading<unsigned> gpu_utilization(std::string_view pdev) const;
  core::Reading<unsigned> process_utilization(std::string_view pdev, std::uint32_t pid) const;

 private:
  struct Counters {
    drm::CounterMap busy_ns, cycles, total_cycles;
  };
  using ClientKey = std::tuple<std::string, std::uint32_t, std::uint64_t>;  // pdev, pid, client id
  std::map<ClientKey, Counters, std::less<>> previous_;
  std::optional<std::chrono::steady_clock::time_point> previous_time_;
  bool have_interval_ = false;  // the last update() had a previous collection to compare with
  bool complete_ = false;       // the last update()'s scan saw every process
  std::map<std::string, core::Reading<unsigned>, std::less<>> gpu_;
  std::map<std::pair<std::string, std::uint32_t>, core::Reading<unsigned>, std::less<>> process_;
};

// The process's memory on the GPU, from its clients' drm-total-<region> keys, rounded down to MiB:
// on a discrete card (a client prints a vram* (xe) or local* (i915) region) the device-memory
// regions; on an integrated GPU, whose memory is system memory, every region. nullopt when none of
// its clients prints a drm-total key (a kernel before 6.10 for xe, 6.9 for i915).
std::optional<std::uint64_t> process_memory_mib(const drm::ProcessClients& clients);

}  // namespace gf::backends::intel
