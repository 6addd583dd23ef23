#pragma once
// amdgpu's reading of the DRM clients a /proc scan found (backends/drm/): per process, its VRAM.
// Pure. Thread-safety: stateless.
#include <string_view>
#include <vector>

#include "backends/drm/drm_clients.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::amdgpu {

// The processes using the GPU at PCI address pdev (lower case), by pid ascending. Each carries pid,
// used_memory_mib (sum of its clients' drm-memory-vram, rounded down to MiB; nullopt when none of
// its clients reports it) and kind. Name, user and command are left for the caller.
std::vector<core::GpuProcess> processes_on(const drm::DrmClientTally& tally, std::string_view pdev);

}  // namespace gf::backends::amdgpu
