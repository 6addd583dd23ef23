#pragma once
// Reads the DRM fdinfo of every process under a /proc tree (the real one or a fixture).
// Thread-safety: stateless; concurrent calls are fine.
#include <cstddef>
#include <string>

#include "backends/amdgpu/drm_clients.hpp"

namespace gf::backends::amdgpu {

struct DrmScan {
  DrmClientTally tally;
  // Processes whose open files we may not list (another user's, without CAP_SYS_PTRACE): any GPU
  // use of theirs is invisible. Processes that exit during the scan are not counted.
  std::size_t unreadable_pids = 0;
};

// Walks <proc_root>/<pid>/fdinfo/<fd> for every numeric pid and tallies the amdgpu clients.
// Never fails: what cannot be read is skipped (and counted in unreadable_pids when it is a
// permission problem).
DrmScan scan_drm_clients(const std::string& proc_root);

}  // namespace gf::backends::amdgpu
