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
// Not thread-safe: the nvml backend calls it from its one snapshot() caller.
#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "backends/nvml/nvml_api.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvml {

// The GPM metrics we ask for, and where each lands in a GpuReading (dcgm-exporter's units: activity
// as a ratio 0..1 where NVML gives percent, throughput in bytes/s where NVML gives MiB/s).
struct GpmMetricSlot {
  unsigned metric_id;  // nvmlGpmMetricId_t
  core::Reading<double> core::GpuReading::*reading;
  double scale;  // NVML's unit to ours
  bool ratio;    // clamped to 0..1 (counters can overshoot 100 % by rounding)
};
inline constexpr unsigned kBytesPerMiBPerSecond = 1024u * 1024u;
inline constexpr std::array<GpmMetricSlot, 12> kGpmMetrics = {{
    {kGpmGraphicsUtil, &core::GpuReading::prof_graphics_active, 0.01, true},
    {kGpmSmUtil, &core::GpuReading::prof_sm_active, 0.01, true},
    {kGpmSmOccupancy, &core::GpuReading::prof_sm_occupancy, 0.01, true},
    {kGpmAnyTensorUtil, &core::GpuReading::prof_tensor_active, 0.01, true},
    {kGpmDramBwUtil, &core::GpuReading::prof_dram_active, 0.01, true},
    {kGpmFp64Util, &core::GpuReading::prof_fp64_active, 0.01, true},
    {kGpmFp32Util, &core::GpuReading::prof_fp32_active, 0.01, true},
    {kGpmFp16Util, &core::GpuReading::prof_fp16_active, 0.01, true},
    {kGpmPcieTxPerSec, &core::GpuReading::prof_pcie_tx_bytes, kBytesPerMiBPerSecond, false},
    {kGpmPcieRxPerSec, &core::GpuReading::prof_pcie_rx_bytes, kBytesPerMiBPerSecond, false},
    {kGpmNvlinkTotalTxPerSec, &core::GpuReading::prof_nvlink_tx_bytes, kBytesPerMiBPerSecond, false},
    {kGpmNvlinkTotalRxPerSec, &core::GpuReading::prof_nvlink_rx_bytes, kBytesPerMiBPerSecond, false},
}};

// The GPM state of one device: whether it has GPM (asked once), its two sample buffers (allocated
// once: sample1 is the previous sample, sample2 the new one, swapped after each metrics call), and the
// readings and note that collections between two GPM samples repeat.
class GpmDevice {
 public:
  GpmDevice(const Api& api, Device device) : api_(api), device_(device) {}
  ~GpmDevice();  // frees the samples: destroy before nvmlShutdown
  GpmDevice(const GpmDevice&) = delete;
  GpmDevice& operator=(const GpmDevice&) = delete;

  // Fills g's prof_* readings and profiling_note for a collection at `now`: takes a GPM sample and
  // computes the metrics when `interval` has passed since the last one, else repeats the last ones.
  // `scratch` is a GpmMetricsGet buffer (13 kB) shared by every device. mig: the GPU is in MIG mode.
  void read(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval, bool mig,
            GpmMetricsGet& scratch, core::GpuReading& g);

 private:
  enum class Support { Unknown, Yes, No };
  void step(std::chrono::steady_clock::time_point now, std::chrono::milliseconds interval, bool mig,
            GpmMetricsGet& scratch);
  void set_all(core::Absent why, std::string note);
  void fail(const char* what, Return code, bool mig);
  bool allocate();
  void free_samples();

  const Api& api_;
  Device device_;
  Support support_ = Support::Unknown;
  GpmSample previous_ = nullptr;                 // sample1 of the next metrics call
  GpmSample next_ = nullptr;                     // sample2
  bool have_previous_ = false;                   // previous_ holds a sample of this device
  std::chrono::steady_clock::time_point due_{};  // earliest time for the next GPM work
  std::array<core::Reading<double>, kGpmMetrics.size()> last_;
  std::string note_;
};

// GPM for every device of one backend: the per-device states (by handle, as the backend keeps its
// other per-device state) and the shared metrics buffer.
class GpmCollector {
 public:
  GpmCollector(const Api& api, std::chrono::milliseconds interval);
  ~GpmCollector();
  GpmCollector(const GpmCollector&) = delete;
  GpmCollector& operator=(const GpmCollector&) = delete;

  // Fills g's profiling readings; call once per healthy device per collection, after read_device.
  void read(Device device, std::chrono::steady_clock::time_point now, core::GpuReading& g);
  // Frees every sample buffer; the backend calls it before nvmlShutdown.
  void clear() { devices_.clear(); }

 private:
  const Api& api_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<GpmMetricsGet> scratch_;
  std::unordered_map<Device, std::unique_ptr<GpmDevice>> devices_;
};

}  // namespace gf::backends::nvml
