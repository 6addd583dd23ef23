#pragma once
// FleetRefresher: gathers the fleet's facts on its own thread every `refresh` interval and publishes
// them, so that requests read the latest facts and never wait on Prometheus, agents or Kubernetes.
// Thread-safety: latest() may be called from any thread; start/stop from the owner.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "cluster/fleet_sources.hpp"

namespace gf::cluster {

// An agent that stops answering can no longer say its --node-name, and its node would take the URL's
// host as its name (and look like another node). `names` (agent URL → the node name it last gave) is
// updated from the agents that answered, and gives the failed ones their last name. Bounded at
// kMaxRememberedAgents URLs.
inline constexpr std::size_t kMaxRememberedAgents = 100000;
void remember_agent_names(core::FleetFacts& facts, std::unordered_map<std::string, std::string>& names);

class FleetRefresher {
 public:
  explicit FleetRefresher(FleetSources sources) : sources_(std::move(sources)) {}
  ~FleetRefresher() { stop(); }
  FleetRefresher(const FleetRefresher&) = delete;
  FleetRefresher& operator=(const FleetRefresher&) = delete;

  // Starts the thread; the first round begins at once.
  void start();
  void stop();
  // The latest facts; null before the first round ends. A round that cannot even read its sources
  // (an unreadable agents file) publishes facts with that error in source_errors.
  std::shared_ptr<const core::FleetFacts> latest() const;
  const FleetSources& sources() const noexcept { return sources_; }

 private:
  void loop(std::stop_token stop);

  const FleetSources sources_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<const core::FleetFacts> latest_;
  std::unordered_map<std::string, std::string> agent_names_;  // agent URL → the node name it last gave
  std::jthread thread_;
};

}  // namespace gf::cluster
