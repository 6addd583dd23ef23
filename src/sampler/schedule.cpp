#include "sampler/schedule.hpp"

namespace gf::sampler {

TickSchedule::Id TickSchedule::add(std::chrono::nanoseconds interval, TimePoint now, bool aligned) {
  if (interval <= std::chrono::nanoseconds::zero()) interval = std::chrono::milliseconds(1);
  const Id id = next_id_++;
  TimePoint first = now;
  if (aligned) {
    const auto since_epoch = now.time_since_epoch();
    const auto k = (since_epoch + interval - std::chrono::nanoseconds(1)) / interval;  // ceil
    first = TimePoint(std::chrono::duration_cast<TimePoint::duration>(interval * k));
  }
  entries_.emplace(id, Entry{interval, first});
  return id;
}

void TickSchedule::remove(Id id) { entries_.erase(id); }

std::optional<TickSchedule::TimePoint> TickSchedule::next_due() const {
  std::optional<TimePoint> best;
  for (const auto& [id, e] : entries_)
    if (!best || e.due < *best) best = e.due;
  return best;
}

std::vector<TickSchedule::Id> TickSchedule::take_due(TimePoint now, std::chrono::nanoseconds slack) {
  std::vector<Id> due;
  for (auto& [id, e] : entries_) {
    if (e.due > now + slack) continue;
    due.push_back(id);
    // Next grid point strictly after now; every grid point skipped on the way was a missed tick.
    const auto late = now - e.due;
    const auto steps = late.count() >= 0 ? late / e.interval + 1 : 1;
    e.missed += static_cast<std::uint64_t>(steps - 1);
    e.due += steps * e.interval;
  }
  return due;
}

std::uint64_t TickSchedule::missed(Id id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.missed;
}

}  // namespace gf::sampler
