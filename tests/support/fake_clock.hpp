#pragma once
#include <atomic>
#include <chrono>

#include "core/ports/clock.hpp"

namespace gf::test {

// A clock tests move by hand. Thread-safe.
class FakeClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns_.load()));
  }
  std::chrono::system_clock::time_point wall_now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000)) +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns_.load()));
  }
  void advance(std::chrono::nanoseconds d) { ns_.fetch_add(d.count()); }

 private:
  std::atomic<long long> ns_{1'000'000'000};
};

}  // namespace gf::test
