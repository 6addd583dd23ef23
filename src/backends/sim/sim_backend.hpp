#pragma once
#include <memory>

#include "backends/backend.hpp"

namespace gf::backends {

// Opens the sim backend, or says why it cannot be used here.
Result<std::unique_ptr<Backend>> open_sim(const BackendOptions& opts);

}  // namespace gf::backends
