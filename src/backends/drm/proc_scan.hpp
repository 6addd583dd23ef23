#pragma once
// Reads the DRM fdinfo of every process under a /proc tree (the real one or a fixture), for any
// DRM driver (amdgpu, i915, xe, ...).
// Thread-safety: stateless; concurrent calls are fine.
#include <cstddef>
#include <string>
#include <vector>

#include "backends/drm/drm_clients.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::drm {

struct DrmScan {
  DrmClientTally tally;
  // Processes whose open files we may not list (another user's, without CAP_SYS_PTRACE): any GPU
  // use of theirs is invisible. Processes that exit during the scan are not counted.
  std::size_t unreadable_pids = 0;
};

// Walks <proc_root>/<pid>/fdinfo/<fd> for every numeric pid and tallies the clients of drivers
// (drm-driver values, e.g. {"amdgpu"} or {"i915", "xe"}). Never fails: what cannot be read is
// skipped (and counted in unreadable_pids when it is a permission problem).
DrmScan scan_drm_clients(const std::string& proc_root, std::vector<std::string> drivers);

// Marks the snapshot's process list incomplete when the scan could not see everything (unreadable
// processes, clients past the tally's bound), saying why; leaves it alone otherwise.
void note_visibility(const DrmScan& scan, core::Snapshot& s);

}  // namespace gf::backends::drm
