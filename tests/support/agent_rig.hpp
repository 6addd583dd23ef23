#pragma once
// What the node and server tests share: a Monitor over a ScriptedBackend, a real SampleHub (its own
// thread, or stepped by the test on a fake clock), an Agent (with or without history) in a per-test temp
// dir, and a poll-with-deadline helper. No sockets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include "node/agent.hpp"
#include "platform/clock.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "store/history.hpp"
#include "support/eventually.hpp"
#include "support/scripted_backend.hpp"
#include "support/temp_dir.hpp"

namespace gf::test {

namespace fs = std::filesystem;

// Monitor + hub + agent over scripted readings. Members are destroyed in reverse order: agent, hub,
// monitor.
struct AgentRig {
  std::shared_ptr<ScriptedBackend::State> st = std::make_shared<ScriptedBackend::State>();
  std::unique_ptr<sampler::Monitor> monitor;
  std::unique_ptr<sampler::SampleHub> hub;
  std::unique_ptr<node::Agent> agent;
  const core::Clock* clock;

  // Drive::Manual: no hub thread; the test moves `clock` (a FakeClock) and steps the hub (step()).
  explicit AgentRig(const core::Clock& c = platform::system_clock(),
                    sampler::SampleHub::Drive drive = sampler::SampleHub::Drive::Thread)
      : clock(&c) {
    set_gpus({make_gpu(0, 10, 1000), make_gpu(1, 80, 2000)});
    sampler::MonitorOptions mo;
    mo.cache_ttl = std::chrono::milliseconds(0);
    monitor = std::make_unique<sampler::Monitor>(std::make_unique<ScriptedBackend>(st), c, mo);
    hub = std::make_unique<sampler::SampleHub>(*monitor, c, drive);
  }

  // A manual hub's tick at the clock's time: how many listeners were due.
  std::size_t step() { return hub->step(clock->now()); }
  ~AgentRig() {
    if (agent) agent->stop();
  }

  // Sets what the driver reports next, stamped now.
  void set_gpus(std::vector<core::GpuReading> gpus) {
    std::lock_guard lock(st->mu);
    st->next.gpus = std::move(gpus);
    st->next.backend = "scripted";
    st->next.timestamp = std::chrono::system_clock::now();
  }

  // Creates the agent; history_db empty: none kept.
  void make_agent(node::AgentOptions opts, const std::string& history_db = {}) {
    std::unique_ptr<store::HistoryStore> w, r;
    if (!history_db.empty()) {
      auto ow = store::HistoryStore::open(history_db);
      auto orr = store::HistoryStore::open(history_db);
      EXPECT_TRUE(ow && orr);
      if (ow && orr) {
        w = std::move(*ow);
        r = std::move(*orr);
      }
    }
    agent = std::make_unique<node::Agent>(*monitor, *hub, std::move(w), std::move(r), std::move(opts), *clock);
  }
};

}  // namespace gf::test
