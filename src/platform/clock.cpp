#include "platform/clock.hpp"

namespace gf::platform {

const core::Clock& system_clock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace gf::platform
