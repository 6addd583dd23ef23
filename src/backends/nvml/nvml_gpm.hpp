#pragma once
// NVML GPM (GPU performance monitoring, Hopper and later): what a GPU's "utilization" is made of —
// SM activity and occupancy, tensor and FP pipes, DRAM, PCIe and NVLink throughput — as the
// averages between two GPM samples of the device.
//
// Cost (a real H100, driver 580): nvmlGpmSampleGet ~77 µs, nvmlGpmMetricsGet for our 12 metrics
// ~1.6 ms. So GPM runs at its own interval (BackendOptions::gpm_interval, 10 s by default), not on
// every collection: each GPM reading still averages the whole time since the previous sample, so
// nothing is missed, only time resolution is coarser. Collections in between keep the last values.
//
// In MIG mode NVML keeps GPM per GPU instance: each instance is sampled with nvmlGpmMigSampleGet on the
// parent's handle (support is asked on the parent with nvmlGpmQueryDeviceSupport), with sample buffers
// of its own, at the same interval; its metrics land on each of its MIG devices (compute instances). Cost:
// one sample and one metrics call per GPU instance per GPM interval (7 per H100 in 1g slices).
//
// Not thread-safe: the nvml backend calls it from its one snapshot() caller.
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvml {

// The GPM metrics we ask for, and where each lands in a GpuReading and in a MigInstance (dcgm-exporter's
// units: activity as a ratio 0..1 where NVML gives percent, throughput in bytes/s where NVML gives MiB/s).
struct GpmMetricSlot {
  unsigned metric_id;  // nvmlGpmMetricId_t
  core::Reading<double> core::GpuReading::*reading;
  core::Reading<double> core::MigInstance::*mig_reading;
  double scale;  // NVML's unit to ours
  bool ratio;    // clamped to 0..1 (counters can overshoot 100 % by rounding)
};
inline constexpr unsigned kBytesPerMiBPerSecond = 1024u * 1024u;
inline constexpr std::array<GpmMetricSlot, 12> kGpmMetrics = {{
    {kGpmGraphicsUtil, &core::GpuReading::prof_graphics_active, &core::MigInstance::prof_graphics_active, 0.01, true},
    {kGpmSmUtil, &core::GpuReading::prof_sm_active, &core::MigInstance::prof_sm_active, 0.01, true},
    {kGpmSmOccupancy, &core::GpuReading::prof_sm_occupancy, &core::MigInstance::prof_sm_occupancy, 0.01, true},
    {kGpmAnyTensorUtil, &core::GpuReading::prof_tensor_active, &core::MigInstance::prof_tensor_active, 0.01, true},
    {kGpmDramBwUtil, &core::GpuReading::prof_dram_active, &core::MigInstance::prof_dram_active, 0.01, true},
    {kGpmFp64Util, &core::GpuReading::prof_fp64_active, &core::MigInstance::prof_fp64_active, 0.01, true},
    {kGpmFp32Util, &core::GpuReading::prof_fp32_active, &core::MigInstance::prof_fp32_active, 0.01, true},
    {kGpmFp16Util, &core::GpuReading::prof_fp16_active, &core::MigInstance::prof_fp16_active, 0.01, true},
    {kGpmPcieTxPerSec, &core::GpuReading::prof_pcie_tx_bytes, &core::MigInstance::prof_pcie_tx_bytes,
     kBytesPerMiBPerSecond, false},
    {kGpmPcieRxPerSec, &core::GpuReading::prof_pcie_rx_bytes, &core::MigInstance::prof_pcie_rx_bytes,
     kBytesPerMiBPerSecond, false},
    {kGpmNvlinkTotalTxPerSec, &core::GpuReading::prof_nvlink_tx_bytes, &core::MigInstance::prof_nvlink_tx_bytes,
     kBytesPerMiBPerSecond, false},
    {kGpmNvlinkTotalRxPerSec, &core::GpuReading::prof_nvlink_rx_bytes, &core::MigInstance::prof_nvlink_rx_bytes,
     kBytesPerMiBPerSecond, false},
}};

// The GPM state of one sampled unit: a whole GPU, or one MIG GPU instance of a GPU (sampled with
// nvmlGpmMigSampleGet on the PARENT's handle and the GPU instance id). Whether the GPU has GPM (asked
// once, on the parent), its two sample buffers (allocated once: sample1 is the previous sample, sample2
// the new one, swapped after each metrics call; both always hold samples of this unit only), and the
// readings and note that collections between two GPM samples repeat.
class GpmDevice {
 public:
  // gpu_instance: the MIG GPU instance id to sample; none: the whole GPU.
  GpmDevice(const Api& api, Device device, std::optional<unsigned> gpu_instance = std::nullopt)
      : api_(api), device_(device), gpu_instance_(gpu_instance) {}
  ~GpmDevice();  // frees the samples: destroy before nvmlShutdown
  GpmDevice(const GpmDevice&) = delete;
  GpmDevice& operator=(const GpmDevice&) = delete;

  // Brings the readings and note up to date for a collection at `now`: takes a GPM sample and computes
  // the metrics when `interval` has passed since the last one, else keeps the last ones. `scratch` is a
  // GpmMetricsGet buffer (13 kB) shared by every unit. mig: the GPU is in MIG mode.
  void update(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval, bool mig,
              GpmMetricsGet& scratch);
  // Copies the readings and note into a GPU's or a MIG instance's profiling fields.
  void fill(core::GpuReading& g) const;
  void fill(core::MigInstance& m) const;

 private:
  enum class Support { Unknown, Yes, No };
  void step(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval, bool mig,
            GpmMetricsGet& scratch);
  bool ask_support(bool mig);
  Return take_sample();
  void set_all(core::Absent why, std::string note);
  void fail(const char* what, Return code, bool mig);
  bool allocate();
  void free_samples();

  const Api& api_;
  Device device_;
  std::optional<unsigned> gpu_instance_;
  Support support_ = Support::Unknown;
  GpmSample previous_ = nullptr;                 // sample1 of the next metrics call
  GpmSample next_ = nullptr;                     // sample2
  bool have_previous_ = false;                   // previous_ holds a sample of this unit
  std::chrono::steady_clock::time_point due_{};  // earliest time for the next GPM work
  std::array<core::Reading<double>, kGpmMetrics.size()> last_;
  std::string note_;
};

// The GPM state of one MIG GPU instance, and what tells it from a later instance that reuses its id
// (a re-partitioned GPU): the profile and the UUID of its first MIG device. A changed identity drops the
// state (and frees its samples) so that no metrics call pairs samples of two different instances.
struct GpmInstance {
  unsigned gpu_instance_id = 0;
  std::string identity;
  std::unique_ptr<GpmDevice> gpm;
};

// GPM for every device of one backend: per device (by handle, as the backend keeps its other
// per-device state) the whole GPU's state and, in MIG mode, one state per GPU instance; and the shared
// metrics buffer.
class GpmCollector {
 public:
  GpmCollector(const Api& api, std::chrono::milliseconds interval);
  ~GpmCollector();
  GpmCollector(const GpmCollector&) = delete;
  GpmCollector& operator=(const GpmCollector&) = delete;

  // Fills g's profiling readings, and those of each of g.mig_instances; call once per healthy device per
  // collection, after read_device (which fills mig_instances). GPU instances no longer listed lose their
  // state (their samples are freed).
  void read(Device device, std::chrono::steady_clock::time_point now, core::GpuReading& g);
  // Frees every sample buffer; the backend calls it before nvmlShutdown.
  void clear() { devices_.clear(); }

 private:
  struct DeviceGpm {
    std::unique_ptr<GpmDevice> whole;
    std::vector<GpmInstance> instances;  // by first appearance in mig_instances
  };
  void read_instances(Device device, std::chrono::steady_clock::time_point now, DeviceGpm& d,
                      std::vector<core::MigInstance>& instances);

  const Api& api_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<GpmMetricsGet> scratch_;
  std::unordered_map<Device, DeviceGpm> devices_;
};

}  // namespace gf::backends::nvml
