#pragma once
// The fake NVML's insides, shared by its files (fake_nvml.cpp: the scenario, the library and the test
// hooks; fake_nvml_device.cpp: enumeration, identity, gauges, processes, topology; fake_nvml_health.cpp:
// ECC, retired pages, remapping, PCIe, violations, events and MIG; fake_nvml_gpm.cpp: GPM). Not part
// of the library's interface: everything here is hidden from the shared object's exported names, so the
// two fakes (current and old driver) loaded in one process never bind to each other's state.
//
// The struct layouts are declared here independently of src/backends/nvml/nvml_abi.hpp on purpose:
// the fake plays the part of NVIDIA's library, so a layout mistake on one side shows up in tests.
// Every entry point takes one mutex: NVML is thread-safe, and so is the fake.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#ifndef FAKE_NVML_OLD_DRIVER
#define FAKE_NVML_OLD_DRIVER 0
#endif

extern "C" {
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;  // opaque to callers; points at one of our Gpu objects

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;  // opaque to callers; points at one of our EventSetFake
typedef struct {
  unsigned long long referenceTime;  // µs
  unsigned long long violationTime;  // ns
} nvmlViolationTime_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef struct {  // layout of the _v2 and v1 PciInfo functions
  char busId[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v1_t;
}

// Hidden: not among the shared object's exported names (see above).
#pragma GCC visibility push(hidden)
namespace fake_nvml {

using json = nlohmann::json;

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr nvmlReturn_t kTimeout = 10;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr nvmlReturn_t kArgumentVersionMismatch = 25;
constexpr nvmlReturn_t kUnknown = 999;

constexpr unsigned long long kBytesPerMiB = 1024ULL * 1024ULL;
constexpr unsigned long long kValueNotAvailable = 0xFFFFFFFFFFFFFFFFULL;
constexpr unsigned kNoMigInstance = 0xFFFFFFFFu;
constexpr unsigned kNvLinkMaxLinks = 18;
constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24);

enum class StepMode { Clamp, Wrap };

// What one scenario key answers on one query: a return code, and the value when it is 0.
struct Answer {
  nvmlReturn_t code = kSuccess;
  json value;
};

StepMode parse_mode(const json& v, StepMode fallback);
// Resolves a value spec for the n-th query (see README.md): literal, "not_supported",
// {"error": N}, [steps...], {"steps": [...], "mode": ...} or {"start": a, "increment": b}.
Answer resolve(const json& spec, std::size_t n, StepMode mode, bool array_is_value);
unsigned long long as_u64(const json& v);
double as_double(const json& v);

struct Gpu {
  unsigned index = 0;
  json spec;                                  // gpu_defaults merged with this GPU's object
  std::map<std::string, std::size_t> cursor;  // queries so far, per key
  bool lost = false;                          // current value of "lost"
  std::vector<int> nvlink_peer;               // per link: peer GPU index, -1 inactive; empty: no NvLink
  StepMode mode = StepMode::Clamp;
  // MIG (see the MIG region below): a MIG device is a Gpu of its own with a parent; a parent holds its
  // MIG devices by MIG index (null: no device at that index).
  Gpu* parent = nullptr;
  std::vector<std::unique_ptr<Gpu>> mig_devices;

  // The answer of `key` for this query; advances the key's position. A missing key is NOT_SUPPORTED.
  Answer take(const std::string& key, bool array_is_value = false) {
    auto it = spec.find(key);
    if (it == spec.end()) return {kNotSupported, {}};
    return resolve(*it, cursor[key]++, mode, array_is_value);
  }
  // Like take, but a missing key answers `fallback`.
  Answer take_or(const std::string& key, json fallback, bool array_is_value = false) {
    if (!spec.contains(key)) return {kSuccess, std::move(fallback)};
    return take(key, array_is_value);
  }

  std::string bus_id() const {
    if (spec.contains("pci_bus_id") && spec.at("pci_bus_id").is_string())
      return spec.at("pci_bus_id").get<std::string>();
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "00000000:%02X:00.0", index + 1);
    return buffer;
  }
};

// ---- events: one fake event set (health region; see the NVML functions further down) ------------
constexpr unsigned long long kEventTypeXidCriticalError = 0x8;

struct PendingEvent {
  std::chrono::steady_clock::time_point due;
  Gpu* gpu = nullptr;
  unsigned long long type = 0;
  unsigned long long data = 0;  // the XID
};

struct EventSetFake {
  std::vector<std::pair<Gpu*, unsigned long long>> registered;  // GPU, types
  std::deque<PendingEvent> pending;                             // in due order
};

struct State {
  std::mutex mu;
  std::condition_variable event_cv;  // a new event for a waiter, or a set freed
  std::vector<std::unique_ptr<EventSetFake>> event_sets;
  int refcount = 0;
  std::vector<std::unique_ptr<Gpu>> gpus;
  std::string driver_version;
  int cuda_driver_version = 0;
  int default_level = 50;
  std::map<std::pair<unsigned, unsigned>, int> levels;  // common ancestor by (low, high) index
  unsigned long long device_calls = 0;
  std::map<std::string, unsigned long long, std::less<>> calls;
  std::map<std::string, long long, std::less<>> gpm_cost_us;  // GPM: "gpm_call_cost_us" (fake_nvml_gpm.hpp)
  // "call_cost_us" (see CallCost below): CPU ns per function name; call_cost_default_ns for the rest.
  std::map<std::string, long long, std::less<>> call_cost_ns;
  long long call_cost_default_ns = 0;
};

// The one state of this library (scenario, GPUs, event sets, counters), under its mutex.
State& state();
void count_call(State& s, const char* fn, bool device_call);
inline nvmlDevice_t handle_of(Gpu& g) { return reinterpret_cast<nvmlDevice_t>(&g); }
Gpu* find_gpu(State& s, nvmlDevice_t dev);
nvmlReturn_t copy_string(const std::string& text, char* buffer, unsigned length);
// MIG devices a GPU may have ("mig_max_devices"; 7 as on A100 and H100).
unsigned max_mig_devices(const Gpu& g);

// ---- call cost: what each call costs a real driver, for benchmarks ---------------------------------
// The scenario's "call_cost_us": {"nvmlDeviceGetUtilizationRates": 13.5, …, "default": 3}: every call made
// through system_call/device_call spins for that much of its thread's CPU time (the name's figure, else
// "default"; GPM functions have their own key, gpm_call_cost_us, and are left out of "default"). Nothing set
// (the tests): free. Declared before the call's lock and spent in the destructor, after the lock is gone:
// NVML is thread-safe and one caller's cost does not hold the others up. The figure is the call's whole
// cost: the fake's own work for the call (its JSON look-ups) counts towards it, so a benchmark sees what the
// driver would take, not that plus the fake's bookkeeping.
class CallCost {
 public:
  explicit CallCost(const char* fn) : fn_(fn) {}
  CallCost(const CallCost&) = delete;
  CallCost& operator=(const CallCost&) = delete;
  ~CallCost() {
    if (ns_ > 0) spend_until(start_ns_ + ns_);
  }
  void look_up(const State& s);  // under the lock; the call's CPU time counts from here
  static long long thread_cpu_ns();
  static void spend_until(long long thread_cpu_ns);

 private:
  const char* fn_;
  long long ns_ = 0;
  long long start_ns_ = 0;
};
// Reads "call_cost_us" from the scenario into `s` (load_scenario).
void load_call_costs(State& s, const json& scenario);

// Runs `body` under the lock after the checks every NVML call makes.
template <class Body>
nvmlReturn_t system_call(const char* fn, Body&& body) {
  CallCost cost(fn);  // spent after the lock is released
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, fn, false);
  cost.look_up(s);
  if (s.refcount == 0) return kUninitialized;
  try {
    return body(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nvml: %s: %s\n", fn, e.what());
    return kUnknown;
  }
}

template <class Body>
nvmlReturn_t device_call(const char* fn, nvmlDevice_t dev, Body&& body) {
  CallCost cost(fn);  // spent after the lock is released
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, fn, true);
  cost.look_up(s);
  if (s.refcount == 0) return kUninitialized;
  Gpu* g = find_gpu(s, dev);
  if (g == nullptr) return kInvalidArgument;
  if (g->lost || (g->parent != nullptr && g->parent->lost)) return kGpuIsLost;
  try {
    return body(*g);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nvml: %s: GPU %u: %s\n", fn, g->index, e.what());
    return kUnknown;
  }
}

// An unsigned field: the key's answer converted with `scale` (e.g. W -> mW).
template <class T>
nvmlReturn_t take_number(Gpu& g, const char* key, T* out, double scale = 1.0) {
  if (out == nullptr) return kInvalidArgument;
  Answer a = g.take(key);
  if (a.code != kSuccess) return a.code;
  *out = scale == 1.0 ? static_cast<T>(as_u64(a.value)) : static_cast<T>(std::llround(as_double(a.value) * scale));
  return kSuccess;
}

}  // namespace fake_nvml
#pragma GCC visibility pop
