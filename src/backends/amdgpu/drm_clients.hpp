#pragma once
// Turns parsed fdinfo records into per-GPU process lists. Pure: the caller reads the files.
//
// Why a tally and not a sum per fd: one DRM client (one open() of /dev/dri/renderD*) shows up in
// every fd that refers to it (dup(), fork(), SCM_RIGHTS), each fdinfo repeating the client's whole
// memory. Counting each (pdev, client id) once per pid avoids double counting; a pid's memory on a
// GPU is the sum over its distinct clients there (e.g. a GL and a Vulkan context).
// Thread-safety: none; one tally per scan.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/amdgpu/fdinfo.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::amdgpu {

class DrmClientTally {
 public:
  // Records one fdinfo of pid. Ignored: other drivers (i915, nvidia, xe...), records without a
  // drm-pdev (cannot be tied to a GPU) and without a drm-client-id (cannot be told apart from a
  // duplicate fd; the kernel always prints one, so only a garbled file lacks it).
  void add(std::uint32_t pid, const DrmFdinfo& info);

  // The processes using the GPU at PCI address pdev (lower case), by pid ascending. Each carries
  // pid, used_memory_mib (sum of its clients' drm-memory-vram, rounded down to MiB; nullopt when
  // none of its clients reports it) and kind. Name, user and command are left for the caller.
  std::vector<core::GpuProcess> processes_on(const std::string& pdev) const;

  bool empty() const noexcept { return clients_.empty(); }

 private:
  // (pdev, pid) -> client id -> drm-memory-vram bytes of that client.
  std::map<std::pair<std::string, std::uint32_t>, std::map<std::uint64_t, std::optional<std::uint64_t>>> clients_;
};

}  // namespace gf::backends::amdgpu
