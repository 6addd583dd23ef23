#pragma once
// MIG instances in the model: which instance a process runs in. Pure functions over a reading.
#include <string_view>

#include "core/snapshot.hpp"

namespace gf::core {

// The MIG instance of `g` that process `p` runs in, matched by NVML's GPU-instance id (and the
// compute-instance id when the driver gives one); null when MIG is off or the driver does not say.
const MigInstance* mig_instance_of(const GpuReading& g, const GpuProcess& p) noexcept;

// A MIG device's UUID ("MIG-…", or the older "MIG-GPU-…/gi/ci"): what a lease of one MIG instance holds
// in place of a GPU UUID, and what CUDA_VISIBLE_DEVICES takes for it.
constexpr bool is_mig_uuid(std::string_view uuid) noexcept { return uuid.substr(0, 4) == "MIG-"; }

}  // namespace gf::core
