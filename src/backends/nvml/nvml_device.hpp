#pragma once
// Reading one GPU through NVML: every GpuReading field, its processes, and what the device has told
// us it lacks, so that later snapshots skip those queries (probe once, then skip).
//
// The slow fields (see kSlowReadInterval) and the costly counters (kCounterReadInterval) are asked only
// when the caller says they are due; in between the reading carries their last answer. On an H100 with
// driver 580 they are the costliest calls a reading makes: the energy counter ~4.1 ms of CPU, the power
// and thermal violation times 0.8 and 0.7 ms, MIG mode and the PCIe replay counter ~0.15 ms each, against
// 1–16 µs for the gauges (pynvml, scripts/gpu-collect-cost.sh; docs/validation.md).
//
// Not thread-safe: the backend owns one DeviceState per handle and calls read_device() from one
// thread at a time.
#include <bitset>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "backends/nvml/nvml_mig.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvml {

// How often the slow fields are read: the four ECC counts, retired pages (count and pending), remapped
// rows, the PCIe replay counter, the enforced power limit, persistence mode and MIG mode. The counters
// move at a memory or link error, the settings at an operator's command; a change shows within this
// period, and at the next reading after an XID on the GPU (an uncorrectable ECC error or a row remap
// raises one: 48, 63, 64, 94, 95). The nvidia-smi path reads remapped rows every 30 s. Identity (UUID,
// name, PCI) is read once.
inline constexpr std::chrono::seconds kSlowReadInterval{10};

// How often the costly counters are read: the energy counter (nvmlDeviceGetTotalEnergyConsumption, ~4.1
// ms of CPU per call on an H100 with driver 580; nvmlDeviceGetFieldValues costs the same) and the power
// and thermal violation times (nvmlDeviceGetViolationStatus, 0.8 and 0.7 ms). In between, a reading
// carries their last values as read: true counter values, at most this old (plus one collection period),
// never going backwards. 30 s is dcgm-exporter's default collection period for the same fields. A caller
// that needs them exact at a moment (a job's first and last sample) asks for them (Backend::fresh_counters).
inline constexpr std::chrono::seconds kCounterReadInterval{30};

// One NVML query per entry (a field group that one call answers).
enum class Query : unsigned {
  Name,
  Uuid,
  PciInfo,
  PciInfoLegacy,
  MemoryV2,
  Memory,
  Utilization,
  Temperature,
  PowerUsage,
  PowerLimit,
  Energy,
  FanSpeed,
  ClockGraphics,
  ClockMemory,
  ClockEventReasons,
  PerformanceState,
  MigMode,
  MigDevices,
  EccUncorrected,
  EccCorrectedVolatile,
  EccCorrectedAggregate,
  EccUncorrectedAggregate,
  RetiredPagesSbe,
  RetiredPagesDbe,
  RetiredPagesPending,
  RemappedRows,
  PcieReplay,
  ViolationPower,
  ViolationThermal,
  PersistenceMode,
  ComputeProcesses,
  ComputeProcessesV1,
  GraphicsProcesses,
  GraphicsProcessesV1,
  MpsProcesses,
  Count_,
};

// What we remember about one device between snapshots. Handles stay valid until nvmlShutdown, so
// the backend keys these by handle.
struct DeviceState {
  // Queries that answered NOT_SUPPORTED (or whose struct version the driver rejected): never asked
  // again on this device.
  std::bitset<static_cast<unsigned>(Query::Count_)> unsupported;
  // Identity never changes for a handle: read once, then copied.
  std::optional<std::string> uuid;
  std::optional<std::string> name;
  std::optional<std::string> pci_bus_id;
  // Buffer size for process lists; grows when NVML answers INSUFFICIENT_SIZE, so that a busy GPU
  // costs one call per list, not two.
  unsigned process_capacity = 16;
  // The MIG devices seen at each index (identity read once per instance); used only under MIG.
  MigState mig;
  // The slow fields as last read (only those members are set), copied into the readings in between;
  // set after the first reading that asked them. The backend keeps when that was and the XIDs seen then.
  std::optional<core::GpuReading> slow;
  std::chrono::steady_clock::time_point slow_read_at{};
  std::uint64_t slow_xids = 0;
  // The costly counters as last read (kCounterReadInterval). `counters_read` is false until they were
  // read, and again after a read that failed (an answer other than a value or NOT_SUPPORTED): then they
  // are asked at the next reading. The backend keeps when they were read.
  bool counters_read = false;
  core::Reading<std::uint64_t> energy_mj, power_violation_us, thermal_violation_us;
  std::chrono::steady_clock::time_point counters_read_at{};
};

struct DeviceResult {
  core::GpuReading reading;
  // "GPU 1: cannot list compute processes: …" when a process list could not be read.
  std::vector<std::string> process_problems;
  // "GPU 7: MIG device 2: cannot read its memory: …" when a MIG device could not be read fully.
  std::vector<std::string> mig_problems;
};

// Reads every field of the device with handle `device` at NVML index `index`: the slow fields from
// NVML when `read_slow` is true or none were read yet (then kept in state.slow), from state.slow
// otherwise; the costly counters likewise with `read_counters` and state.counters_read. Field errors blank that field;
// GPU_IS_LOST (or RESET_REQUIRED) from any call stops the queries and marks the GPU Lost (Error), with the identity
// read earlier kept.
DeviceResult read_device(const Api& api, Device device, unsigned index, DeviceState& state, bool read_slow = true,
                         bool read_counters = true);

// The reading of a GPU that cannot be read: Lost for GPU_IS_LOST (message: NVML's text, "GPU is
// lost"), Error otherwise (message: `context` followed by NVML's text and code). Readings absent.
core::GpuReading unreachable_device(const Api& api, unsigned index, Return code, std::string_view context = {});

}  // namespace gf::backends::nvml
