#include "backends/amdgpu/drm_clients.hpp"

#include <limits>

namespace gf::backends::amdgpu {

void DrmClientTally::add(std::uint32_t pid, const DrmFdinfo& info) {
  if (info.driver != "amdgpu" || info.pdev.empty() || !info.client_id) return;
  // try_emplace: the first fd of a client wins. Later fds of the same client were read moments
  // later and describe the same buffers, so there is nothing to add.
  clients_[{info.pdev, pid}].try_emplace(*info.client_id, info.memory_vram_bytes);
}

std::vector<core::GpuProcess> DrmClientTally::processes_on(const std::string& pdev) const {
  std::vector<core::GpuProcess> out;
  for (auto it = clients_.lower_bound({pdev, 0}); it != clients_.end() && it->first.first == pdev; ++it) {
    core::GpuProcess p;
    p.pid = it->first.second;
    // A client without the key (an older kernel) adds nothing; the total is still a lower bound
    // when others report it, and unknown (nullopt) when none does.
    std::optional<std::uint64_t> bytes;
    for (const auto& [client_id, vram] : it->second) {
      if (!vram) continue;
      const std::uint64_t sum = bytes.value_or(0);
      // Saturate: values come from the kernel, but a corrupt file must not wrap the total.
      bytes = *vram > std::numeric_limits<std::uint64_t>::max() - sum ? std::numeric_limits<std::uint64_t>::max()
                                                                      : sum + *vram;
    }
    if (bytes) p.used_memory_mib = *bytes >> 20;
    // amdgpu's fdinfo does not say whether a client is graphics or compute (a ROCm process and a
    // game both show up with gfx/compute engine time), so every process is reported as Compute.
    p.kind = core::ProcessKind::Compute;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gf::backends::amdgpu
