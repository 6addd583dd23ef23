#include "sampler/hub.hpp"

#include <exception>
#include <vector>

#include "core/text.hpp"
#include "platform/log.hpp"

namespace gf::sampler {

SampleHub::Subscription& SampleHub::Subscription::operator=(Subscription&& o) noexcept {
  if (this != &o) {
    reset();
    hub_ = o.hub_;
    id_ = o.id_;
    o.hub_ = nullptr;
  }
  return *this;
}

void SampleHub::Subscription::reset() {
  if (hub_) hub_->unsubscribe(id_);
  hub_ = nullptr;
}

std::uint64_t SampleHub::Subscription::missed_ticks() const {
  if (!hub_) return 0;
  std::lock_guard lock(hub_->mu_);
  return hub_->schedule_.missed(id_);
}

SampleHub::SampleHub(Monitor& monitor, const core::Clock& clock, Drive drive) : monitor_(monitor), clock_(clock) {
  if (drive == Drive::Thread) thread_ = std::jthread([this](std::stop_token st) { run(st); });
}

SampleHub::~SampleHub() {
  thread_.request_stop();
  cv_.notify_all();
}

SampleHub::Subscription SampleHub::subscribe(std::chrono::nanoseconds interval, Listener listener, bool aligned) {
  TickSchedule::Id id;
  {
    std::lock_guard lock(mu_);
    id = schedule_.add(interval, clock_.now(), aligned);
    listeners_.emplace(id, std::move(listener));
  }
  cv_.notify_all();
  return Subscription(this, id);
}

void SampleHub::unsubscribe(TickSchedule::Id id) {
  {
    std::lock_guard lock(mu_);
    schedule_.remove(id);
    listeners_.erase(id);
  }
  // Wait for a delivery in flight to finish: it may be calling this listener right now.
  std::lock_guard wait(deliver_mu_);
}

std::optional<SampleHub::TimePoint> SampleHub::next_due() const {
  std::lock_guard lock(mu_);
  return schedule_.next_due();
}

void SampleHub::run(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    const auto due = schedule_.next_due();
    if (!due) {
      cv_.wait(lock, stop, [&] { return !schedule_.empty(); });
      continue;
    }
    if (const auto now = clock_.now(); now < *due) {
      // Sleep until the grid point (not for an interval: that would drift), or until a change.
      cv_.wait_for(lock, stop, *due - now, [&] { return schedule_.next_due() != due; });
      continue;
    }
    lock.unlock();
    step(clock_.now());
    lock.lock();
  }
}

std::size_t SampleHub::step(TimePoint now) {
  std::vector<TickSchedule::Id> ids;
  {
    std::lock_guard lock(mu_);
    ids = schedule_.take_due(now);
  }
  if (ids.empty()) return 0;
  // Hold deliver_mu_ from before the query until the listeners return: unsubscribe() waits on it,
  // so once it returns its listener is neither running nor about to run (a listener removed before
  // this point is not found below). Taken after mu_ is released: the only order between the two
  // is deliver_mu_ → mu_, and listeners may take their own locks (which they also hold while
  // subscribing) without a cycle.
  std::unique_lock deliver(deliver_mu_);
  const auto started = clock_.now();
  const auto snap = query();  // one driver query for everyone due now
  const auto taken = clock_.now();
  last_query_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(taken - started).count());
  queries_.fetch_add(1);
  std::vector<Listener> calls;  // copies: a listener may be removed while we call the others
  {
    std::lock_guard lock(mu_);
    for (auto id : ids)
      if (auto it = listeners_.find(id); it != listeners_.end()) calls.push_back(it->second);
  }
  for (auto& fn : calls) call(fn, snap, taken);
  return ids.size();
}

Result<core::SnapshotPtr> SampleHub::query_fresh(TimePoint& taken) {
  // Without deliver_mu_: a caller may hold a lock of its own that a listener takes (as when it subscribes);
  // the monitor serialises this query with the ticks'. So its failure is not logged here (last_logged_ is
  // deliver_mu_'s): the caller counts it, and the next tick logs a backend that keeps failing.
  std::string what;
  try {
    auto snap = monitor_.snapshot_with_fresh_counters();
    taken = clock_.now();
    return snap;
  } catch (...) {
    what = core::current_exception_message();
  }
  backend_exceptions_.fetch_add(1);
  taken = clock_.now();
  return make_error("the backend (" + monitor_.backend_name() + ") threw: " + what);
}

Result<core::SnapshotPtr> SampleHub::query() {
  // Called with deliver_mu_ held (it guards last_logged_).
  std::string what;
  try {
    auto snap = monitor_.snapshot(false);
    if (snap && !last_logged_.empty()) {
      platform::log_line("sampler", "the backend answers again");
      last_logged_.clear();
    }
    return snap;
  } catch (...) {
    what = core::current_exception_message();
  }
  backend_exceptions_.fetch_add(1);
  auto message = "the backend (" + monitor_.backend_name() + ") threw: " + what;
  if (message != last_logged_) {  // a backend that keeps failing the same way is logged once
    platform::log_line("sampler", message);
    last_logged_ = message;
  }
  return make_error(std::move(message));
}

void SampleHub::call(const Listener& fn, const Result<core::SnapshotPtr>& snap, TimePoint taken) {
  std::string what;
  try {
    fn(snap, taken);
    return;
  } catch (...) {
    what = core::current_exception_message();
  }
  listener_exceptions_.fetch_add(1);
  auto message = "a listener threw (the loop goes on): " + what;
  if (message != last_listener_logged_) {  // one that throws at every tick is logged once
    platform::log_line("sampler", message);
    last_listener_logged_ = std::move(message);
  }
}

}  // namespace gf::sampler
