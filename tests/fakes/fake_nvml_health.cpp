// The fake NVML's health and MIG: ECC, retired pages, row remapping, PCIe replays, violations, XID
// events (event sets, their waits and the injection hook), MIG mode and MIG device handles. See
// fake_nvml.hpp and tests/fakes/README.md.
#include "fake_nvml.hpp"

namespace {

using namespace fake_nvml;

// ---- health helpers (ECC, retired pages, remapping, PCIe, violations, events) ------------------
// The answer of a GPU's remapped-rows keys: NOT_SUPPORTED when none is given; a key left out of a
// GPU that gives others reads 0.
[[maybe_unused]] nvmlReturn_t remapped_rows(Gpu& g, unsigned* corr, unsigned* unc, unsigned* pending,
                                            unsigned* failure) {
  if (corr == nullptr || unc == nullptr || pending == nullptr || failure == nullptr) return kInvalidArgument;
  static const char* const kKeys[] = {"remapped_rows_correctable", "remapped_rows_uncorrectable",
                                      "remapped_rows_pending", "remapped_rows_failure"};
  if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return g.spec.contains(k); }))
    return kNotSupported;
  unsigned* out[] = {corr, unc, pending, failure};
  for (int i = 0; i < 4; ++i) {
    Answer a = g.take_or(kKeys[i], 0);
    if (a.code != kSuccess) return a.code;
    *out[i] = static_cast<unsigned>(as_u64(a.value));
  }
  return kSuccess;
}

// nvmlDeviceGetRetiredPages: the count protocol of the process lists; the addresses are made up.
nvmlReturn_t retired_pages(Gpu& g, int cause, unsigned* count, unsigned long long* addresses) {
  if (count == nullptr || (cause != 0 && cause != 1)) return kInvalidArgument;
  Answer a = g.take(cause == 0 ? "retired_pages_sbe" : "retired_pages_dbe");
  if (a.code != kSuccess) return a.code;
  const auto n = static_cast<unsigned>(as_u64(a.value));
  if (addresses == nullptr || *count < n) {
    *count = n;
    return n == 0 ? kSuccess : kInsufficientSize;
  }
  for (unsigned i = 0; i < n; ++i) addresses[i] = 0x100000ULL * (i + 1);
  *count = n;
  return kSuccess;
}

EventSetFake* find_set(State& s, nvmlEventSet_t set) {
  for (auto& e : s.event_sets)
    if (reinterpret_cast<nvmlEventSet_t>(e.get()) == set) return e.get();
  return nullptr;
}

// Queues an event for every set `g` is registered in with `type`, due at `due`.
void queue_event(State& s, Gpu& g, unsigned long long type, unsigned long long data,
                 std::chrono::steady_clock::time_point due) {
  for (auto& set : s.event_sets)
    for (const auto& [gpu, types] : set->registered)
      if (gpu == &g && (types & type) != 0) {
        auto at = std::upper_bound(set->pending.begin(), set->pending.end(), due,
                                   [](auto t, const PendingEvent& e) { return t < e.due; });
        set->pending.insert(at, PendingEvent{due, &g, type, data});
      }
  s.event_cv.notify_all();
}

// ---- MIG ----------------------------------------------------------------------------------------
constexpr nvmlReturn_t kNotFound = 6;

// The parent's MIG mode now, without taking a step of "mig_mode" (the backend's own query does).
[[maybe_unused]] unsigned current_mig_mode(Gpu& g) {
  if (!g.spec.contains("mig_mode")) return 0;
  const std::size_t n = g.cursor["mig_mode"];
  const Answer a = resolve(g.spec.at("mig_mode"), n > 0 ? n - 1 : 0, g.mode, false);
  return a.code == kSuccess ? static_cast<unsigned>(as_u64(a.value)) : 0;
}

[[maybe_unused]] nvmlReturn_t mig_instance_id(const char* fn, nvmlDevice_t dev, const char* key, unsigned* id) {
  return device_call(fn, dev, [&](Gpu& g) {
    if (id == nullptr) return kInvalidArgument;
    if (g.parent == nullptr) return kNotSupported;  // not a MIG device handle
    return take_number(g, key, id);
  });
}

}  // namespace

extern "C" {

#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned* current, unsigned* pending) {
  return device_call("nvmlDeviceGetMigMode", dev, [&](Gpu& g) {
    if (current == nullptr || pending == nullptr) return kInvalidArgument;
    Answer a = g.take("mig_mode");
    if (a.code != kSuccess) return a.code;
    *current = static_cast<unsigned>(as_u64(a.value));
    *pending =
        g.spec.contains("mig_mode_pending") ? static_cast<unsigned>(as_u64(g.spec.at("mig_mode_pending"))) : *current;
    return kSuccess;
  });
}
#endif
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int error_type, int counter_type, unsigned long long* n) {
  return device_call("nvmlDeviceGetTotalEccErrors", dev, [&](Gpu& g) {
    if ((error_type != 0 && error_type != 1) || (counter_type != 0 && counter_type != 1)) return kInvalidArgument;
    const std::string key = std::string("ecc_") + (error_type == 1 ? "uncorrected_" : "corrected_") +
                            (counter_type == 0 ? "volatile" : "aggregate");
    return take_number(g, key.c_str(), n);
  });
}

// ---- health: ECC is above; retired pages, remapping, PCIe, violations, events ----------------------
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned* count, unsigned long long* addresses) {
  return device_call("nvmlDeviceGetRetiredPages", dev,
                     [&](Gpu& g) { return retired_pages(g, cause, count, addresses); });
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int* pending) {
  return device_call("nvmlDeviceGetRetiredPagesPendingStatus", dev,
                     [&](Gpu& g) { return take_number(g, "retired_pages_pending", pending); });
}
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned* corr, unsigned* unc, unsigned* pending,
                                       unsigned* failure) {
  return device_call("nvmlDeviceGetRemappedRows", dev,
                     [&](Gpu& g) { return remapped_rows(g, corr, unc, pending, failure); });
}
#endif
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t dev, unsigned* value) {
  return device_call("nvmlDeviceGetPcieReplayCounter", dev,
                     [&](Gpu& g) { return take_number(g, "pcie_replay_count", value); });
}
nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t dev, int policy, nvmlViolationTime_t* t) {
  return device_call("nvmlDeviceGetViolationStatus", dev, [&](Gpu& g) {
    if (t == nullptr) return kInvalidArgument;
    if (policy != 0 && policy != 1) return kNotSupported;  // the fake knows power (0) and thermal (1)
    unsigned long long us = 0;
    if (nvmlReturn_t r = take_number(g, policy == 0 ? "power_violation_us" : "thermal_violation_us", &us);
        r != kSuccess)
      return r;
    t->referenceTime = 1'700'000'000'000'000ULL;
    t->violationTime = us * 1000;  // NVML's unit is ns
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t dev, unsigned long long* types) {
  return device_call("nvmlDeviceGetSupportedEventTypes", dev,
                     [&](Gpu& g) { return take_number(g, "supported_event_types", types); });
}
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return system_call("nvmlEventSetCreate", [&](State& s) {
    if (set == nullptr) return kInvalidArgument;
    s.event_sets.push_back(std::make_unique<EventSetFake>());
    *set = reinterpret_cast<nvmlEventSet_t>(s.event_sets.back().get());
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set) {
  return device_call("nvmlDeviceRegisterEvents", dev, [&](Gpu& g) {
    State& s = state();  // already locked by device_call
    EventSetFake* e = find_set(s, set);
    if (e == nullptr) return kInvalidArgument;
    if (g.spec.contains("register_events_error")) return g.spec.at("register_events_error").get<int>();
    unsigned long long supported = 0;
    if (nvmlReturn_t r = take_number(g, "supported_event_types", &supported); r != kSuccess) return r;
    if ((types & ~supported) != 0) return kNotSupported;
    e->registered.emplace_back(&g, types);
    // The scenario's own events, due `after_ms` after this registration.
    const auto now = std::chrono::steady_clock::now();
    for (const auto& ev : g.spec.value("xid_events", json::array()))
      queue_event(s, g, kEventTypeXidCriticalError, ev.at("xid").get<unsigned long long>(),
                  now + std::chrono::milliseconds(ev.value("after_ms", 0)));
    return kSuccess;
  });
}
#if !FAKE_NVML_OLD_DRIVER
// Blocks up to `timeout_ms` for the next due event: TIMEOUT (10) when none comes.
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) {
  State& s = state();
  std::unique_lock lock(s.mu);
  count_call(s, "nvmlEventSetWait_v2", false);
  if (s.refcount == 0) return kUninitialized;
  if (data == nullptr || find_set(s, set) == nullptr) return kInvalidArgument;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    EventSetFake* e = find_set(s, set);
    if (e == nullptr) return kInvalidArgument;  // freed while we waited
    const auto now = std::chrono::steady_clock::now();
    if (!e->pending.empty() && e->pending.front().due <= now) {
      const PendingEvent ev = e->pending.front();
      e->pending.pop_front();
      data->device = handle_of(*ev.gpu);
      data->eventType = ev.type;
      data->eventData = ev.data;
      data->gpuInstanceId = kNoMigInstance;
      data->computeInstanceId = kNoMigInstance;
      return kSuccess;
    }
    if (now >= deadline) return kTimeout;
    auto wake = deadline;
    if (!e->pending.empty()) wake = std::min(wake, e->pending.front().due);
    s.event_cv.wait_until(lock, wake);
  }
}
#endif
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return system_call("nvmlEventSetFree", [&](State& s) {
    auto it = std::find_if(s.event_sets.begin(), s.event_sets.end(),
                           [&](const auto& e) { return reinterpret_cast<nvmlEventSet_t>(e.get()) == set; });
    if (it == s.event_sets.end()) return kInvalidArgument;
    s.event_sets.erase(it);
    s.event_cv.notify_all();
    return kSuccess;
  });
}

// ---- MIG ----------------------------------------------------------------------------------------
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned* count) {
  return device_call("nvmlDeviceGetMaxMigDeviceCount", dev, [&](Gpu& g) {
    if (count == nullptr || g.parent != nullptr) return kInvalidArgument;
    if (!g.spec.contains("mig_mode")) return kNotSupported;  // a GPU without MIG
    *count = max_mig_devices(g);
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned index, nvmlDevice_t* mig) {
  return device_call("nvmlDeviceGetMigDeviceHandleByIndex", dev, [&](Gpu& g) {
    if (mig == nullptr || g.parent != nullptr) return kInvalidArgument;
    if (!g.spec.contains("mig_mode") || current_mig_mode(g) != 1) return kNotSupported;
    if (index >= max_mig_devices(g)) return kInvalidArgument;
    if (index >= g.mig_devices.size() || !g.mig_devices[index]) return kNotFound;
    *mig = handle_of(*g.mig_devices[index]);
    return kSuccess;
  });
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned* id) {
  return mig_instance_id("nvmlDeviceGetGpuInstanceId", dev, "gpu_instance_id", id);
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned* id) {
  return mig_instance_id("nvmlDeviceGetComputeInstanceId", dev, "compute_instance_id", id);
}
#endif

// Queues XID `xid` on GPU `gpu_index` for every event set it is registered in, due now. Returns 0, or
// 2 (INVALID_ARGUMENT) for an unknown GPU, or 1 before nvmlInit. Test hook (health region).
int fake_nvml_inject_xid(unsigned gpu_index, unsigned long long xid) {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.refcount == 0) return kUninitialized;
  if (gpu_index >= s.gpus.size()) return kInvalidArgument;
  queue_event(s, *s.gpus[gpu_index], kEventTypeXidCriticalError, xid, std::chrono::steady_clock::now());
  return kSuccess;
}
// Event sets created and not yet freed.
int fake_nvml_event_sets(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.event_sets.size());
}
}  // extern "C"
