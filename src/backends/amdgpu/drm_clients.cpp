#include "backends/amdgpu/drm_clients.hpp"

#include <cstdint>
#include <optional>
#include <utility>

namespace gf::backends::amdgpu {

std::vector<core::GpuProcess> processes_on(const drm::DrmClientTally& tally, std::string_view pdev) {
  std::vector<core::GpuProcess> out;
  for (const drm::ProcessClients& pc : tally.processes_on(pdev)) {
    core::GpuProcess p;
    p.pid = pc.pid;
    // A client without the key (an older kernel) adds nothing; the total is still a lower bound
    // when others report it, and unknown (nullopt) when none does.
    std::optional<std::uint64_t> bytes;
    for (const drm::DrmFdinfo* c : pc.clients)
      if (c->memory_vram_bytes) bytes = drm::saturating_add(bytes.value_or(0), *c->memory_vram_bytes);
    if (bytes) p.used_memory_mib = *bytes >> 20;
    // amdgpu's fdinfo does not say whether a client is graphics or compute (a ROCm process and a
    // game both show up with gfx/compute engine time), so every process is reported as Compute.
    p.kind = core::ProcessKind::Compute;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gf::backends::amdgpu
