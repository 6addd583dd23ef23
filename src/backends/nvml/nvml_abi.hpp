#pragma once
// Our own declaration of the part of NVML's C ABI that gpufleet uses. No NVIDIA header is needed to
// build: the library is opened at run time (nvml_api.hpp) and every symbol is resolved by name.
// Layouts follow NVML's published nvml.h (x86-64, natural alignment); the static_asserts pin them.
//
// Internal to the nvml backend; not part of gpufleet's public interface.
#include <cstddef>
#include <cstdint>

namespace gf::backends::nvml {

using Return = int;  // nvmlReturn_t: a C enum, int-sized
struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t: opaque, valid until nvmlShutdown
struct EventSetOpaque;
using EventSet = EventSetOpaque*;  // nvmlEventSet_t: opaque, valid until nvmlEventSetFree

// nvmlReturn_t values we act on.
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

// Enum arguments (C enums, passed as int).
inline constexpr int kTemperatureGpu = 0;  // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
inline constexpr int kClockGraphics = 0;   // nvmlClockType_t
inline constexpr int kClockMemory = 2;
inline constexpr int kEccCorrected = 0;  // nvmlMemoryErrorType_t
inline constexpr int kEccUncorrected = 1;
inline constexpr int kEccVolatile = 0;   // nvmlEccCounterType_t
inline constexpr int kEccAggregate = 1;  // over the board's life (kept in the InfoROM)
// nvmlPageRetirementCause_t
inline constexpr int kRetiredForSingleBit = 0;  // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
inline constexpr int kRetiredForDoubleBit = 1;  // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
// nvmlPerfPolicyType_t, for nvmlDeviceGetViolationStatus
inline constexpr int kPerfPolicyPower = 0;    // NVML_PERF_POLICY_POWER
inline constexpr int kPerfPolicyThermal = 1;  // NVML_PERF_POLICY_THERMAL
// Event type bits (nvmlEventType*): a mask of unsigned long long.
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
inline constexpr int kPstateUnknown = 32;                              // nvmlPstates_t NVML_PSTATE_UNKNOWN
inline constexpr int kFeatureEnabled = 1;                              // nvmlEnableState_t
inline constexpr unsigned kMigEnabled = 1;                             // NVML_DEVICE_MIG_ENABLE

// nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs on the PCIe tree; lower is closer.
inline constexpr int kTopologyInternal = 0;     // same board (multi-GPU card)
inline constexpr int kTopologySingle = 10;      // one PCIe switch
inline constexpr int kTopologyMultiple = 20;    // several PCIe switches, no host bridge
inline constexpr int kTopologyHostBridge = 30;  // same host bridge
inline constexpr int kTopologyNode = 40;        // same NUMA node
inline constexpr int kTopologySystem = 50;      // across CPU sockets
// NVML_NVLINK_MAX_LINKS: NvLink link numbers run 0..17.
inline constexpr unsigned kNvLinkMaxLinks = 18;

// nvmlProcessInfo_t's gpuInstanceId / computeInstanceId when MIG is off (or the driver does not say).
inline constexpr unsigned kNoMigInstance = 0xFFFFFFFFu;
// A MIG device's name is "<GPU name> MIG <profile>", e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
inline constexpr char kMigNameMarker[] = " MIG ";

// usedGpuMemory when the driver cannot tell (common inside containers).
inline constexpr unsigned long long kValueNotAvailable = 0xFFFFFFFFFFFFFFFFULL;

inline constexpr unsigned kDriverVersionLength = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
inline constexpr unsigned kDeviceStringLength = 96;   // NVML_DEVICE_NAME_V2 / UUID_V2 buffer size

struct Memory {  // nvmlMemory_t; used includes memory the driver reserves
  unsigned long long total_bytes;
  unsigned long long free_bytes;
  unsigned long long used_bytes;
};

struct MemoryV2 {  // nvmlMemory_v2_t; used excludes reserved
  unsigned int version;
  unsigned long long total_bytes;
  unsigned long long reserved_bytes;
  unsigned long long free_bytes;
  unsigned long long used_bytes;
};
// The struct version tag NVML checks; anything else answers ARGUMENT_VERSION_MISMATCH.
inline constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);

struct Utilization {  // nvmlUtilization_t, percent
  unsigned int gpu_pct;
  unsigned int memory_pct;
};

// nvmlProcessInfo_t as filled by the _v2 and _v3 process-list functions.
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long used_gpu_memory_bytes;  // or kValueNotAvailable
  unsigned int gpu_instance_id;              // 0xFFFFFFFF when MIG is off
  unsigned int compute_instance_id;
};

// nvmlProcessInfo_v1_t as filled by the unsuffixed (v1) process-list functions.
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory_bytes;
};

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3.
struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;  // device id << 16 | vendor id
  unsigned int pci_subsystem_id;
  char bus_id[32];  // "00000000:1B:00.0"
};

// The older nvmlPciInfo_t filled by nvmlDeviceGetPciInfo_v2 and nvmlDeviceGetPciInfo: a 16-byte bus
// id, then the same numbers at the same offsets as PciInfo, then reserved words.
struct PciInfoLegacy {
  char bus_id[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  unsigned int reserved[4];
};

// nvmlViolationTime_t: how long a policy (power, thermal) held the clocks down.
struct ViolationTime {
  unsigned long long reference_time_us;  // when the counter was read, µs since the epoch
  unsigned long long violation_time_ns;  // time held down since driver load, ns
};

// nvmlEventData_t as filled by nvmlEventSetWait_v2.
struct EventData {
  Device device;                  // the GPU the event is about
  unsigned long long event_type;  // one nvmlEventType* bit
  unsigned long long event_data;  // for an XID event: the XID number
  unsigned int gpu_instance_id;   // MIG: the instance, 0xFFFFFFFF otherwise
  unsigned int compute_instance_id;
};

static_assert(sizeof(Memory) == 24);
static_assert(sizeof(ViolationTime) == 16);
static_assert(sizeof(EventData) == 32);
static_assert(sizeof(MemoryV2) == 40);
static_assert(sizeof(Utilization) == 8);
static_assert(sizeof(ProcessInfoV2) == 24);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(PciInfo) == 68);
static_assert(sizeof(PciInfoLegacy) == 52);

// NVML GPM (GPU performance monitoring; Hopper and later): the driver's counters read into sample
// buffers, and metrics computed from two samples of one device. Layouts and numbers from nvml.h's
// "GPM" groups.
struct GpmSampleOpaque;
using GpmSample = GpmSampleOpaque*;  // nvmlGpmSample_t: opaque, from nvmlGpmSampleAlloc

inline constexpr unsigned kGpmSupportVersion = 1;     // NVML_GPM_SUPPORT_VERSION
inline constexpr unsigned kGpmMetricsGetVersion = 1;  // NVML_GPM_METRICS_GET_VERSION
// NVML_GPM_METRIC_MAX as of CUDA 13's nvml.h (98 in CUDA 12.0's, with the same struct version 1). The
// driver reads numMetrics entries, so any size that holds the metrics we ask for is understood.
inline constexpr unsigned kGpmMetricMax = 333;

struct GpmSupport {      // nvmlGpmSupport_t
  unsigned int version;  // kGpmSupportVersion
  unsigned int is_supported_device;
};

struct GpmMetric {         // nvmlGpmMetric_t
  unsigned int metric_id;  // IN: an nvmlGpmMetricId_t below
  Return nvml_return;      // OUT: this metric's status; value is valid only when kSuccess
  double value;            // OUT: percent or MiB/s, as the id says
  struct {
    char* short_name;  // OUT: may be null
    char* long_name;
    char* unit;
  } metric_info;
};

struct GpmMetricsGet {       // nvmlGpmMetricsGet_t
  unsigned int version;      // kGpmMetricsGetVersion
  unsigned int num_metrics;  // entries of metrics[] to compute
  GpmSample sample1;         // the earlier sample
  GpmSample sample2;         // the later sample, of the same device
  GpmMetric metrics[kGpmMetricMax];
};

// nvmlGpmMetricId_t values we ask for. Activity is percent (0..100), throughput MiB/s.
inline constexpr unsigned kGpmGraphicsUtil = 1;          // NVML_GPM_METRIC_GRAPHICS_UTIL
inline constexpr unsigned kGpmSmUtil = 2;                // NVML_GPM_METRIC_SM_UTIL
inline constexpr unsigned kGpmSmOccupancy = 3;           // NVML_GPM_METRIC_SM_OCCUPANCY
inline constexpr unsigned kGpmAnyTensorUtil = 5;         // NVML_GPM_METRIC_ANY_TENSOR_UTIL
inline constexpr unsigned kGpmDramBwUtil = 10;           // NVML_GPM_METRIC_DRAM_BW_UTIL
inline constexpr unsigned kGpmFp64Util = 11;             // NVML_GPM_METRIC_FP64_UTIL
inline constexpr unsigned kGpmFp32Util = 12;             // NVML_GPM_METRIC_FP32_UTIL
inline constexpr unsigned kGpmFp16Util = 13;             // NVML_GPM_METRIC_FP16_UTIL
inline constexpr unsigned kGpmPcieTxPerSec = 20;         // NVML_GPM_METRIC_PCIE_TX_PER_SEC
inline constexpr unsigned kGpmPcieRxPerSec = 21;         // NVML_GPM_METRIC_PCIE_RX_PER_SEC
inline constexpr unsigned kGpmNvlinkTotalRxPerSec = 60;  // NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC
inline constexpr unsigned kGpmNvlinkTotalTxPerSec = 61;  // NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC

static_assert(sizeof(GpmSample) == 8);  // NOLINT(bugprone-sizeof-expression): nvmlGpmSample_t is a handle
static_assert(sizeof(GpmSupport) == 8);
static_assert(sizeof(GpmMetric) == 40);
static_assert(offsetof(GpmMetric, value) == 8 && offsetof(GpmMetric, metric_info) == 16);
static_assert(offsetof(GpmMetricsGet, sample1) == 8 && offsetof(GpmMetricsGet, metrics) == 24);
static_assert(sizeof(GpmMetricsGet) == 24 + kGpmMetricMax * sizeof(GpmMetric));

// Function types, grouped by shape.
using FnVoid = Return();
using FnErrorString = const char*(Return);
using FnSystemString = Return(char*, unsigned);
using FnSystemInt = Return(int*);
using FnCount = Return(unsigned*);
using FnHandleByIndex = Return(unsigned, Device*);
using FnDeviceString = Return(Device, char*, unsigned);
using FnDevicePci = Return(Device, PciInfo*);
using FnDevicePciLegacy = Return(Device, PciInfoLegacy*);
using FnDeviceMemory = Return(Device, Memory*);
using FnDeviceMemoryV2 = Return(Device, MemoryV2*);
using FnDeviceUtilization = Return(Device, Utilization*);
using FnDeviceUnsigned = Return(Device, unsigned*);
using FnDeviceUnsignedBy = Return(Device, int, unsigned*);  // (sensor or clock type, value)
using FnDeviceU64 = Return(Device, unsigned long long*);
using FnDeviceInt = Return(Device, int*);
using FnDeviceMig = Return(Device, unsigned*, unsigned*);  // (current, pending)
using FnDeviceChild = Return(Device, unsigned, Device*);   // (index, MIG device handle)
using FnDeviceEcc = Return(Device, int, int, unsigned long long*);
using FnDeviceProcesses = Return(Device, unsigned*, ProcessInfoV2*);
using FnDeviceProcessesV1 = Return(Device, unsigned*, ProcessInfoV1*);
using FnDevicePairLevel = Return(Device, Device, int*);                            // (a, b, nvmlGpuTopologyLevel_t)
using FnDeviceLinkState = Return(Device, unsigned, int*);                          // (link, nvmlEnableState_t)
using FnDeviceLinkPci = Return(Device, unsigned, PciInfo*);                        // (link, peer)
using FnDeviceLinkPciLegacy = Return(Device, unsigned, PciInfoLegacy*);            // (link, peer), old layout
using FnDeviceRetiredPages = Return(Device, int, unsigned*, unsigned long long*);  // (cause, count in/out, addresses)
using FnDeviceEnableState = Return(Device, int*);                                  // nvmlEnableState_t out
using FnDeviceRemappedRows = Return(Device, unsigned*, unsigned*, unsigned*, unsigned*);  // corr, unc, pending, failure
using FnDeviceViolation = Return(Device, int, ViolationTime*);                            // (nvmlPerfPolicyType_t, out)
using FnEventSetCreate = Return(EventSet*);
using FnEventSetFree = Return(EventSet);
using FnDeviceRegisterEvents = Return(Device, unsigned long long, EventSet);  // (device, types, set)
using FnEventSetWait = Return(EventSet, EventData*, unsigned);                // (set, out, timeout ms)
using FnGpmSupport = Return(Device, GpmSupport*);
using FnGpmSampleAlloc = Return(GpmSample*);
using FnGpmSampleFree = Return(GpmSample);
using FnGpmSampleGet = Return(Device, GpmSample);
using FnGpmMetricsGet = Return(GpmMetricsGet*);
// nvmlGpmMigSampleGet(parent device, GPU instance id, sample): a GPM sample of one MIG GPU instance,
// taken on the PARENT's handle (R525+, Hopper and later); paired with nvmlGpmMetricsGet as usual.
using FnGpmMigSampleGet = Return(Device, unsigned, GpmSample);

// Every entry point, once: X(member, function type, Required|Optional, names in order of preference).
// The loader tries the names left to right; a later name must have the same signature (a different
// struct layout gets its own entry, e.g. pci_info vs pci_info_legacy). A missing Required entry
// makes the library unusable; a missing Optional one blanks its fields (NotSupported).
#define GF_NVML_ENTRY_POINTS(X)                                                                                        \
  X(init, FnVoid, Required, "nvmlInit_v2", "nvmlInit")                                                                 \
  X(shutdown, FnVoid, Required, "nvmlShutdown")                                                                        \
  X(error_string, FnErrorString, Required, "nvmlErrorString")                                                          \
  X(device_count, FnCount, Required, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")                                    \
  X(device_handle, FnHandleByIndex, Required, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex")           \
  X(driver_version, FnSystemString, Optional, "nvmlSystemGetDriverVersion")                                            \
  X(cuda_driver_version, FnSystemInt, Optional, "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion") \
  X(name, FnDeviceString, Optional, "nvmlDeviceGetName")                                                               \
  X(uuid, FnDeviceString, Optional, "nvmlDeviceGetUUID")                                                               \
  X(pci_info, FnDevicePci, Optional, "nvmlDeviceGetPciInfo_v3")                                                        \
  X(pci_info_legacy, FnDevicePciLegacy, Optional, "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo")                   \
  X(memory_info_v2, FnDeviceMemoryV2, Optional, "nvmlDeviceGetMemoryInfo_v2")                                          \
  X(memory_info, FnDeviceMemory, Optional, "nvmlDeviceGetMemoryInfo")                                                  \
  X(utilization, FnDeviceUtilization, Optional, "nvmlDeviceGetUtilizationRates")                                       \
  X(temperature, FnDeviceUnsignedBy, Optional, "nvmlDeviceGetTemperature")                                             \
  X(power_usage, FnDeviceUnsigned, Optional, "nvmlDeviceGetPowerUsage")                                                \
  X(power_limit, FnDeviceUnsigned, Optional, "nvmlDeviceGetEnforcedPowerLimit")                                        \
  X(energy, FnDeviceU64, Optional, "nvmlDeviceGetTotalEnergyConsumption")                                              \
  X(fan_speed, FnDeviceUnsigned, Optional, "nvmlDeviceGetFanSpeed")                                                    \
  X(clock, FnDeviceUnsignedBy, Optional, "nvmlDeviceGetClockInfo")                                                     \
  X(clock_event_reasons, FnDeviceU64, Optional, "nvmlDeviceGetCurrentClocksEventReasons",                              \
    "nvmlDeviceGetCurrentClocksThrottleReasons")                                                                       \
  X(performance_state, FnDeviceInt, Optional, "nvmlDeviceGetPerformanceState")                                         \
  X(mig_mode, FnDeviceMig, Optional, "nvmlDeviceGetMigMode")                                                           \
  X(max_mig_devices, FnDeviceUnsigned, Optional, "nvmlDeviceGetMaxMigDeviceCount")                                     \
  X(mig_device_handle, FnDeviceChild, Optional, "nvmlDeviceGetMigDeviceHandleByIndex")                                 \
  X(gpu_instance_id, FnDeviceUnsigned, Optional, "nvmlDeviceGetGpuInstanceId")                                         \
  X(compute_instance_id, FnDeviceUnsigned, Optional, "nvmlDeviceGetComputeInstanceId")                                 \
  X(ecc_total, FnDeviceEcc, Optional, "nvmlDeviceGetTotalEccErrors")                                                   \
  X(retired_pages, FnDeviceRetiredPages, Optional, "nvmlDeviceGetRetiredPages")                                        \
  X(retired_pages_pending, FnDeviceEnableState, Optional, "nvmlDeviceGetRetiredPagesPendingStatus")                    \
  X(remapped_rows, FnDeviceRemappedRows, Optional, "nvmlDeviceGetRemappedRows")                                        \
  X(pcie_replay_counter, FnDeviceUnsigned, Optional, "nvmlDeviceGetPcieReplayCounter")                                 \
  X(violation_status, FnDeviceViolation, Optional, "nvmlDeviceGetViolationStatus")                                     \
  X(event_set_create, FnEventSetCreate, Optional, "nvmlEventSetCreate")                                                \
  X(supported_event_types, FnDeviceU64, Optional, "nvmlDeviceGetSupportedEventTypes")                                  \
  X(register_events, FnDeviceRegisterEvents, Optional, "nvmlDeviceRegisterEvents")                                     \
  X(event_set_wait, FnEventSetWait, Optional, "nvmlEventSetWait_v2")                                                   \
  X(event_set_free, FnEventSetFree, Optional, "nvmlEventSetFree")                                                      \
  X(persistence_mode, FnDeviceInt, Optional, "nvmlDeviceGetPersistenceMode")                                           \
  X(compute_processes, FnDeviceProcesses, Optional, "nvmlDeviceGetComputeRunningProcesses_v3",                         \
    "nvmlDeviceGetComputeRunningProcesses_v2")                                                                         \
  X(compute_processes_v1, FnDeviceProcessesV1, Optional, "nvmlDeviceGetComputeRunningProcesses")                       \
  X(graphics_processes, FnDeviceProcesses, Optional, "nvmlDeviceGetGraphicsRunningProcesses_v3",                       \
    "nvmlDeviceGetGraphicsRunningProcesses_v2")                                                                        \
  X(graphics_processes_v1, FnDeviceProcessesV1, Optional, "nvmlDeviceGetGraphicsRunningProcesses")                     \
  X(mps_processes, FnDeviceProcesses, Optional, "nvmlDeviceGetMPSComputeRunningProcesses_v3",                          \
    "nvmlDeviceGetMPSComputeRunningProcesses_v2")                                                                      \
  X(topology_common_ancestor, FnDevicePairLevel, Optional, "nvmlDeviceGetTopologyCommonAncestor")                      \
  X(nvlink_state, FnDeviceLinkState, Optional, "nvmlDeviceGetNvLinkState")                                             \
  X(nvlink_remote_pci, FnDeviceLinkPci, Optional, "nvmlDeviceGetNvLinkRemotePciInfo_v2")                               \
  X(nvlink_remote_pci_legacy, FnDeviceLinkPciLegacy, Optional, "nvmlDeviceGetNvLinkRemotePciInfo")                     \
  X(gpm_query_device_support, FnGpmSupport, Optional, "nvmlGpmQueryDeviceSupport")                                     \
  X(gpm_sample_alloc, FnGpmSampleAlloc, Optional, "nvmlGpmSampleAlloc")                                                \
  X(gpm_sample_free, FnGpmSampleFree, Optional, "nvmlGpmSampleFree")                                                   \
  X(gpm_sample_get, FnGpmSampleGet, Optional, "nvmlGpmSampleGet")                                                      \
  X(gpm_metrics_get, FnGpmMetricsGet, Optional, "nvmlGpmMetricsGet")                                                   \
  X(gpm_mig_sample_get, FnGpmMigSampleGet, Optional, "nvmlGpmMigSampleGet")

}  // namespace gf::backends::nvml
