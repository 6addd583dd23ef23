#include "wire/seed_docs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "wire/json.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json percent_of(const std::optional<std::uint64_t>& part, const std::optional<std::uint64_t>& whole) {
  if (!part || !whole || *whole == 0) return nullptr;
  return std::round(static_cast<double>(*part) / static_cast<double>(*whole) * 1000) / 10;
}

// At most `n` characters of text the caller already made printable, cut on a UTF-8 boundary.
std::string shorten(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "…";
}

struct Row {
  const core::GpuReading* gpu;
  const core::GpuProcess* proc;
};

std::vector<Row> rows_by_memory(const core::Snapshot& s) {
  std::vector<Row> rows;
  for (const auto& g : s.gpus)
    for (const auto& p : g.processes) rows.push_back({&g, &p});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.proc->used_memory_mib.value_or(0) > b.proc->used_memory_mib.value_or(0);
  });
  return rows;
}

bool idle_clocks(const core::GpuReading& g) {
  if (!g.clock_event_reasons) return false;
  const auto names = core::clock_event_names(*g.clock_event_reasons);
  return std::find(names.begin(), names.end(), "gpu_idle") != names.end();
}

// "GPU 0 is at 45 °C with its fan at 30 %, drawing 60.5 W at idle clocks", from what the reading has.
std::string gpu_state(const core::GpuReading& g) {
  std::vector<std::string> parts;
  if (g.temperature_c) parts.push_back(fmt::format("at {} °C", *g.temperature_c));
  if (g.fan_pct) parts.push_back(fmt::format("with its fan at {} %", *g.fan_pct));
  if (g.power_draw_w) parts.push_back(fmt::format("drawing {:.1f} W", *g.power_draw_w));
  if (g.utilization_pct && *g.utilization_pct > 0) parts.push_back(fmt::format("{} % busy", *g.utilization_pct));
  if (idle_clocks(g)) parts.push_back("at idle clocks");
  std::string out = fmt::format("GPU {} is ", g.index);
  if (parts.empty()) return out + "not reporting temperature, fan or power";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

}  // namespace

std::string seed_timestamp(std::chrono::system_clock::time_point t) {
  auto s = iso8601(t);
  if (!s.empty() && s.back() == 'Z') s.pop_back();
  return s;
}

json monitoring_health_json(const std::string& version, std::chrono::system_clock::time_point now) {
  return {{"status", "healthy"}, {"timestamp", seed_timestamp(now)}, {"version", version}};
}

json host_metrics_json(const HostMetrics& h, std::chrono::system_clock::time_point now) {
  std::optional<std::uint64_t> used;
  if (h.memory_total && h.memory_available) used = *h.memory_total - std::min(*h.memory_total, *h.memory_available);
  // The seed's shape: memory and disk inside "system"; the extra keys sit beside the seed's own.
  return {{"timestamp", seed_timestamp(now)},
          {"system",
           {{"cpu_percent", opt(h.cpu_percent)},
            {"cpu_count", h.cpu_count},
            {"cpu_interval_s", std::round(h.cpu_interval_s * 1000) / 1000},
            {"memory",
             {{"total", opt(h.memory_total)},
              {"available", opt(h.memory_available)},
              {"used", opt(used)},
              {"free", opt(h.memory_free)},
              {"percent", percent_of(used, h.memory_total)}}},
            {"disk",
             {{"path", h.disk_path},
              {"total", opt(h.disk_total)},
              {"used", opt(h.disk_used)},
              {"free", opt(h.disk_free)},
              {"percent", percent_of(h.disk_used, h.disk_total)},
              {"error", h.disk_error.empty() ? json(nullptr) : json(h.disk_error)}}}}}};
}

json seed_detail_error(const std::string& what, const std::string& cause) {
  return {{"detail", "Failed to get " + what + ": " + cause}};
}

json home_summary_error() {
  return {{"error", "Failed to get GPU information"}, {"gpu_count", 0}, {"monitoring_available", false}};
}

json home_metrics_error() { return {{"error", "Failed to get GPU metrics"}, {"gpus", json::array()}}; }

json home_processes_error() { return {{"error", "Failed to get GPU processes"}, {"processes", json::array()}}; }

json gpu_monitoring_json(const GpuMonitoring& g) {
  return {{"available", g.available},
          {"gpu_count", g.gpu_count},
          {"last_error", g.last_error.empty() ? json(nullptr) : json(g.last_error)},
          {"backend", g.backend},
          {"stale", g.stale},
          {"age_s", g.age_s ? json(std::round(*g.age_s * 1000) / 1000) : json(nullptr)}};
}

void add_seed_health(json& health, const GpuMonitoring& g, bool store_ok) {
  health["service"] = "gpufleet";
  health["database"] = store_ok ? "connected" : "unavailable";
  health["gpu_monitoring"] = g.available ? "available" : "unavailable";
  health["monitoring"] = gpu_monitoring_json(g);
}

std::string no_gpu_message(const core::Snapshot& s) {
  if (s.backend == "none" || s.backend.empty()) {
    std::string m = "No GPU monitoring backend is available on this node, so there are no GPUs to report";
    // The monitor's warnings say why (no driver, no library); the first is enough for one sentence.
    for (const auto& w : s.warnings)
      if (w.find("no GPU backend") == std::string::npos) return m + " (" + w + ")";
    return m;
  }
  return "The " + s.backend + " backend works but sees no GPUs on this node";
}

std::string fan_explanation(const core::Snapshot& s, std::size_t top) {
  if (s.gpus.empty()) return no_gpu_message(s) + ".";
  const auto rows = rows_by_memory(s);
  if (!rows.empty()) {
    std::string out =
        rows.size() == 1 ? "1 process uses the GPUs: " : fmt::format("{} processes use the GPUs: ", rows.size());
    const std::size_t shown = std::min(rows.size(), std::max<std::size_t>(top, 1));
    for (std::size_t i = 0; i < shown; ++i) {
      const auto& p = *rows[i].proc;
      const std::string what = !p.command.empty() ? p.command : !p.name.empty() ? p.name : fmt::format("pid {}", p.pid);
      std::string detail = p.user.empty() ? "unknown user" : "user " + shorten(p.user, 32);
      detail += fmt::format(", GPU {}", rows[i].gpu->index);
      if (p.used_memory_mib) detail += fmt::format(", {} MiB", *p.used_memory_mib);
      out += (i ? "; " : "") + fmt::format("{} ({})", shorten(what, 60), detail);
    }
    if (rows.size() > shown) out += fmt::format("; and {} more", rows.size() - shown);
    return out + ".";
  }
  std::string out = "No process is using the GPUs";
  constexpr std::size_t kDescribed = 4;
  for (std::size_t i = 0; i < s.gpus.size() && i < kDescribed; ++i) out += "; " + gpu_state(s.gpus[i]);
  if (s.gpus.size() > kDescribed) out += fmt::format("; and {} more GPUs", s.gpus.size() - kDescribed);
  const bool busy_unseen =
      std::any_of(s.gpus.begin(), s.gpus.end(), [](const auto& g) { return g.utilization_pct.value_or(0) > 0; });
  if (busy_unseen)
    out += !s.process_visibility.complete && !s.process_visibility.message.empty()
               ? "; work the agent cannot see is running (" + s.process_visibility.message + ")"
               : "; work is running that the driver does not attribute to a process (a display, or another "
                 "container)";
  std::vector<unsigned> persistent;
  for (const auto& g : s.gpus)
    if (g.persistence_mode.value_or(false)) persistent.push_back(g.index);
  out += "; a fan keeps turning to cool a warm GPU even when it is idle";
  if (!persistent.empty())
    out += fmt::format(", and persistence mode keeps the driver loaded on GPU {}", fmt::join(persistent, ", "));
  return out + ".";
}

json gpu_processes_json(const core::Snapshot& s, const std::string& node) {
  const auto base = processes_json(s);
  json counts{{"compute", 0}, {"graphics", 0}, {"compute+graphics", 0}, {"mps", 0}};
  std::size_t n = 0;
  for (const auto& g : s.gpus)
    for (const auto& p : g.processes) {
      auto& c = counts[std::string(core::to_string(p.kind))];
      c = c.get<std::size_t>() + 1;
      ++n;
    }
  json gpus = json::array();
  for (const auto& g : s.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"utilization", opt(g.utilization_pct.optional())},
                    {"temperature", opt(g.temperature_c.optional())},
                    {"fan_speed", opt(g.fan_pct.optional())},
                    {"power_draw", opt(g.power_draw_w.optional())},
                    {"persistence_mode", opt(g.persistence_mode.optional())},
                    {"idle", g.clock_event_reasons ? json(idle_clocks(g)) : json(nullptr)},
                    {"process_count", g.processes.size()}});
  json out{{"timestamp", iso8601(s.timestamp)},
           {"node", node},
           {"explanation", fan_explanation(s)},
           {"gpu_count", s.gpus.size()},
           {"process_count", n},
           {"counts", std::move(counts)},
           {"processes", base.at("processes")},
           {"process_visibility", base.at("process_visibility")},
           {"gpus", std::move(gpus)}};
  if (s.gpus.empty()) out["message"] = no_gpu_message(s);
  return out;
}

void mark_freshness(json& doc, bool stale, double age_s) {
  doc["stale"] = stale;
  doc["age_s"] = std::round(std::max(0.0, age_s) * 1000) / 1000;
}

}  // namespace gf::wire
