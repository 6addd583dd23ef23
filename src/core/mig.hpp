#pragma once
// MIG instances in the model: which instance a process runs in. Pure functions over a reading.
#include "core/snapshot.hpp"

namespace gf::core {

// The MIG instance of `g` that process `p` runs in, matched by NVML's GPU-instance id (and the
// compute-instance id when the driver gives one); null when MIG is off or the driver does not say.
const MigInstance* mig_instance_of(const GpuReading& g, const GpuProcess& p) noexcept;

}  // namespace gf::core
