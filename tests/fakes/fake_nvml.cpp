// A fake NVML: a shared library with NVML's C names and ABI, driven by the JSON scenario file named
// by FAKE_NVML_SCENARIO (read at the first nvmlInit). See tests/fakes/README.md for the format.
//
// Built twice: libnvidia-ml-fake.so exports every name a current driver exports (versioned and
// unsuffixed); with FAKE_NVML_OLD_DRIVER=1, libnvidia-ml-fake-old.so exports only the unsuffixed v1
// names and none of the newer optional symbols, like a driver from before those existed.
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

namespace {

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

StepMode parse_mode(const json& v, StepMode fallback) {
  if (!v.is_string()) return fallback;
  return v.get<std::string>() == "wrap" ? StepMode::Wrap : StepMode::Clamp;
}

// Resolves a value spec for the n-th query (see README.md): literal, "not_supported",
// {"error": N}, [steps...], {"steps": [...], "mode": ...} or {"start": a, "increment": b}.
Answer resolve(const json& spec, std::size_t n, StepMode mode, bool array_is_value) {
  if (spec.is_string() && spec.get<std::string>() == "not_supported") return {kNotSupported, {}};
  const json* steps = nullptr;
  if (spec.is_object()) {
    if (spec.contains("error")) return {spec.at("error").get<int>(), {}};
    if (spec.contains("steps")) {
      steps = &spec.at("steps");
      mode = parse_mode(spec.value("mode", json()), mode);
      array_is_value = true;  // each step is a whole value (a process list may be one)
    } else if (spec.contains("start")) {
      const json& start = spec.at("start");
      const json inc = spec.value("increment", json(0));
      if (start.is_number_float() || inc.is_number_float())
        return {kSuccess, start.get<double>() + static_cast<double>(n) * inc.get<double>()};
      return {kSuccess, start.get<unsigned long long>() + n * inc.get<unsigned long long>()};
    }
  } else if (spec.is_array() && !array_is_value) {
    steps = &spec;
    array_is_value = true;
  }
  if (steps == nullptr) return {kSuccess, spec};
  if (!steps->is_array() || steps->empty()) return {kNotSupported, {}};
  const std::size_t size = steps->size();
  const std::size_t at = mode == StepMode::Wrap ? n % size : std::min(n, size - 1);
  // A step may itself be "not_supported" or {"error": N}, but not another list of steps.
  const json& step = (*steps)[at];
  if (step.is_string() && step.get<std::string>() == "not_supported") return {kNotSupported, {}};
  if (step.is_object() && step.contains("error")) return {step.at("error").get<int>(), {}};
  return {kSuccess, step};
}

unsigned long long as_u64(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_number_float()) return static_cast<unsigned long long>(std::llround(v.get<double>()));
  if (v.is_number()) return v.get<unsigned long long>();
  if (v.is_string()) return std::stoull(v.get<std::string>(), nullptr, 0);  // "0x4" for masks
  throw std::runtime_error("expected a number, got " + v.dump());
}

double as_double(const json& v) {
  if (v.is_number()) return v.get<double>();
  throw std::runtime_error("expected a number, got " + v.dump());
}

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
};

State& state() {
  static State s;
  return s;
}

void count_call(State& s, const char* fn, bool device_call) {
  ++s.calls[fn];
  if (device_call) ++s.device_calls;
}

nvmlDevice_t handle_of(Gpu& g) { return reinterpret_cast<nvmlDevice_t>(&g); }

Gpu* find_gpu(State& s, nvmlDevice_t dev) {
  for (auto& g : s.gpus) {
    if (handle_of(*g) == dev) return g.get();
    for (auto& m : g->mig_devices)
      if (m && handle_of(*m) == dev) return m.get();
  }
  return nullptr;
}

void load_mig_devices(Gpu& g);  // MIG region

// Reads the scenario into `s`. Returns 0, init_error, or an error code after printing why.
nvmlReturn_t load_scenario(State& s) {
  const char* path = std::getenv("FAKE_NVML_SCENARIO");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "fake_nvml: FAKE_NVML_SCENARIO is not set; answering DRIVER_NOT_LOADED\n");
    return kDriverNotLoaded;
  }
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fake_nvml: cannot read scenario %s\n", path);
    return kDriverNotLoaded;
  }
  const json scenario = json::parse(in);  // a parse error throws; the caller answers UNKNOWN
  if (scenario.contains("init_error")) return scenario.at("init_error").get<int>();

  const StepMode mode = parse_mode(scenario.value("array_mode", json()), StepMode::Clamp);
  s.driver_version = scenario.value("driver_version", std::string("550.54.15"));
  s.cuda_driver_version = scenario.value("cuda_driver_version", 12040);
  s.gpus.clear();
  s.event_sets.clear();  // a fresh init: sets of an earlier one point at GPUs that are gone
  const json defaults = scenario.value("gpu_defaults", json::object());
  const json gpus = scenario.value("gpus", json::array());
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    auto g = std::make_unique<Gpu>();
    g->index = static_cast<unsigned>(i);
    g->spec = defaults;
    g->spec.update(gpus[i]);
    g->mode = mode;
    load_mig_devices(*g);
    if (g->spec.contains("lost")) {
      const Answer first = resolve(g->spec.at("lost"), 0, mode, false);
      g->lost = first.code == kSuccess && first.value.is_boolean() && first.value.get<bool>();
    }
    s.gpus.push_back(std::move(g));
  }

  s.gpm_cost_us.clear();  // GPM: what each GPM call costs (fake_nvml_gpm.hpp)
  const json gpm_cost = scenario.value("gpm_call_cost_us", json::object());
  for (const auto& [fn, us] : gpm_cost.items()) s.gpm_cost_us[fn] = us.get<long long>();

  s.levels.clear();
  s.default_level = 50;
  if (scenario.contains("topology")) {
    const json& topo = scenario.at("topology");
    s.default_level = topo.value("default_level", 50);
    for (const auto& pair : topo.value("common_ancestor", json::array())) {
      const unsigned a = pair.at(0).get<unsigned>(), b = pair.at(1).get<unsigned>();
      s.levels[{std::min(a, b), std::max(a, b)}] = pair.at(2).get<int>();
    }
    // Each [a, b, n] takes the next n free links on both GPUs.
    for (const auto& link : topo.value("nvlinks", json::array())) {
      const unsigned a = link.at(0).get<unsigned>(), b = link.at(1).get<unsigned>();
      const unsigned n = link.size() > 2 ? link.at(2).get<unsigned>() : 1;
      if (a >= s.gpus.size() || b >= s.gpus.size()) throw std::runtime_error("nvlinks: no such GPU");
      for (Gpu* g : {s.gpus[a].get(), s.gpus[b].get()}) {
        if (g->nvlink_peer.empty()) g->nvlink_peer.assign(kNvLinkMaxLinks, -1);
        const unsigned peer = g == s.gpus[a].get() ? b : a;
        for (unsigned k = 0, placed = 0; k < kNvLinkMaxLinks && placed < n; ++k) {
          if (g->nvlink_peer[k] >= 0) continue;
          g->nvlink_peer[k] = static_cast<int>(peer);
          ++placed;
        }
      }
    }
  }
  return kSuccess;
}

// Runs `body` under the lock after the checks every NVML call makes.
template <class Body>
nvmlReturn_t system_call(const char* fn, Body&& body) {
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, fn, false);
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
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, fn, true);
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

nvmlReturn_t copy_string(const std::string& text, char* buffer, unsigned length) {
  if (buffer == nullptr) return kInvalidArgument;
  if (text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
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

nvmlReturn_t do_init(const char* fn) {
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, fn, false);
  if (s.refcount > 0) {
    ++s.refcount;
    return kSuccess;
  }
  nvmlReturn_t r = kUnknown;
  try {
    r = load_scenario(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake_nvml: scenario %s: %s\n", std::getenv("FAKE_NVML_SCENARIO"), e.what());
  }
  if (r == kSuccess) s.refcount = 1;
  return r;
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

nvmlReturn_t cuda_version(const char* fn, int* version) {
  return system_call(fn, [&](State& s) {
    if (version == nullptr) return kInvalidArgument;
    *version = s.cuda_driver_version;
    return kSuccess;
  });
}

// The peer of an active NvLink, or an error code.
nvmlReturn_t nvlink_peer(const State& s, const Gpu& g, unsigned link, const Gpu** peer) {
  if (g.nvlink_peer.empty()) return kNotSupported;
  if (link >= kNvLinkMaxLinks) return kInvalidArgument;
  if (g.nvlink_peer[link] < 0) return kNotSupported;  // documented choice: an inactive link has no peer
  *peer = s.gpus[static_cast<unsigned>(g.nvlink_peer[link])].get();
  return kSuccess;
}

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
// A GPU's "mig_devices" list becomes MIG device handles, distinct from the parent's, as the driver
// gives them: the name, UUID, memory and PCI queries answer on them with the instance's values
// (name "<parent name> MIG <profile>"), the whole-GPU counters (utilization, …) answer NOT_SUPPORTED.
constexpr nvmlReturn_t kNotFound = 6;
constexpr unsigned kDefaultMaxMigDevices = 7;  // A100 / H100

unsigned max_mig_devices(const Gpu& g) {
  return g.spec.contains("mig_max_devices") ? static_cast<unsigned>(as_u64(g.spec.at("mig_max_devices")))
                                            : kDefaultMaxMigDevices;
}

void load_mig_devices(Gpu& g) {
  g.mig_devices.clear();
  if (!g.spec.contains("mig_devices")) return;
  const json& list = g.spec.at("mig_devices");
  if (!list.is_array()) throw std::runtime_error("mig_devices must be a list");
  const std::string parent_name = g.spec.value("name", std::string("NVIDIA Fake GPU"));
  g.mig_devices.resize(max_mig_devices(g));
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& d = list[i];
    const auto at = d.value("index", static_cast<unsigned>(i));
    if (at >= g.mig_devices.size() || g.mig_devices[at]) throw std::runtime_error("mig_devices: bad or repeated index");
    auto m = std::make_unique<Gpu>();
    m->index = g.index;
    m->parent = &g;
    m->mode = g.mode;
    m->spec = d;
    if (!m->spec.contains("name")) m->spec["name"] = parent_name + " MIG " + d.value("profile", std::string("1g.10gb"));
    if (!m->spec.contains("pci_bus_id")) m->spec["pci_bus_id"] = g.bus_id();
    if (!m->spec.contains("uuid")) {
      char uuid[64];
      std::snprintf(uuid, sizeof uuid, "MIG-00000000-0000-5000-8000-%06u%06u", g.index, at);
      m->spec["uuid"] = uuid;
    }
    g.mig_devices[at] = std::move(m);
  }
}

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

// ---- library -----------------------------------------------------------------------------------
nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
#endif

nvmlReturn_t nvmlShutdown(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  count_call(s, "nvmlShutdown", false);
  if (s.refcount == 0) return kUninitialized;
  --s.refcount;
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 8: return "Insufficient External Power";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 11: return "Interrupt request issue";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 14: return "Corrupted infoROM";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 17: return "The operating system has blocked the request";
    case 18: return "RM has detected an NVML/RM version mismatch";
    case 19: return "In use by another client";
    case 20: return "Insufficient Memory";
    case 21: return "No data";
    case 25: return "Argument version mismatch";
    case 26: return "Deprecated";
    case 27: return "Not Ready";
    case 28: return "GPU not found";
    case 29: return "Invalid state";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return system_call("nvmlSystemGetDriverVersion",
                     [&](State& s) { return copy_string(s.driver_version, version, length); });
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) { return cuda_version("nvmlSystemGetCudaDriverVersion", v); }
#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) { return cuda_version("nvmlSystemGetCudaDriverVersion_v2", v); }
#endif

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
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, int* mode) {
  return device_call("nvmlDeviceGetPersistenceMode", dev,
                     [&](Gpu& g) { return take_number(g, "persistence_mode", mode); });
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

// ---- test hooks (not NVML) ---------------------------------------------------------------------
// Calls of nvmlDevice* functions since the library was loaded or fake_nvml_reset().
unsigned long long fake_nvml_call_count(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.device_calls;
}
// Calls of one function by its NVML name (any function, nvmlInit and nvmlSystem* included).
unsigned long long fake_nvml_call_count_of(const char* function) {
  State& s = state();
  std::lock_guard lock(s.mu);
  auto it = s.calls.find(std::string_view(function ? function : ""));
  return it == s.calls.end() ? 0 : it->second;
}
// Zeroes the call counters and rewinds every stepped value; leaves the init count alone.
void fake_nvml_reset(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.device_calls = 0;
  s.calls.clear();
  for (auto& g : s.gpus) g->cursor.clear();
}
// Successful nvmlInit* calls not yet matched by nvmlShutdown.
int fake_nvml_init_refcount(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return s.refcount;
}

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

// GPM (sample handles, metrics from the scenario): in a file of its own, after everything it uses.
#include "fake_nvml_gpm.hpp"
