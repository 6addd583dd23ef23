#pragma once
// SampleHub: one collection loop shared by every listener (the agent's publication and history, the
// WebSocket hub's period groups, job samplers). Each tick queries the driver once, through the Monitor (which refreshes
// its cache), and hands the snapshot to every listener due at that tick. Time comes from a core::Clock; step(now) is
// one tick's work, which the hub's own thread drives (or a test, on a fake clock, with Drive::Manual). A backend or a
// listener that throws does not end the loop: the exception is logged on stderr ("sampler: …"), the backend's becomes
// that tick's error for every listener, and the loop goes on. Thread-safe. Listeners run on the hub's thread (or
// step()'s caller) and must be quick; a listener must not subscribe or unsubscribe from inside its own call.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/ports/clock.hpp"
#include "platform/clock.hpp"
#include "sampler/monitor.hpp"
#include "sampler/schedule.hpp"

namespace gf::sampler {

class SampleHub {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // The snapshot (or the backend's error) and the steady time it was taken.
  using Listener = std::function<void(const Result<core::SnapshotPtr>&, TimePoint)>;

  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& o) noexcept : hub_(o.hub_), id_(o.id_) { o.hub_ = nullptr; }
    Subscription& operator=(Subscription&& o) noexcept;
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    ~Subscription() { reset(); }
    // Unsubscribes; when it returns, the listener is not running and will not run again.
    void reset();
    std::uint64_t missed_ticks() const;

   private:
    friend class SampleHub;
    Subscription(SampleHub* hub, TickSchedule::Id id) : hub_(hub), id_(id) {}
    SampleHub* hub_ = nullptr;
    TickSchedule::Id id_ = 0;
  };

  // Thread: the hub runs its own thread, which calls step() when a tick is due.
  // Manual: no thread; the owner calls step(now) (tests on a fake clock).
  enum class Drive { Thread, Manual };

  explicit SampleHub(Monitor& monitor, const core::Clock& clock = platform::system_clock(),
                     Drive drive = Drive::Thread);
  ~SampleHub();
  SampleHub(const SampleHub&) = delete;
  SampleHub& operator=(const SampleHub&) = delete;

  // The first call comes at once, then every `interval` on a drift-free grid.
  // Aligned: the ticks sit on multiples of the interval from the steady clock's epoch instead (the
  // first one within an interval), so aligned listeners of 100 ms, 1 s and 5 s share their queries.
  Subscription subscribe(std::chrono::nanoseconds interval, Listener listener, bool aligned = false);
  // Driver queries made so far (one per tick, however many listeners were due).
  std::uint64_t query_count() const noexcept { return queries_.load(); }
  // How long the latest driver query took.
  std::chrono::nanoseconds last_query_duration() const noexcept {
    return std::chrono::nanoseconds(last_query_ns_.load());
  }
  // Exceptions caught so far: from the backend's query, and from listeners.
  std::uint64_t backend_exceptions() const noexcept { return backend_exceptions_.load(); }
  std::uint64_t listener_exceptions() const noexcept { return listener_exceptions_.load(); }

  // A query outside the schedule, in which the backend reads every counter afresh (the energy counter
  // exact now: Monitor::snapshot_with_fresh_counters), for a job sampler's first and last sample. Not a
  // tick: no listener is called and query_count() does not count it. Never throws (a backend's exception
  // becomes the error). `taken`: the steady time it was taken. Callable while holding a lock a listener
  // takes (it does not wait for deliveries).
  Result<core::SnapshotPtr> query_fresh(TimePoint& taken);
  // One tick at `now`: when a listener is due, queries the driver once and calls every listener due.
  // Returns how many listeners were due (0: nothing was due, no query made). Never throws.
  std::size_t step(TimePoint now);
  // When the next tick is due (nullopt: no listeners).
  std::optional<TimePoint> next_due() const;

 private:
  void unsubscribe(TickSchedule::Id id);
  void run(std::stop_token stop);

  Result<core::SnapshotPtr> query();
  void call(const Listener& fn, const Result<core::SnapshotPtr>& snap, TimePoint taken);

  Monitor& monitor_;
  const core::Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::mutex deliver_mu_;  // held while listeners run, so unsubscribe can wait them out
  TickSchedule schedule_;
  std::unordered_map<TickSchedule::Id, Listener> listeners_;
  std::atomic<std::uint64_t> queries_{0};
  std::atomic<std::int64_t> last_query_ns_{0};
  std::atomic<std::uint64_t> backend_exceptions_{0}, listener_exceptions_{0};
  // The last failures logged (guarded by deliver_mu_): a repeat is not logged again.
  std::string last_logged_, last_listener_logged_;
  std::jthread thread_;
};

}  // namespace gf::sampler
