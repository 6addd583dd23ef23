#pragma once
// The data model of one reading of a node's GPUs. Plain values, no I/O.
// Units are in the names: _mib (MiB, 2^20 bytes), _pct (0..100), _c (°C), _w (W), _mhz, _mj (mJ).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/reading.hpp"

namespace gf::core {

enum class Health : unsigned char { Ok, Lost, Error };
std::string_view to_string(Health h) noexcept;

enum class ProcessKind : unsigned char { Compute, Graphics, ComputeGraphics, Mps };
std::string_view to_string(ProcessKind k) noexcept;

struct GpuProcess {
  std::uint32_t pid = 0;                         // as the driver reports it (host pid namespace for NVML)
  std::optional<std::uint64_t> used_memory_mib;  // nullopt: the driver cannot tell
  ProcessKind kind = ProcessKind::Compute;
  // Its busiest engine's busy share over the last collection interval, 0..100 (DRM fdinfo engine time,
  // summed over the process's clients); absent where the driver does not give it per process.
  Reading<unsigned> utilization_pct;
  // Filled from /proc when visible; empty when the process could not be resolved.
  std::string name;
  std::string user;
  std::string command;                         // full command line, arguments separated by spaces
  std::optional<std::string> container;        // container id or "k8s-pod:<uid>" when in a container cgroup
  std::optional<std::uint32_t> container_pid;  // pid inside its own namespace (last NSpid entry)
  // The MIG instance the process runs in (NVML's ids), when MIG is on and the driver says.
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
};

// One XID event (an error the driver reported for the GPU), as the event thread saw it.
struct XidEvent {
  unsigned xid = 0;
  std::chrono::system_clock::time_point time{};
};

// One MIG device (a compute instance of a GPU instance) of a GPU in MIG mode. Its memory is part of
// its parent's: documents show it under the parent and never add it to the parent's totals.
struct MigInstance {
  std::string uuid;     // "MIG-…" (older drivers: "MIG-GPU-…/gi/ci")
  std::string profile;  // "1g.10gb", "3g.40gb", …
  std::string name;     // NVML's "<GPU name> MIG 1g.10gb"
  unsigned index = 0;   // NVML's MIG device index on the parent
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  Reading<std::uint64_t> memory_total_mib;
  Reading<std::uint64_t> memory_used_mib;
  Reading<std::uint64_t> memory_free_mib;
  // Profiling of its GPU instance (NVML GPM per GPU instance, Hopper and later), in the GPU's units and
  // over the same span; compute instances of one GPU instance show the same values. Absent with a reason
  // where there is none (before Hopper, a driver without per-instance GPM, the first sample).
  Reading<double> prof_graphics_active;
  Reading<double> prof_sm_active;
  Reading<double> prof_sm_occupancy;
  Reading<double> prof_tensor_active;
  Reading<double> prof_dram_active;
  Reading<double> prof_fp64_active;
  Reading<double> prof_fp32_active;
  Reading<double> prof_fp16_active;
  Reading<double> prof_pcie_tx_bytes;
  Reading<double> prof_pcie_rx_bytes;
  Reading<double> prof_nvlink_tx_bytes;
  Reading<double> prof_nvlink_rx_bytes;
  std::string profiling_note;  // why there are no profiling readings; empty when there are
};

struct GpuReading {
  unsigned index = 0;
  std::string uuid;
  std::string name;
  std::string pci_bus_id;

  Reading<std::uint64_t> memory_total_mib;
  Reading<std::uint64_t> memory_used_mib;
  Reading<std::uint64_t> memory_free_mib;
  Reading<unsigned> utilization_pct;         // GPU (SM) busy
  Reading<unsigned> memory_utilization_pct;  // memory bandwidth busy
  Reading<int> temperature_c;
  Reading<double> power_draw_w;
  Reading<double> power_limit_w;
  Reading<unsigned> fan_pct;
  Reading<unsigned> clock_graphics_mhz;
  Reading<unsigned> clock_memory_mhz;
  Reading<unsigned> clock_graphics_max_mhz;    // the highest graphics clock allowed now (MHz)
  Reading<std::uint64_t> clock_event_reasons;  // NVML bit mask (see clock_event_names)
  Reading<unsigned> performance_state;         // 0 = P0 (fastest) .. 15
  Reading<bool> mig_enabled;
  Reading<std::uint64_t> ecc_uncorrected_volatile;
  Reading<bool> persistence_mode;
  Reading<std::uint64_t> energy_mj;  // counter since driver load

  // Health counters (NVML; counts since driver load for volatile, over the board's life for aggregate).
  Reading<std::uint64_t> ecc_corrected_volatile;
  Reading<std::uint64_t> ecc_corrected_aggregate;
  Reading<std::uint64_t> ecc_uncorrected_aggregate;
  Reading<std::uint64_t> retired_pages_sbe;  // pages retired for single-bit errors (before Ampere)
  Reading<std::uint64_t> retired_pages_dbe;  // … for double-bit errors
  Reading<bool> retired_pages_pending;       // a retirement waits for the next driver reload
  Reading<std::uint64_t> remapped_rows_correctable;
  Reading<std::uint64_t> remapped_rows_uncorrectable;
  Reading<bool> remapped_rows_pending;  // a remap waits for a GPU reset
  Reading<bool> remapped_rows_failure;  // a remap failed: the GPU needs service
  Reading<std::uint64_t> pcie_replay_count;
  Reading<std::uint64_t> power_violation_us;    // time held down by the power limit, µs, counter
  Reading<std::uint64_t> thermal_violation_us;  // time held down by temperature, µs, counter
  Reading<unsigned> last_xid;                   // the last XID seen; 0: none since the agent started
  std::vector<XidEvent> recent_xids;            // newest last; bounded by the backend

  // Profiling (NVML GPM, Hopper and later): activity as a ratio 0..1, throughput in bytes/s, over the
  // interval between two GPM samples. Absent (never 0) where the GPU or driver has no GPM.
  Reading<double> prof_graphics_active;
  Reading<double> prof_sm_active;
  Reading<double> prof_sm_occupancy;
  Reading<double> prof_tensor_active;
  Reading<double> prof_dram_active;
  Reading<double> prof_fp64_active;
  Reading<double> prof_fp32_active;
  Reading<double> prof_fp16_active;
  Reading<double> prof_pcie_tx_bytes;
  Reading<double> prof_pcie_rx_bytes;
  Reading<double> prof_nvlink_tx_bytes;
  Reading<double> prof_nvlink_rx_bytes;
  std::string profiling_note;  // why there are no profiling readings; empty when there are

  std::vector<MigInstance> mig_instances;  // when MIG is on: its instances, by index

  Health health = Health::Ok;
  std::string health_message;  // why, when not Ok

  Reading<double> availability_score;  // filled by score_gpus(); absent for lost GPUs
  std::vector<GpuProcess> processes;
  // Device used memory minus what the processes account for; absent when unknown.
  Reading<std::uint64_t> memory_unattributed_mib;
};

struct ProcessVisibility {
  bool complete = true;  // false: some GPU processes may be invisible to us
  std::string message;   // why, when not complete
};

struct Snapshot {
  std::chrono::system_clock::time_point timestamp{};
  std::string backend;  // "nvml", "nvidia-smi", "amdgpu", "intel", "sim", "none"
  bool simulated = false;
  std::string driver_version;       // empty when unknown
  std::string cuda_driver_version;  // e.g. "12.4"; empty when unknown or not NVIDIA
  std::vector<GpuReading> gpus;
  std::vector<std::string> warnings;  // plain sentences, shown to the user (e.g. persistence mode off)
  ProcessVisibility process_visibility;
};

using SnapshotPtr = std::shared_ptr<const Snapshot>;

// Names of the clock-event (throttle) reasons set in an NVML mask, e.g. {"gpu_idle", "sw_power_cap"}.
std::vector<std::string_view> clock_event_names(std::uint64_t mask);

}  // namespace gf::core
