#pragma once
#include <memory>

#include "backends/backend.hpp"

namespace gf::backends {

// Opens the intel backend (GPUs on the i915 and xe kernel drivers), or says why it cannot be used here.
Result<std::unique_ptr<Backend>> open_intel(const BackendOptions& opts);

}  // namespace gf::backends
