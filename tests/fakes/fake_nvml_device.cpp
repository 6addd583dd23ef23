// The fake NVML's device queries: enumeration, identity, gauges and clocks, process lists and
// topology (NvLink, common ancestors). See fake_nvml.hpp and tests/fakes/README.md.
#include "fake_nvml.hpp"

namespace {

using namespace fake_nvml;

struct PciNumbers {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
};

PciNumbers parse_bus_id(const std::string& id) {
  PciNumbers p;
  if (std::sscanf(id.c_str(), "%x:%x:%x.%x", &p.domain, &p.bus, &p.device, &p.function) != 4)
    throw std::runtime_error("bad pci_bus_id " + id);
  return p;
}

template <class Pci>
void fill_pci_numbers(const Gpu& g, Pci* out) {
  const PciNumbers p = parse_bus_id(g.bus_id());
  out->domain = p.domain;
  out->bus = p.bus;
  out->device = p.device;
  out->pciDeviceId =
      static_cast<unsigned>(g.spec.contains("pci_device_id") ? as_u64(g.spec.at("pci_device_id")) : 0x233010DEu);
  out->pciSubSystemId =
      static_cast<unsigned>(g.spec.contains("pci_subsystem_id") ? as_u64(g.spec.at("pci_subsystem_id")) : 0x16C110DEu);
}

void legacy_bus_id(const Gpu& g, char* out, std::size_t size) {
  const PciNumbers p = parse_bus_id(g.bus_id());
  std::snprintf(out, size, "%04X:%02X:%02X.%X", p.domain & 0xFFFFu, p.bus, p.device, p.function);
}

[[maybe_unused]] nvmlReturn_t fill_pci_v3(Gpu& g, nvmlPciInfo_t* out) {  // unused in the old-driver build
  if (out == nullptr) return kInvalidArgument;
  Answer a = g.take_or("pci_bus_id", g.bus_id());
  if (a.code != kSuccess) return a.code;
  std::memset(out, 0, sizeof *out);
  fill_pci_numbers(g, out);
  legacy_bus_id(g, out->busIdLegacy, sizeof out->busIdLegacy);
  std::snprintf(out->busId, sizeof out->busId, "%s", g.bus_id().c_str());
  return kSuccess;
}

nvmlReturn_t fill_pci_v1(Gpu& g, nvmlPciInfo_v1_t* out) {
  if (out == nullptr) return kInvalidArgument;
  Answer a = g.take_or("pci_bus_id", g.bus_id());
  if (a.code != kSuccess) return a.code;
  std::memset(out, 0, sizeof *out);
  fill_pci_numbers(g, out);
  legacy_bus_id(g, out->busId, sizeof out->busId);
  return kSuccess;
}

// NVML's count-in/count-out protocol: too small a *count answers INSUFFICIENT_SIZE with the count
// needed (infos may then be NULL); otherwise the list is written and *count set to its length.
template <class Info>
nvmlReturn_t fill_processes(Gpu& g, const char* key, unsigned* count, Info* infos) {
  if (count == nullptr) return kInvalidArgument;
  Answer a = g.take_or(key, json::array(), true);
  if (a.code != kSuccess) return a.code;
  if (!a.value.is_array()) throw std::runtime_error(std::string(key) + " must be a list of processes");
  const auto needed = static_cast<unsigned>(a.value.size());
  if (*count < needed) {
    *count = needed;
    return kInsufficientSize;
  }
  if (needed > 0 && infos == nullptr) return kInvalidArgument;
  for (unsigned i = 0; i < needed; ++i) {
    const json& p = a.value[i];
    Info info{};
    info.pid = p.at("pid").get<unsigned>();
    const json used = p.value("used_memory_mib", json());
    info.usedGpuMemory = used.is_null() ? kValueNotAvailable : as_u64(used) * kBytesPerMiB;
    if constexpr (std::is_same_v<Info, nvmlProcessInfo_t>) {
      info.gpuInstanceId = p.value("gpu_instance_id", kNoMigInstance);
      info.computeInstanceId = p.value("compute_instance_id", kNoMigInstance);
    }
    infos[i] = info;
  }
  *count = needed;
  return kSuccess;
}

nvmlReturn_t device_count(const char* fn, unsigned* count) {
  return system_call(fn, [&](State& s) {
    ++s.device_calls;  // a device query, as far as the call counter goes
    if (count == nullptr) return kInvalidArgument;
    *count = static_cast<unsigned>(s.gpus.size());
    return kSuccess;
  });
}

nvmlReturn_t handle_by_index(const char* fn, unsigned index, nvmlDevice_t* device) {
  return system_call(fn, [&](State& s) {
    ++s.device_calls;
    if (device == nullptr || index >= s.gpus.size()) return kInvalidArgument;
    Gpu& g = *s.gpus[index];
    if (g.spec.contains("lost")) {
      Answer a = g.take("lost");
      g.lost = a.code == kSuccess && a.value.is_boolean() && a.value.get<bool>();
    }
    if (g.lost) return kGpuIsLost;
    if (g.spec.contains("handle_error")) return g.spec.at("handle_error").get<int>();
    *device = handle_of(g);
    return kSuccess;
  });
}

const char* clock_key(int type, bool max) {
  static const char* const kCurrent[] = {"clock_graphics_mhz", "clock_sm_mhz", "clock_memory_mhz", "clock_video_mhz"};
  static const char* const kMax[] = {"max_clock_graphics_mhz", "max_clock_sm_mhz", "max_clock_memory_mhz",
                                     "max_clock_video_mhz"};
  if (type < 0 || type > 3) return nullptr;
  return max ? kMax[type] : kCurrent[type];
}

nvmlReturn_t clock_info(const char* fn, nvmlDevice_t dev, int type, unsigned* mhz, bool max) {
  return device_call(fn, dev, [&](Gpu& g) {
    const char* key = clock_key(type, max);
    return key ? take_number(g, key, mhz) : kInvalidArgument;
  });
}

nvmlReturn_t clock_reasons(const char* fn, nvmlDevice_t dev, unsigned long long* mask) {
  return device_call(fn, dev, [&](Gpu& g) { return take_number(g, "clock_event_reasons", mask); });
}

// The peer of an active NvLink, or an error code.
nvmlReturn_t nvlink_peer(const State& s, const Gpu& g, unsigned link, const Gpu** peer) {
  if (g.nvlink_peer.empty()) return kNotSupported;
  if (link >= kNvLinkMaxLinks) return kInvalidArgument;
  if (g.nvlink_peer[link] < 0) return kNotSupported;  // documented choice: an inactive link has no peer
  *peer = s.gpus[static_cast<unsigned>(g.nvlink_peer[link])].get();
  return kSuccess;
}

}  // namespace

extern "C" {

// ---- enumeration -------------------------------------------------------------------------------
nvmlReturn_t nvmlDeviceGetCount(unsigned* n) { return device_count("nvmlDeviceGetCount", n); }
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t* d) {
  return handle_by_index("nvmlDeviceGetHandleByIndex", i, d);
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) { return device_count("nvmlDeviceGetCount_v2", n); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  return handle_by_index("nvmlDeviceGetHandleByIndex_v2", i, d);
}
#endif

// ---- identity ----------------------------------------------------------------------------------
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* name, unsigned length) {
  return device_call("nvmlDeviceGetName", dev, [&](Gpu& g) {
    Answer a = g.take_or("name", "NVIDIA Fake GPU");
    return a.code ? a.code : copy_string(a.value.get<std::string>(), name, length);
  });
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* uuid, unsigned length) {
  return device_call("nvmlDeviceGetUUID", dev, [&](Gpu& g) {
    char fallback[64];
    std::snprintf(fallback, sizeof fallback, "GPU-00000000-0000-0000-0000-%012u", g.index);
    Answer a = g.take_or("uuid", fallback);
    return a.code ? a.code : copy_string(a.value.get<std::string>(), uuid, length);
  });
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t dev, nvmlPciInfo_v1_t* pci) {
  return device_call("nvmlDeviceGetPciInfo", dev, [&](Gpu& g) { return fill_pci_v1(g, pci); });
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t dev, nvmlPciInfo_v1_t* pci) {
  return device_call("nvmlDeviceGetPciInfo_v2", dev, [&](Gpu& g) { return fill_pci_v1(g, pci); });
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t* pci) {
  return device_call("nvmlDeviceGetPciInfo_v3", dev, [&](Gpu& g) { return fill_pci_v3(g, pci); });
}
#endif

// ---- gauges ------------------------------------------------------------------------------------
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* m) {
  return device_call("nvmlDeviceGetMemoryInfo", dev, [&](Gpu& g) {
    if (m == nullptr) return kInvalidArgument;
    Answer total = g.take("memory_total_mib"), used = g.take("memory_used_mib");
    Answer reserved = g.take_or("memory_reserved_mib", 0);
    for (const Answer* a : {&total, &used, &reserved})
      if (a->code != kSuccess) return a->code;
    // v1 counts the driver's reservation as used.
    const unsigned long long t = as_u64(total.value), u = as_u64(used.value) + as_u64(reserved.value);
    m->total = t * kBytesPerMiB;
    m->used = u * kBytesPerMiB;
    m->free = (t > u ? t - u : 0) * kBytesPerMiB;
    return kSuccess;
  });
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t* m) {
  return device_call("nvmlDeviceGetMemoryInfo_v2", dev, [&](Gpu& g) {
    if (m == nullptr) return kInvalidArgument;
    if (m->version != kMemoryV2Version) return kArgumentVersionMismatch;
    Answer total = g.take("memory_total_mib"), used = g.take("memory_used_mib");
    Answer reserved = g.take_or("memory_reserved_mib", 0);
    for (const Answer* a : {&total, &used, &reserved})
      if (a->code != kSuccess) return a->code;
    const unsigned long long t = as_u64(total.value), u = as_u64(used.value), r = as_u64(reserved.value);
    m->total = t * kBytesPerMiB;
    m->reserved = r * kBytesPerMiB;
    m->used = u * kBytesPerMiB;
    m->free = (t > u + r ? t - u - r : 0) * kBytesPerMiB;
    return kSuccess;
  });
}
#endif

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t* u) {
  return device_call("nvmlDeviceGetUtilizationRates", dev, [&](Gpu& g) {
    if (u == nullptr) return kInvalidArgument;
    Answer gpu = g.take("utilization_gpu_pct"), memory = g.take("utilization_memory_pct");
    if (gpu.code != kSuccess) return gpu.code;
    if (memory.code != kSuccess) return memory.code;
    u->gpu = static_cast<unsigned>(as_u64(gpu.value));
    u->memory = static_cast<unsigned>(as_u64(memory.value));
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned* c) {
  return device_call("nvmlDeviceGetTemperature", dev,
                     [&](Gpu& g) { return sensor == 0 ? take_number(g, "temperature_c", c) : kInvalidArgument; });
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned* mw) {
  return device_call("nvmlDeviceGetPowerUsage", dev,
                     [&](Gpu& g) { return take_number(g, "power_draw_w", mw, 1000.0); });
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned* mw) {
  return device_call("nvmlDeviceGetEnforcedPowerLimit", dev,
                     [&](Gpu& g) { return take_number(g, "power_limit_w", mw, 1000.0); });
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long* mj) {
  return device_call("nvmlDeviceGetTotalEnergyConsumption", dev,
                     [&](Gpu& g) { return take_number(g, "energy_mj", mj); });
}
#endif
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t dev, unsigned* pct) {
  return device_call("nvmlDeviceGetFanSpeed", dev, [&](Gpu& g) { return take_number(g, "fan_pct", pct); });
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned* mhz) {
  return clock_info("nvmlDeviceGetClockInfo", dev, type, mhz, false);
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev, int type, unsigned* mhz) {
  return clock_info("nvmlDeviceGetMaxClockInfo", dev, type, mhz, true);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long* mask) {
  return clock_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", dev, mask);
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long* mask) {
  return clock_reasons("nvmlDeviceGetCurrentClocksEventReasons", dev, mask);
}
#endif
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, int* p) {
  return device_call("nvmlDeviceGetPerformanceState", dev,
                     [&](Gpu& g) { return take_number(g, "performance_state", p); });
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int* mode) {
  return device_call("nvmlDeviceGetPersistenceMode", dev,
                     [&](Gpu& g) { return take_number(g, "persistence_mode", mode); });
}

// ---- processes ---------------------------------------------------------------------------------
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned* count, nvmlProcessInfo_v1_t* infos) {
  return device_call("nvmlDeviceGetComputeRunningProcesses", dev,
                     [&](Gpu& g) { return fill_processes(g, "compute_processes", count, infos); });
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t dev, unsigned* count, nvmlProcessInfo_v1_t* infos) {
  return device_call("nvmlDeviceGetGraphicsRunningProcesses", dev,
                     [&](Gpu& g) { return fill_processes(g, "graphics_processes", count, infos); });
}
#if !FAKE_NVML_OLD_DRIVER
#define FAKE_NVML_PROCESS_LIST(fn, key)                                                         \
  nvmlReturn_t fn(nvmlDevice_t dev, unsigned* count, nvmlProcessInfo_t* infos) {                \
    return device_call(#fn, dev, [&](Gpu& g) { return fill_processes(g, key, count, infos); }); \
  }
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v2, "compute_processes")
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v3, "compute_processes")
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, "graphics_processes")
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, "graphics_processes")
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, "mps_processes")
FAKE_NVML_PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, "mps_processes")
#undef FAKE_NVML_PROCESS_LIST
#endif

// ---- topology ----------------------------------------------------------------------------------
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int* level) {
  return device_call("nvmlDeviceGetTopologyCommonAncestor", a, [&](Gpu& ga) {
    State& s = state();  // already locked by device_call
    Gpu* gb = find_gpu(s, b);
    if (gb == nullptr || level == nullptr) return kInvalidArgument;
    if (gb->lost) return kGpuIsLost;
    if (ga.index == gb->index) {
      *level = 0;  // NVML_TOPOLOGY_INTERNAL
      return kSuccess;
    }
    auto it = s.levels.find({std::min(ga.index, gb->index), std::max(ga.index, gb->index)});
    *level = it == s.levels.end() ? s.default_level : it->second;
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned link, int* active) {
  return device_call("nvmlDeviceGetNvLinkState", dev, [&](Gpu& g) {
    if (active == nullptr) return kInvalidArgument;
    if (g.nvlink_peer.empty()) return kNotSupported;
    if (link >= kNvLinkMaxLinks) return kInvalidArgument;
    *active = g.nvlink_peer[link] >= 0 ? 1 : 0;
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t dev, unsigned link, nvmlPciInfo_v1_t* pci) {
  return device_call("nvmlDeviceGetNvLinkRemotePciInfo", dev, [&](Gpu& g) {
    const Gpu* peer = nullptr;
    if (nvmlReturn_t r = nvlink_peer(state(), g, link, &peer); r != kSuccess) return r;
    if (pci == nullptr) return kInvalidArgument;
    std::memset(pci, 0, sizeof *pci);
    fill_pci_numbers(*peer, pci);
    legacy_bus_id(*peer, pci->busId, sizeof pci->busId);
    return kSuccess;
  });
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned link, nvmlPciInfo_t* pci) {
  return device_call("nvmlDeviceGetNvLinkRemotePciInfo_v2", dev, [&](Gpu& g) {
    const Gpu* peer = nullptr;
    if (nvmlReturn_t r = nvlink_peer(state(), g, link, &peer); r != kSuccess) return r;
    if (pci == nullptr) return kInvalidArgument;
    std::memset(pci, 0, sizeof *pci);
    fill_pci_numbers(*peer, pci);
    legacy_bus_id(*peer, pci->busIdLegacy, sizeof pci->busIdLegacy);
    std::snprintf(pci->busId, sizeof pci->busId, "%s", peer->bus_id().c_str());
    return kSuccess;
  });
}
#endif

}  // extern "C"
