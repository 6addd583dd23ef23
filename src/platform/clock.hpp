#pragma once
#include "core/ports/clock.hpp"

namespace gf::platform {

// The real clocks. Stateless and thread-safe.
class SystemClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point wall_now() const override { return std::chrono::system_clock::now(); }
};

// One shared instance, for wiring in app/ and defaults.
const core::Clock& system_clock();

}  // namespace gf::platform
