#pragma once
// Prometheus text exposition (format 0.0.4) of one node's GPU snapshot. Pure encoder: no I/O, no global
// state, no locale; safe to call from any number of threads at once on shared const inputs.
//
// GPU series use the DCGM exporter's metric names, units and labels so that dashboards and alerts built
// for dcgm-exporter work unchanged:
//   DCGM_FI_DEV_xxx{gpu="0",UUID="GPU-…",pci_bus_id="00000000:1B:00.0",device="nvidia0",
//                   modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"} 42
// in that label order. Hostname is left out when empty, as dcgm-exporter does. device is "nvidia<index>"
// for the NVIDIA backends ("nvml", "nvidia-smi", and "sim", which models NVIDIA boards) and
// "gpu<index>" for any other backend: for amdgpu the index is gpufleet's position, not the DRM card
// number, so "card<index>" would name the wrong card.
//
// The GPU families' names, HELP texts and types are the rows of core::kFields (src/core/fields.hpp);
// this encoder fixes only their order. DCGM families (gauge unless noted; absent Reading → no sample for
// that GPU, never 0):
//   DCGM_FI_DEV_SM_CLOCK (MHz)  DCGM_FI_DEV_MEM_CLOCK (MHz)  DCGM_FI_DEV_GPU_TEMP (C)
//   DCGM_FI_DEV_POWER_USAGE (W)  DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ, counter)
//   DCGM_FI_DEV_GPU_UTIL (%)  DCGM_FI_DEV_MEM_COPY_UTIL (%)  DCGM_FI_DEV_FB_FREE (MiB)  DCGM_FI_DEV_FB_USED (MiB)
//   DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (count, counter)  DCGM_FI_DEV_FAN_SPEED (%)
//   DCGM_FI_DEV_ENFORCED_POWER_LIMIT (W)  DCGM_FI_DEV_PSTATE (0..15)
//   DCGM_FI_DEV_CLOCKS_EVENT_REASONS (bit mask)  DCGM_FI_DEV_PERSISTENCE_MODE (0/1)  DCGM_FI_DEV_MIG_MODE (0/1)
//   health: ECC SBE/DBE volatile and aggregate totals, retired pages, remapped rows, PCIe replays, power and
//   thermal violation time (us), the last XID; profiling (GPM): DCGM_FI_PROF_* ratios and bytes/s
//   and DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: the clock-event mask again under its pre-3.3 name.
// gpufleet GPU families (same labels): gpufleet_gpu_health{…,state="ok|lost|error"} 1,
//   gpufleet_gpu_availability_score (0..1), gpufleet_gpu_memory_total_mib, gpufleet_gpu_processes,
//   gpufleet_gpu_memory_unattributed_mib.
// gpufleet agent families (Hostname label only, when set): gpufleet_agent_info{version,backend} 1,
//   gpufleet_agent_uptime_seconds, gpufleet_collections_total, gpufleet_collection_errors_total,
//   gpufleet_collection_duration_seconds, gpufleet_leases_active, gpufleet_jobs_waiting, gpufleet_jobs_running,
//   gpufleet_jobs_finished_total, gpufleet_alerts_firing, gpufleet_websocket_clients. (The agent's /metrics
//   renders these at most once a second and for each new reading: server/api_meta.cpp.)
//
// Output contract: families in the fixed order above; within a family, GPUs in snapshot order. A family's
// # HELP and # TYPE lines are written once, and only when it has at least one sample (an all-absent family
// is left out entirely). A lost GPU yields only its gpufleet_gpu_health sample: whatever else it carries is
// stale. Label values are escaped (\\, \", \n); numbers are written without the locale: integers as
// integers, doubles in the shortest form that reads back exactly, NaN/+Inf/-Inf by name. The text ends with
// a newline.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/snapshot.hpp"

namespace gf::wire {

// The Content-Type to serve this text under.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// gpufleet's own series, filled by the caller (the agent); every field is always exported.
struct AgentStats {
  std::string version;
  std::string backend;  // empty: the snapshot's backend is used
  double uptime_seconds = 0;
  std::uint64_t collections_total = 0;
  std::uint64_t collection_errors_total = 0;
  double last_collection_duration_seconds = 0;
  std::size_t active_leases = 0;
  std::size_t waiting_jobs = 0;
  std::size_t jobs_running = 0;
  std::uint64_t jobs_finished_total = 0;
  std::size_t alerts_firing = 0;
  std::size_t websocket_clients = 0;
};

// Appends the exposition text to `out` (does not clear it). Allocates only the per-GPU label strings and
// out's growth (reserved up front), so a caller reusing one buffer pays almost nothing per call.
void write_prometheus(std::string& out, const core::Snapshot& s, const std::string& hostname, const AgentStats& agent);

// The two halves of that text, for a server that renders the GPU half once per snapshot and only the
// agent half per scrape: write_prometheus(out, s, h, a) == write_prometheus_gpus(out, s, h) followed by
// write_prometheus_agent(out, s.backend, h, a).
void write_prometheus_gpus(std::string& out, const core::Snapshot& s, const std::string& hostname);
void write_prometheus_agent(std::string& out, std::string_view snapshot_backend, const std::string& hostname,
                            const AgentStats& agent);

// Per-user accounting counters (node::UsageLedger's totals: ended leases and running ones), labelled
// {user="…"} (and Hostname when set): gpufleet_user_gpu_held_seconds_total,
// gpufleet_user_gpu_busy_seconds_total, gpufleet_user_energy_joules_total. Nothing is written when there
// are no users. The user name is escaped like every label value.
struct UserUsage {
  std::string user;
  double held_gpu_seconds = 0;
  double busy_gpu_seconds = 0;
  double energy_joules = 0;
};
void write_prometheus_users(std::string& out, const std::string& hostname, const std::vector<UserUsage>& users);

// The same text as a new string.
std::string prometheus_text(const core::Snapshot& s, const std::string& hostname, const AgentStats& agent);

}  // namespace gf::wire
