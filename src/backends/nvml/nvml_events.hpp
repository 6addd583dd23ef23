#pragma once
// XID events through NVML's event API, on a thread of their own.
//
// One event set for the node; each GPU is registered with the XID type when it supports it
// (nvmlDeviceGetSupportedEventTypes). The thread waits in nvmlEventSetWait_v2 with a bounded timeout,
// so stop() returns within about one timeout. Per GPU it keeps the last XID and a bounded list of the
// recent ones (time, number); the backend copies them into each reading with fill().
//
// Lifetime: start() after nvmlInit, stop() (or the destructor) before nvmlShutdown. The thread only
// waits on the set: a collection that fails, throws or finds a GPU lost does not touch it, so XIDs are
// still recorded while collection is failing. A wait that fails (not a timeout) is retried after a
// pause, so a broken set cannot spin a core.
//
// Thread-safety: start()/stop() from the owner; fill(), cpu_time() and registration_problem() from any
// thread (one mutex guards the per-GPU records).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "core/ports/clock.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvml {

struct EventOptions {
  // Longest a wait blocks: stop() returns within about this. Each timeout wakes the thread (a
  // syscall and a context switch, ~40 µs of CPU on a VM); one a second is the collection's own pace,
  // and one second is as much as the agent's stop may wait on it (NVML has no way to end a wait early).
  std::chrono::milliseconds wait_timeout{1000};
  // Pause after a wait that failed with anything but a timeout.
  std::chrono::milliseconds error_backoff{1000};
  // Recent XIDs kept per GPU. Critical XIDs (core::xid_needs_reset) are evicted last, so the
  // verdict keeps seeing them however many application faults follow.
  std::size_t recent_limit = 16;
};

class XidEvents {
 public:
  XidEvents(const Api& api, const core::Clock& clock, EventOptions options = {});
  ~XidEvents();
  XidEvents(const XidEvents&) = delete;
  XidEvents& operator=(const XidEvents&) = delete;

  // Registers every GPU in `devices` (NVML index order) and starts the thread when at least one GPU
  // was registered. A GPU that cannot be registered keeps the reason for fill().
  void start(const std::vector<Device>& devices);
  // Stops the thread and frees the set. Idempotent.
  void stop();

  // Copies what is known of `device` into `g`: last_xid (0: registered, no XID yet; absent with the
  // reason when events are unavailable for it) and recent_xids (oldest first).
  void fill(Device device, core::GpuReading& g) const;
  // XIDs recorded for `device` since start() (0 for a device not registered): a change means a new one.
  std::uint64_t count(Device device) const;
  // One sentence when the set could not be made or a GPU that has XID events could not be registered
  // (no permission, an error); empty otherwise (a GPU without XID events is not a problem).
  std::string problem() const;
  // CPU time the event thread has used (0 when it never ran). For benchmarks.
  std::chrono::nanoseconds cpu_time() const;
  bool running() const noexcept { return thread_.joinable(); }

 private:
  struct PerGpu {
    bool registered = false;
    core::Absent why = core::Absent::NotSupported;  // when not registered
    unsigned last_xid = 0;
    std::uint64_t count = 0;            // XIDs recorded
    std::deque<core::XidEvent> recent;  // oldest first
  };

  void run(std::stop_token stop);
  void record(Device device, unsigned xid);

  const Api& api_;
  const core::Clock& clock_;
  EventOptions options_;
  EventSet set_ = nullptr;
  std::string problem_;  // written before the thread starts

  mutable std::mutex mu_;
  std::unordered_map<Device, PerGpu> gpus_;
  std::uint64_t wait_errors_ = 0;

  std::jthread thread_;  // last: joined first
};

}  // namespace gf::backends::nvml
