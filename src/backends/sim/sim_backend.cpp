// The simulated backend: N virtual GPUs whose load follows a scenario, for demos and for testing the
// layers above without hardware. Everything it produces says "simulated".
//
// Scenario file (JSON):
// {
//   "driver_version": "sim",                         optional
//   "gpus": [ {
//       "name": "Simulated H100 80GB HBM3",          optional (default shown)
//       "memory_total_mib": 81559, "power_limit_w": 700, "idle_power_w": 70,   optional
//       "load": [ {"t": 0, "utilization": 5, "memory_used_mib": 1000}, {"t": 30, ...}, ... ],
//       "period_s": 60,        optional: the load loops with this period (default: last t, or static)
//       "lost_after_s": 120,   optional: the GPU answers "lost" from then on
//       "unsupported": ["fan_speed"]   optional: fields (keys of GET /api/v1/fields) this GPU does not
//                                      report; they read as "not supported"
//   } ],
//   "processes": [ {"gpu": 0, "pid": 4242, "name": "python", "user": "alice",
//                   "command": "python train.py", "used_memory_mib": 30000} ],
//   "topology": {                                    optional: how the GPUs are connected
//     "nvlink_pairs": [[0, 1, 4], [2, 3, 4]],        [gpu a, gpu b, links (1..18)]
//     "levels": [[0, 1, "NumaNode"], [0, 2, "CrossSocket"]],   [gpu a, gpu b, PCIe common ancestor]
//     "default_level": "CrossSocket"                 optional: level of pairs not listed (default Unknown)
//   }
// }
// Levels are core::LinkLevel names: SameBoard, SingleSwitch, MultiSwitch, HostBridge, NumaNode,
// CrossSocket, Unknown. Without "topology" every pair is Unknown and nothing has NvLink.
// Between load points values are interpolated linearly. Temperature, power, fan and clocks follow
// utilization by fixed rules; the energy counter integrates power.
// With BackendOptions::sim_gpus above the scenario's count, the GPUs are replicated in blocks of the
// scenario's size, and each block gets the scenario's topology inside it (GPU k·n + a pairs with
// k·n + b); pairs in different blocks get default_level. The built-in demo is two NVLink pairs
// (0-1, 2-3, 4 links each), each pair on one NUMA node, the pairs on different sockets; GPU 2 is passively
// cooled (no fan reading), so the demo shows how a missing value and its reason look.
#include "backends/sim/sim_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "core/fields.hpp"
#include "platform/clock.hpp"

namespace gf::backends {
namespace {

// NVML GPM for Hopper-class names (H100, H200, GH200, B200…): the real H100's proportions under a bf16
// matrix-product load (../shared/captures/h100-580: SM 97 %, occupancy 14 %, tensor 94 %, DRAM 25 % at
// 100 % utilization; FP pipes idle), scaled by the simulated utilization. Other names have no GPM, as
// real GPUs before Hopper have none, and say so.
void simulate_profiling(const std::string& name, double util_pct, core::GpuReading& r) {
  const bool hopper_class = name.find("H100") != std::string::npos || name.find("H200") != std::string::npos ||
                            name.find("H20") != std::string::npos || name.find("B200") != std::string::npos ||
                            name.find("B100") != std::string::npos;
  if (!hopper_class) {
    for (auto* m : {&r.prof_graphics_active, &r.prof_sm_active, &r.prof_sm_occupancy, &r.prof_tensor_active,
                    &r.prof_dram_active, &r.prof_fp64_active, &r.prof_fp32_active, &r.prof_fp16_active,
                    &r.prof_pcie_tx_bytes, &r.prof_pcie_rx_bytes, &r.prof_nvlink_tx_bytes, &r.prof_nvlink_rx_bytes})
      *m = core::Reading<double>::absent(core::Absent::NotSupported);
    r.profiling_note = "no GPM on this GPU: NVML's profiling metrics need a Hopper or later GPU (simulated)";
    return;
  }
  const double u = util_pct / 100.0;
  constexpr double kMiB = 1024.0 * 1024.0;
  r.prof_graphics_active = 0.99863 * u;
  r.prof_sm_active = 0.96537 * u;
  r.prof_sm_occupancy = 0.14266 * u;
  r.prof_tensor_active = 0.93694 * u;
  r.prof_dram_active = 0.25368 * u;
  r.prof_fp64_active = 0.0;
  r.prof_fp32_active = 0.0;
  r.prof_fp16_active = 0.0;
  r.prof_pcie_tx_bytes = (0.377 + 5.667 * u) * kMiB;
  r.prof_pcie_rx_bytes = (0.452 + 15.765 * u) * kMiB;
  r.prof_nvlink_tx_bytes = 0.0;
  r.prof_nvlink_rx_bytes = 0.0;
}

struct LoadPoint {
  double t_s = 0;
  double utilization = 0;
  double memory_used_mib = 0;
};

struct SimGpu {
  std::string name = "Simulated H100 80GB HBM3";
  double memory_total_mib = 81559;
  double power_limit_w = 700;
  double idle_power_w = 70;
  std::vector<LoadPoint> load;
  double period_s = 0;
  double lost_after_s = -1;
  std::vector<core::Field> unsupported;  // read as NotSupported
  double energy_mj = 0;
};

struct SimProcess {
  unsigned gpu = 0;
  core::GpuProcess proc;
};

// The built-in demo: four GPUs with different duty cycles, two of them busy with jobs.
constexpr const char* kDemoScenario = R"({
  "gpus": [
    {"load": [{"t":0,"utilization":92,"memory_used_mib":61000},{"t":20,"utilization":97,"memory_used_mib":62500},
              {"t":40,"utilization":88,"memory_used_mib":61800},{"t":60,"utilization":92,"memory_used_mib":61000}]},
    {"load": [{"t":0,"utilization":0,"memory_used_mib":420},{"t":25,"utilization":0,"memory_used_mib":420},
              {"t":30,"utilization":75,"memory_used_mib":30500},{"t":50,"utilization":60,"memory_used_mib":30500},
              {"t":55,"utilization":0,"memory_used_mib":420},{"t":60,"utilization":0,"memory_used_mib":420}]},
    {"load": [{"t":0,"utilization":3,"memory_used_mib":900},{"t":30,"utilization":8,"memory_used_mib":1100},
              {"t":60,"utilization":3,"memory_used_mib":900}], "unsupported": ["fan_speed"]},
    {"load": [{"t":0,"utilization":45,"memory_used_mib":20000},{"t":15,"utilization":70,"memory_used_mib":24000},
              {"t":45,"utilization":20,"memory_used_mib":22000},{"t":60,"utilization":45,"memory_used_mib":20000}]}
  ],
  "processes": [
    {"gpu":0,"pid":31337,"name":"python3","user":"alice","command":"python3 train.py --model llama-3-8b","used_memory_mib":60500},
    {"gpu":3,"pid":31400,"name":"vllm","user":"bob","command":"vllm serve Qwen2.5-7B-Instruct","used_memory_mib":19500}
  ],
  "topology": {
    "nvlink_pairs": [[0, 1, 4], [2, 3, 4]],
    "levels": [[0, 1, "NumaNode"], [2, 3, "NumaNode"]],
    "default_level": "CrossSocket"
  }
})";

double interpolate(const std::vector<LoadPoint>& pts, double t, double LoadPoint::*field) {
  if (pts.empty()) return 0;
  if (t <= pts.front().t_s) return pts.front().*field;
  for (std::size_t i = 1; i < pts.size(); ++i) {
    if (t <= pts[i].t_s) {
      const double span = pts[i].t_s - pts[i - 1].t_s;
      const double f = span > 0 ? (t - pts[i - 1].t_s) / span : 1.0;
      return pts[i - 1].*field + f * (pts[i].*field - pts[i - 1].*field);
    }
  }
  return pts.back().*field;
}

double number(const nlohmann::json& j, const char* key, double fallback) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_number()) throw std::runtime_error(std::string("'") + key + "' must be a number");
  return it->get<double>();
}

// The scenario's "topology", in the scenario's own GPU numbering (before replication).
struct TopologySpec {
  struct Pair {
    unsigned a = 0;
    unsigned b = 0;
    unsigned links = 0;
    core::LinkLevel level = core::LinkLevel::Unknown;
  };
  std::vector<Pair> nvlinks;  // links set
  std::vector<Pair> levels;   // level set
  core::LinkLevel default_level = core::LinkLevel::Unknown;
};

core::LinkLevel parse_level(const nlohmann::json& j) {
  static constexpr std::pair<const char*, core::LinkLevel> kNames[] = {
      {"SameBoard", core::LinkLevel::SameBoard},     {"SingleSwitch", core::LinkLevel::SingleSwitch},
      {"MultiSwitch", core::LinkLevel::MultiSwitch}, {"HostBridge", core::LinkLevel::HostBridge},
      {"NumaNode", core::LinkLevel::NumaNode},       {"CrossSocket", core::LinkLevel::CrossSocket},
      {"Unknown", core::LinkLevel::Unknown}};
  if (j.is_string())
    for (const auto& [name, level] : kNames)
      if (j.get<std::string>() == name) return level;
  throw std::runtime_error("topology level " + j.dump() +
                           " is not one of SameBoard, SingleSwitch, MultiSwitch, HostBridge, NumaNode, CrossSocket, "
                           "Unknown");
}

// [a, b, x] with a and b GPUs of the scenario; x is read by the caller.
std::pair<unsigned, unsigned> parse_pair(const nlohmann::json& j, std::size_t gpu_count, const char* key) {
  if (!j.is_array() || j.size() != 3 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned())
    throw std::runtime_error(std::string("every entry of \"") + key + "\" must be [gpu a, gpu b, value]");
  // Read wide, so that a huge index is refused rather than wrapped onto a real GPU.
  const auto a = j[0].get<std::uint64_t>(), b = j[1].get<std::uint64_t>();
  if (a >= gpu_count || b >= gpu_count || a == b)
    throw std::runtime_error(std::string("\"") + key + "\" entry " + j.dump() +
                             " must name two different GPUs of the scenario");
  return {static_cast<unsigned>(a), static_cast<unsigned>(b)};
}

TopologySpec parse_topology(const nlohmann::json& doc, std::size_t gpu_count) {
  TopologySpec spec;
  const auto it = doc.find("topology");
  if (it == doc.end()) return spec;
  if (!it->is_object()) throw std::runtime_error("\"topology\" must be an object");
  if (auto d = it->find("default_level"); d != it->end()) spec.default_level = parse_level(*d);
  if (auto pj = it->find("nvlink_pairs"); pj != it->end()) {
    if (!pj->is_array()) throw std::runtime_error("\"nvlink_pairs\" must be an array");
    for (const auto& e : *pj) {
      const auto [a, b] = parse_pair(e, gpu_count, "nvlink_pairs");
      // NVML_NVLINK_MAX_LINKS: no GPU has more than 18 links.
      if (!e[2].is_number_unsigned() || e[2].get<std::uint64_t>() < 1 || e[2].get<std::uint64_t>() > 18)
        throw std::runtime_error("nvlink_pairs " + e.dump() + ": links must be 1..18");
      spec.nvlinks.push_back({a, b, e[2].get<unsigned>(), core::LinkLevel::Unknown});
    }
  }
  if (auto lj = it->find("levels"); lj != it->end()) {
    if (!lj->is_array()) throw std::runtime_error("\"levels\" must be an array");
    for (const auto& e : *lj) {
      const auto [a, b] = parse_pair(e, gpu_count, "levels");
      spec.levels.push_back({a, b, 0, parse_level(e[2])});
    }
  }
  return spec;
}

// The topology of `total` GPUs: the scenario's `base` GPUs' topology repeated in every block of
// `base` (the last block may be partial; pairs that fall outside it are dropped).
core::Topology build_topology(const TopologySpec& spec, std::size_t base, std::size_t total) {
  const auto n = static_cast<unsigned>(total);
  core::Topology topo(n);
  if (spec.default_level != core::LinkLevel::Unknown)
    for (unsigned a = 0; a < n; ++a)
      for (unsigned b = a + 1; b < n; ++b) topo.set_level(a, b, spec.default_level);
  for (std::size_t offset = 0; offset < total; offset += base) {
    const auto o = static_cast<unsigned>(offset);
    for (const auto& p : spec.levels) topo.set_level(o + p.a, o + p.b, p.level);  // out of range: ignored
    for (const auto& p : spec.nvlinks) topo.set_nvlinks(o + p.a, o + p.b, p.links);
  }
  return topo;
}

class SimBackend final : public Backend {
 public:
  SimBackend(std::vector<SimGpu> gpus, std::vector<SimProcess> procs, std::string driver, core::Topology topology,
             const core::Clock& clock)
      : gpus_(std::move(gpus)),
        procs_(std::move(procs)),
        driver_(std::move(driver)),
        topology_(std::move(topology)),
        clock_(clock),
        start_(clock.now()),
        last_(start_) {}

  std::string_view name() const noexcept override { return "sim"; }

  Result<core::Topology> topology() override { return topology_; }

  Result<core::Snapshot> snapshot() override {
    const auto now = clock_.now();
    const double t = std::chrono::duration<double>(now - start_).count();
    const double dt = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    core::Snapshot s;
    s.timestamp = clock_.wall_now();
    s.backend = "sim";
    s.simulated = true;
    s.driver_version = driver_;
    s.warnings.push_back("simulated GPUs: these readings come from a scenario, not from hardware");
    s.process_visibility.complete = true;
    for (std::size_t i = 0; i < gpus_.size(); ++i) s.gpus.push_back(read_gpu(static_cast<unsigned>(i), t, dt));
    return s;
  }

 private:
  core::GpuReading read_gpu(unsigned index, double t, double dt) {
    SimGpu& g = gpus_[index];
    core::GpuReading r;
    r.index = index;
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-5150c0de-0000-4000-8000-%012x", index);
    r.uuid = uuid;
    r.name = g.name;
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x10 + index * 0x10);
    r.pci_bus_id = bus;
    if (g.lost_after_s >= 0 && t >= g.lost_after_s) {
      r.health = core::Health::Lost;
      r.health_message = "GPU is lost (simulated)";
      return r;
    }
    const double lt = g.period_s > 0 ? std::fmod(t, g.period_s) : t;
    const double util = std::clamp(interpolate(g.load, lt, &LoadPoint::utilization), 0.0, 100.0);
    const double used = std::clamp(interpolate(g.load, lt, &LoadPoint::memory_used_mib), 0.0, g.memory_total_mib);
    const double power = g.idle_power_w + (g.power_limit_w - g.idle_power_w) * util / 100.0 * 0.9;
    g.energy_mj += power * dt * 1000.0;
    r.memory_total_mib = static_cast<std::uint64_t>(g.memory_total_mib);
    r.memory_used_mib = static_cast<std::uint64_t>(std::llround(used));
    r.memory_free_mib = *r.memory_total_mib - *r.memory_used_mib;
    r.utilization_pct = static_cast<unsigned>(std::lround(util));
    r.memory_utilization_pct = static_cast<unsigned>(std::lround(util * 0.6));
    r.temperature_c = static_cast<int>(std::lround(32 + util * 0.45));
    r.power_draw_w = std::round(power * 100.0) / 100.0;
    r.power_limit_w = g.power_limit_w;
    r.fan_pct = static_cast<unsigned>(std::lround(30 + util * 0.5));
    r.clock_graphics_mhz = util > 1 ? 1980u : 345u;
    r.clock_memory_mhz = util > 1 ? 2619u : 1593u;
    r.clock_event_reasons = util > 1 ? std::uint64_t{0} : std::uint64_t{0x1};
    r.performance_state = util > 1 ? 0u : 8u;
    r.mig_enabled = false;
    r.ecc_uncorrected_volatile = std::uint64_t{0};
    r.persistence_mode = true;
    r.energy_mj = static_cast<std::uint64_t>(g.energy_mj);
    simulate_profiling(g.name, util, r);
    for (const auto& p : procs_)
      if (p.gpu == index) r.processes.push_back(p.proc);
    for (auto f : g.unsupported) core::info(f).mark_absent(r, core::Absent::NotSupported);
    return r;
  }

  std::vector<SimGpu> gpus_;
  std::vector<SimProcess> procs_;
  std::string driver_;
  core::Topology topology_;
  const core::Clock& clock_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

Result<std::unique_ptr<Backend>> build(const nlohmann::json& doc, const BackendOptions& opts) {
  if (!doc.is_object()) return make_error("sim: the scenario must be a JSON object");
  const auto gj = doc.find("gpus");
  if (gj == doc.end() || !gj->is_array() || gj->empty())
    return make_error("sim: the scenario needs a non-empty \"gpus\" array");
  std::vector<SimGpu> gpus;
  try {
    for (const auto& jg : *gj) {
      if (!jg.is_object()) return make_error("sim: every entry of \"gpus\" must be an object");
      SimGpu g;
      if (auto it = jg.find("name"); it != jg.end() && it->is_string()) g.name = it->get<std::string>();
      g.memory_total_mib = number(jg, "memory_total_mib", g.memory_total_mib);
      g.power_limit_w = number(jg, "power_limit_w", g.power_limit_w);
      g.idle_power_w = number(jg, "idle_power_w", g.idle_power_w);
      g.lost_after_s = number(jg, "lost_after_s", -1);
      if (auto it = jg.find("unsupported"); it != jg.end()) {
        if (!it->is_array()) return make_error("sim: \"unsupported\" must be an array of field keys");
        for (const auto& k : *it) {
          const auto f = k.is_string() ? core::field_by_json_key(k.get<std::string>()) : std::nullopt;
          if (!f) return make_error("sim: \"unsupported\": " + k.dump() + " is not a field key (see gpufleet fields)");
          g.unsupported.push_back(*f);
        }
      }
      if (g.memory_total_mib <= 0) return make_error("sim: memory_total_mib must be positive");
      if (auto it = jg.find("load"); it != jg.end()) {
        if (!it->is_array()) return make_error("sim: \"load\" must be an array");
        for (const auto& jp : *it) {
          if (!jp.is_object()) return make_error("sim: every load point must be an object");
          LoadPoint p{number(jp, "t", 0), number(jp, "utilization", 0), number(jp, "memory_used_mib", 0)};
          if (!g.load.empty() && p.t_s < g.load.back().t_s) return make_error("sim: load points must be in time order");
          g.load.push_back(p);
        }
      }
      g.period_s = number(jg, "period_s", g.load.size() > 1 ? g.load.back().t_s : 0);
      gpus.push_back(std::move(g));
    }
    const std::size_t scenario_gpus = gpus.size();
    const TopologySpec topology = parse_topology(doc, scenario_gpus);
    if (opts.sim_gpus > 0) {
      // Replicate (or trim) the scenario's GPUs, phase-shifting copies so they do not move in lockstep.
      const std::size_t base = gpus.size();
      gpus.resize(std::min<std::size_t>(gpus.size(), opts.sim_gpus));
      for (std::size_t i = gpus.size(); i < opts.sim_gpus; ++i) {
        SimGpu g = gpus[i % base];
        if (g.period_s > 0) {
          const double shift = g.period_s * static_cast<double>(i) / static_cast<double>(opts.sim_gpus);
          std::vector<LoadPoint> shifted;
          for (double k = 0; k <= 1; ++k)
            for (const auto& p : g.load)
              shifted.push_back({p.t_s + shift + (k - 1) * g.period_s, p.utilization, p.memory_used_mib});
          std::erase_if(shifted, [](const LoadPoint& p) { return p.t_s < 0; });
          g.load = std::move(shifted);
        }
        gpus.push_back(std::move(g));
      }
    }
    std::vector<SimProcess> procs;
    if (auto pj = doc.find("processes"); pj != doc.end()) {
      if (!pj->is_array()) return make_error("sim: \"processes\" must be an array");
      for (const auto& jp : *pj) {
        if (!jp.is_object()) return make_error("sim: every process must be an object");
        SimProcess sp;
        sp.gpu = static_cast<unsigned>(number(jp, "gpu", 0));
        sp.proc.pid = static_cast<std::uint32_t>(number(jp, "pid", 0));
        if (auto it = jp.find("used_memory_mib"); it != jp.end() && it->is_number())
          sp.proc.used_memory_mib = it->get<std::uint64_t>();
        sp.proc.name = jp.value("name", std::string("sim-job"));
        sp.proc.user = jp.value("user", std::string("sim"));
        sp.proc.command = jp.value("command", sp.proc.name) + "  (simulated)";
        if (sp.gpu < gpus.size()) procs.push_back(std::move(sp));
      }
    }
    std::string driver = doc.contains("driver_version") && doc["driver_version"].is_string()
                             ? doc["driver_version"].get<std::string>()
                             : std::string("simulated");
    const core::Clock& clock = opts.clock ? *opts.clock : platform::system_clock();
    core::Topology topo = build_topology(topology, scenario_gpus, gpus.size());
    return std::unique_ptr<Backend>(
        new SimBackend(std::move(gpus), std::move(procs), std::move(driver), std::move(topo), clock));
  } catch (const std::exception& e) {
    return make_error(std::string("sim: bad scenario: ") + e.what());
  }
}

}  // namespace

Result<std::unique_ptr<Backend>> open_sim(const BackendOptions& opts) {
  std::string text = kDemoScenario;
  if (!opts.sim_scenario.empty()) {
    std::ifstream in(opts.sim_scenario);
    if (!in) return make_error("sim: cannot read scenario file " + opts.sim_scenario);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded())
    return make_error("sim: " + (opts.sim_scenario.empty() ? std::string("built-in scenario") : opts.sim_scenario) +
                      " is not valid JSON");
  return build(doc, opts);
}

}  // namespace gf::backends
