// The background fleet refresh (see fleet_refresher.hpp).
#include "cluster/fleet_refresher.hpp"

#include <malloc.h>

#include "platform/log.hpp"

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

std::shared_ptr<const core::FleetFacts> FleetRefresher::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void remember_agent_names(core::FleetFacts& facts, std::unordered_map<std::string, std::string>& names) {
  // An agent that stops answering can no longer say its --node-name: the node keeps the name its agent
  // last gave, instead of turning into the URL's host (and so looking like another node).
  for (auto& m : facts.metrics) {
    if (m.source != "agent" || m.agent_url.empty()) continue;
    if (m.error.empty()) {
      if (names.size() < kMaxRememberedAgents || names.count(m.agent_url)) names[m.agent_url] = m.node;
    } else if (auto it = names.find(m.agent_url); it != names.end()) {
      m.node = it->second;
    }
  }
}

void FleetRefresher::loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    const auto now = std::chrono::system_clock::now();
    auto r = gather_fleet(sources_, now);
    std::shared_ptr<const core::FleetFacts> facts;
    if (r) {
      // Said again with each failure of a source reached unsafely: the failure may be the price of it.
      for (const auto& w : insecure_warnings_for(sources_, *r)) platform::log_line("fleet", "warning: " + w);
      remember_agent_names(*r, agent_names_);
      facts = std::make_shared<const core::FleetFacts>(std::move(*r));
    } else {
      core::FleetFacts f;
      f.source_errors.push_back(r.error().message);
      f.collected = now;
      facts = std::make_shared<const core::FleetFacts>(std::move(f));
    }
    {
      std::lock_guard lock(mu_);
      latest_ = std::move(facts);
    }
    // The round's answers and parsed series (tens of MB for 10 000 nodes) are free now: give their pages
    // back rather than let this thread's malloc arena keep them until the next round.
    ::malloc_trim(0);
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, stop, sources_.refresh, [] { return false; });
  }
}

}  // namespace gf::cluster
