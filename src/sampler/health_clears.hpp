#pragma once
// HealthClears: the XIDs cleared on this node's GPUs (core::XidClear), applied to every reading the
// Monitor makes, and the evidence of a reset that clears them without an operator.
//
// NVML has no event for a GPU reset, and its XID events stay recorded until cleared. What a reading
// does show: a GPU that was lost (GPU_IS_LOST, fallen off the bus) answering again — only a reset or a
// driver reload brings one back — and a GPU that had gone from the enumeration coming back (a rebind, a
// hot reset through sysfs). Either clears the XIDs recorded until then, as an operator's clear would,
// and apply() returns a line saying so. Nothing else clears by itself.
//
// Keyed by UUID (a reading without one: the UUID last seen at its index); at most kMaxTrackedGpus GPUs
// are followed.
// Thread-safety: every member may be called from any thread (one mutex).
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gpu_health.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::sampler {

class HealthClears {
 public:
  static constexpr std::size_t kMaxTrackedGpus = 1024;

  struct Cleared {
    std::vector<core::XidEvent> events;  // what this clear took out of the reading it saw
    std::optional<unsigned> last_xid;    // the last XID it took out (nullopt: none)
    bool anything() const noexcept { return !events.empty() || last_xid.has_value(); }
  };

  // Clears, at `at`, what `shown` lists (a reading as the Monitor made it: earlier clears already
  // applied), and returns what that takes out. Fails only when kMaxTrackedGpus other GPUs are followed.
  Result<Cleared> clear(const core::GpuReading& shown, std::chrono::system_clock::time_point at);

  // Applies the clears to s's GPUs, first clearing those that answer again after being lost or gone (at
  // s.timestamp). Returns one line per such automatic clear that took something out, for the log.
  std::vector<std::string> apply(core::Snapshot& s);

 private:
  enum class Down : unsigned char { No, Lost, Gone };
  struct PerGpu {
    std::optional<core::XidClear> clear;
    Down down = Down::No;
    bool present = false;  // in the last snapshot applied
  };
  // The GPU's UUID; for a reading without one (a GPU lost before its UUID could be read), the UUID last
  // seen at its index, else "#<index>". Under mu_.
  std::string key_of(const core::GpuReading& g) const;
  // What c takes out of g (applied to a copy: g is not changed).
  static Cleared taken_out(const core::XidClear& c, const core::GpuReading& g);

  std::mutex mu_;
  std::unordered_map<std::string, PerGpu> gpus_;
  std::unordered_map<unsigned, std::string> uuid_at_;  // index → the UUID last seen there
};

}  // namespace gf::sampler
