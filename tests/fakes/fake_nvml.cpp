// A fake NVML: a shared library with NVML's C names and ABI, driven by the JSON scenario file named
// by FAKE_NVML_SCENARIO (read at the first nvmlInit). See tests/fakes/README.md for the format.
//
// Built twice: libnvidia-ml-fake.so exports every name a current driver exports (versioned and
// unsuffixed); with FAKE_NVML_OLD_DRIVER=1, libnvidia-ml-fake-old.so exports only the unsuffixed v1
// names and none of the newer optional symbols, like a driver from before those existed.
//
// The scenario, the library's own calls (init, shutdown, versions) and the test hooks are here; the
// device queries, health and MIG, and GPM are in fake_nvml_device.cpp, fake_nvml_health.cpp and
// fake_nvml_gpm.cpp, around the state in fake_nvml.hpp.
#include "fake_nvml.hpp"

#include <ctime>

namespace fake_nvml {

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

State& state() {
  static State s;
  return s;
}

void count_call(State& s, const char* fn, bool device_call) {
  ++s.calls[fn];
  if (device_call) ++s.device_calls;
}

Gpu* find_gpu(State& s, nvmlDevice_t dev) {
  for (auto& g : s.gpus) {
    if (handle_of(*g) == dev) return g.get();
    for (auto& m : g->mig_devices)
      if (m && handle_of(*m) == dev) return m.get();
  }
  return nullptr;
}

nvmlReturn_t copy_string(const std::string& text, char* buffer, unsigned length) {
  if (buffer == nullptr) return kInvalidArgument;
  if (text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
}

// ---- call cost (see CallCost in fake_nvml.hpp) ------------------------------------------------------
void CallCost::look_up(const State& s) {
  if (s.call_cost_ns.empty() && s.call_cost_default_ns == 0) return;
  const std::string_view name(fn_);
  if (auto it = s.call_cost_ns.find(name); it != s.call_cost_ns.end())
    ns_ = it->second;
  else if (name.rfind("nvmlGpm", 0) != 0)
    ns_ = s.call_cost_default_ns;
  if (ns_ > 0) start_ns_ = thread_cpu_ns();
}

// On the thread's CPU clock, not the wall clock: on a busy machine a wall-clock spin is descheduled part of
// the time and would cost less CPU than the real call.
long long CallCost::thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

void CallCost::spend_until(long long until) {
  while (thread_cpu_ns() < until) {
  }
}

void load_call_costs(State& s, const json& scenario) {
  s.call_cost_ns.clear();
  s.call_cost_default_ns = 0;
  const json costs = scenario.value("call_cost_us", json::object());
  for (const auto& [fn, us] : costs.items()) {
    const auto ns = std::llround(us.get<double>() * 1000.0);
    if (ns < 0) throw std::runtime_error("call_cost_us: " + fn + " is negative");
    if (fn == "default")
      s.call_cost_default_ns = ns;
    else
      s.call_cost_ns[fn] = ns;
  }
}

// ---- MIG ----------------------------------------------------------------------------------------
// A GPU's "mig_devices" list becomes MIG device handles, distinct from the parent's, as the driver
// gives them: the name, UUID, memory and PCI queries answer on them with the instance's values
// (name "<parent name> MIG <profile>"), the whole-GPU counters (utilization, …) answer NOT_SUPPORTED.
constexpr unsigned kDefaultMaxMigDevices = 7;  // A100 / H100

unsigned max_mig_devices(const Gpu& g) {
  return g.spec.contains("mig_max_devices") ? static_cast<unsigned>(as_u64(g.spec.at("mig_max_devices")))
                                            : kDefaultMaxMigDevices;
}

}  // namespace fake_nvml

namespace {

using namespace fake_nvml;

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

  load_call_costs(s, scenario);  // "call_cost_us" (call cost section)

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

nvmlReturn_t cuda_version(const char* fn, int* version) {
  return system_call(fn, [&](State& s) {
    if (version == nullptr) return kInvalidArgument;
    *version = s.cuda_driver_version;
    return kSuccess;
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

}  // extern "C"
