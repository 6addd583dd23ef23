#pragma once
#include <memory>

#include "backends/backend.hpp"

namespace gf::backends {

// Opens the amdgpu backend, or says why it cannot be used here.
Result<std::unique_ptr<Backend>> open_amdgpu(const BackendOptions& opts);

}  // namespace gf::backends
