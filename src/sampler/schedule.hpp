#pragma once
// TickSchedule: when each listener of the shared collection loop is due. Pure (time is passed in).
// Drift-free: a listener's ticks sit on its own grid start + k·interval, however late a tick is
// served; ticks that were missed entirely are skipped and counted, never bunched up.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace gf::sampler {

class TickSchedule {
 public:
  using Id = std::uint64_t;
  using TimePoint = std::chrono::steady_clock::time_point;

  // Adds a listener whose first tick is due at `now` — or, aligned, at the first multiple of the
  // interval (counted from the clock's epoch) at or after now, so that listeners with commensurate
  // intervals tick together and share one driver query.
  Id add(std::chrono::nanoseconds interval, TimePoint now, bool aligned = false);
  void remove(Id id);
  bool empty() const noexcept { return entries_.empty(); }
  // The earliest due time, or nullopt when there are no listeners.
  std::optional<TimePoint> next_due() const;
  // The listeners due at `now` (due time <= now + slack); each moves to its next grid point after now.
  std::vector<Id> take_due(TimePoint now, std::chrono::nanoseconds slack = std::chrono::milliseconds(1));
  // Ticks of this listener that were skipped because the loop came too late.
  std::uint64_t missed(Id id) const;

 private:
  struct Entry {
    std::chrono::nanoseconds interval;
    TimePoint due;
    std::uint64_t missed = 0;
  };
  Id next_id_ = 1;
  std::map<Id, Entry> entries_;
};

}  // namespace gf::sampler
