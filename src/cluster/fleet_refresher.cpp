// The background fleet refresh (see fleet_refresher.hpp).
#include "cluster/fleet_refresher.hpp"

namespace gf::cluster {

void FleetRefresher::start() {
  if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token st) { loop(st); });
}

void FleetRefresher::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<const allocator::FleetFacts> FleetRefresher::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void FleetRefresher::loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    const auto now = std::chrono::system_clock::now();
    auto r = gather_fleet(sources_, now);
    std::shared_ptr<const allocator::FleetFacts> facts;
    if (r) {
      facts = std::make_shared<const allocator::FleetFacts>(std::move(*r));
    } else {
      allocator::FleetFacts f;
      f.source_errors.push_back(r.error().message);
      f.collected = now;
      facts = std::make_shared<const allocator::FleetFacts>(std::move(f));
    }
    std::unique_lock lock(mu_);
    latest_ = std::move(facts);
    cv_.wait_for(lock, stop, sources_.refresh, [] { return false; });
  }
}

}  // namespace gf::cluster
