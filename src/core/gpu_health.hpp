#pragma once
// The health verdict of one GPU: healthy, or unhealthy with the problems that make it so. Pure: it
// reads a GpuReading and nothing else.
//
// A GPU is unhealthy when
//   - it is lost (Health::Lost: fell off the bus, NVML GPU_IS_LOST)            code "gpu_lost"
//   - it had an XID that needs a reset or attention: 48, 62, 64, 74, 79, 95,
//     119, 120 (kCriticalXids)                                                 code "xid_<n>"
//   - a row remap failed (the memory cannot repair itself any more)           code "row_remap_failure"
// Application faults (XID 13, 31, 43 and every other XID) are shown as notes and keep it healthy.
//
// How long an XID counts: as long as the reading lists it in recent_xids. The NVML backend keeps the
// XIDs it saw since the agent started and evicts critical ones last (see nvml_events.hpp), so a
// critical XID keeps the GPU unhealthy until the agent restarts — these XIDs need a GPU reset or a
// reboot, after which the agent is restarted too (a reset without a restart: restart the agent).
// Health::Error (a query failed, "GPU requires reset") keeps its own state and is not judged here.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/snapshot.hpp"

namespace gf::core {

inline constexpr std::array<unsigned, 8> kCriticalXids{48, 62, 64, 74, 79, 95, 119, 120};

// Whether an XID needs a GPU reset or an operator's attention (one of kCriticalXids).
bool xid_needs_reset(unsigned xid) noexcept;
// NVIDIA's short name of an XID ("GPU has fallen off the bus" for 79); "XID <n>" style callers add the
// number. Empty when we have no name for it.
std::string_view xid_description(unsigned xid) noexcept;

struct HealthProblem {
  std::string code;     // "gpu_lost", "xid_79", "row_remap_failure": stable, clients match on it
  std::string message;  // one sentence for people: "GPU 2 had XID 79 (GPU has fallen off the bus) at …"
};

struct HealthVerdict {
  bool healthy = true;
  std::vector<HealthProblem> problems;  // why it is unhealthy (empty when healthy)
  std::vector<HealthProblem> notes;     // XIDs seen that keep it healthy (application faults)
  // "unhealthy: XID 79 (GPU has fallen off the bus)": the first problem's short form, for refusals
  // and one-line displays; empty when healthy.
  std::string summary;
};

HealthVerdict judge_health(const GpuReading& g);

}  // namespace gf::core
