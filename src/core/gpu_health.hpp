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
// critical XID keeps the GPU unhealthy until it is cleared: by an operator after the reset
// (POST /api/v1/gpus/{gpu}/health/clear, `gpufleet health clear`, as `dcgmi health --clear`), by the
// agent when the GPU answers again after being lost or gone (sampler/health_clears.hpp), or by a
// restart of the agent. NVML does not say when a GPU was reset, so nothing clears an XID by itself.
// Health::Error (a query failed, "GPU requires reset") keeps its own state and is not judged here.
#include <array>
#include <chrono>
#include <cstddef>
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

// A problem's code in a few words, for refusals and one-line displays: "XID 79 (GPU has fallen off the
// bus)" for "xid_79", "GPU lost", "row remap failure". Empty for a code it does not know. A verdict's
// summary is "unhealthy: " and its first problem's words.
std::string problem_words(std::string_view code);

// ---- Clearing recorded XIDs ----
// An XID is an event: a reading lists it until it is cleared. A clear remembers what the GPU's reading
// listed at that moment; later readings drop exactly those events (same XID, same time), so an XID that
// comes after the clear shows, even the same number. A lost GPU or a failed row remap is state, not an
// event: a clear does not touch it, and the next reading shows it again while it lasts.
inline constexpr std::size_t kMaxClearedXids = 256;  // events one clear remembers (a backend keeps ~16)

struct XidClear {
  std::vector<XidEvent> events;  // the events cleared, oldest first
  // The reading's last XID when cleared (0: none). For backends that report only the last XID (no
  // list): that value reads as 0 ("none since") until another XID replaces it.
  unsigned last_xid = 0;
  std::chrono::system_clock::time_point at{};  // when (the agent's clock)
};

// A clear, at `at`, of everything `g` lists now, on top of `before` (the clear already applied to g, or
// null): the events of both, the newest kept when there are more than kMaxClearedXids.
XidClear xid_clear_of(const GpuReading& g, std::chrono::system_clock::time_point at, const XidClear* before = nullptr);
// Drops from `g` what `c` cleared: its events from recent_xids, and last_xid (→ the newest event left, or
// 0 when none is left and the last one was cleared). Returns whether anything was dropped.
bool apply_xid_clear(const XidClear& c, GpuReading& g);

}  // namespace gf::core
