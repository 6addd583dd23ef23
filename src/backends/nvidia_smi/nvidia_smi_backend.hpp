#pragma once
#include <memory>

#include "backends/backend.hpp"

namespace gf::backends {

// Opens the nvidia_smi backend, or says why it cannot be used here.
Result<std::unique_ptr<Backend>> open_nvidia_smi(const BackendOptions& opts);

}  // namespace gf::backends
