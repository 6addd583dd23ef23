#pragma once
// Clock port: the sampler, the sim backend and the cache take time from here, so tests can drive it.
// Implementations must be thread-safe.
#include <chrono>

namespace gf::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point now() const = 0;
  virtual std::chrono::system_clock::time_point wall_now() const = 0;
};

}  // namespace gf::core
