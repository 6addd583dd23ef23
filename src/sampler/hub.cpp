#include "sampler/hub.hpp"

#include <vector>

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

SampleHub::SampleHub(Monitor& monitor) : monitor_(monitor) {
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
}

SampleHub::~SampleHub() {
  thread_.request_stop();
  cv_.notify_all();
}

SampleHub::Subscription SampleHub::subscribe(std::chrono::nanoseconds interval, Listener listener, bool aligned) {
  TickSchedule::Id id;
  {
    std::lock_guard lock(mu_);
    id = schedule_.add(interval, std::chrono::steady_clock::now(), aligned);
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

void SampleHub::run(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    const auto due = schedule_.next_due();
    if (!due) {
      cv_.wait(lock, stop, [&] { return !schedule_.empty(); });
      continue;
    }
    if (std::chrono::steady_clock::now() < *due) {
      // Sleep until the grid point (not for an interval: that would drift), or until a change.
      cv_.wait_until(lock, stop, *due, [&] { return schedule_.next_due() != due; });
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto ids = schedule_.take_due(now);
    lock.unlock();
    // Hold deliver_mu_ from before the query until the listeners return: unsubscribe() waits on it,
    // so once it returns its listener is neither running nor about to run (a listener removed before
    // this point is not found below). Taken after mu_ is released: the only order between the two
    // is deliver_mu_ → mu_, and listeners may take their own locks (which they also hold while
    // subscribing) without a cycle.
    std::unique_lock deliver(deliver_mu_);
    const auto started = std::chrono::steady_clock::now();
    const auto snap = monitor_.snapshot(false);  // one driver query for everyone due now
    const auto taken = std::chrono::steady_clock::now();
    last_query_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(taken - started).count());
    queries_.fetch_add(1);
    lock.lock();
    std::vector<Listener> calls;  // copies: a listener may be removed while we call the others
    for (auto id : ids)
      if (auto it = listeners_.find(id); it != listeners_.end()) calls.push_back(it->second);
    lock.unlock();
    for (auto& fn : calls) fn(snap, taken);
    deliver.unlock();
    lock.lock();
  }
}

}  // namespace gf::sampler
