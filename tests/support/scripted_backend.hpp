#pragma once
// A Backend for tests of the layers above: returns snapshots a test sets (or fails, or throws), counts
// queries.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "backends/backend.hpp"

namespace gf::test {

class ScriptedBackend final : public backends::Backend {
 public:
  struct State {
    std::mutex mu;  // guards next
    core::Snapshot next;
    std::atomic<bool> fail{false};    // set by the test's thread while the hub's thread queries
    std::atomic<bool> throws{false};  // snapshot() throws instead of answering (a bug in a binding)
    std::atomic<int> queries{0};
    // A closed gate holds every query inside snapshot() (a slow driver, without a timer) until opened.
    std::mutex gate_mu;
    std::condition_variable gate_cv;
    bool gate_closed = false;  // guarded by gate_mu
    std::atomic<int> held{0};  // queries waiting at the gate now
    void close_gate() {
      std::lock_guard lock(gate_mu);
      gate_closed = true;
    }
    void open_gate() {
      {
        std::lock_guard lock(gate_mu);
        gate_closed = false;
      }
      gate_cv.notify_all();
    }
  };
  explicit ScriptedBackend(std::shared_ptr<State> st) : st_(std::move(st)) {}
  std::string_view name() const noexcept override { return "scripted"; }
  Result<core::Snapshot> snapshot() override {
    st_->queries.fetch_add(1);
    {
      std::unique_lock lock(st_->gate_mu);
      if (st_->gate_closed) {
        ++st_->held;
        st_->gate_cv.wait(lock, [&] { return !st_->gate_closed; });
        --st_->held;
      }
    }
    if (st_->throws.load()) throw std::runtime_error("scripted exception");
    if (st_->fail.load()) return make_error("scripted failure");
    std::lock_guard lock(st_->mu);
    return st_->next;
  }

 private:
  std::shared_ptr<State> st_;
};

inline core::GpuReading make_gpu(unsigned index, unsigned util, std::uint64_t used = 1000,
                                 std::uint64_t total = 80000) {
  core::GpuReading g;
  g.index = index;
  g.name = "Test GPU";
  g.uuid = "GPU-test-" + std::to_string(index);
  g.utilization_pct = util;
  g.memory_total_mib = total;
  g.memory_used_mib = used;
  g.memory_free_mib = total - used;
  return g;
}

}  // namespace gf::test
