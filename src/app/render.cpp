#include "app/render.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "core/fields.hpp"
#include "core/gpu_health.hpp"
#include "core/mig.hpp"
#include "core/policy.hpp"
#include "platform/log.hpp"

namespace gf::app {
namespace {

using core::Field;
using platform::printable;

std::string unit(Field f) { return std::string(core::info(f).unit); }

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string lpad(std::string s, std::size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string mem_mib(std::uint64_t mib) {
  return mib >= 10240 ? fmt::format("{:.1f}G", static_cast<double>(mib) / 1024.0) : fmt::format("{}M", mib);
}

std::string header(const core::Snapshot& s, const std::string& host, const Style& st) {
  const auto t = std::chrono::system_clock::to_time_t(s.timestamp);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string h = fmt::format("{}  {:%Y-%m-%d %H:%M:%S}  backend {}", st.paint(printable(host), "1"), tm, s.backend);
  if (!s.driver_version.empty()) h += "  driver " + printable(s.driver_version);
  if (!s.cuda_driver_version.empty()) h += "  CUDA " + printable(s.cuda_driver_version);
  return h;
}

// The columns this file lays out itself, deliberately: temperature and utilization share a cell and are
// coloured by heat and by the busy rule; memory and power are "used / limit unit" pairs. Every other
// field with a status cell in the table (core::FieldInfo::status) follows them generically.
constexpr Field kFixedColumns[] = {Field::Temperature, Field::Utilization, Field::MemoryUsed,
                                   Field::MemoryTotal, Field::PowerDraw,   Field::PowerLimit};
constexpr int kHotCelsius = 80;  // a temperature at or above this is shown bold

bool is_fixed(Field f) {
  return std::find(std::begin(kFixedColumns), std::end(kFixedColumns), f) != std::end(kFixedColumns);
}

// The fields a status line shows, in its order: the fixed columns, then the table's other status cells.
const std::vector<Field>& status_fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> v(std::begin(kFixedColumns), std::end(kFixedColumns));
    for (const auto& f : core::kFields)
      if (f.status.width > 0 && !is_fixed(f.id)) v.push_back(f.id);
    return v;
  }();
  return fields;
}

// A present value as the status line writes it (integers as they are, doubles with the cell's decimals).
std::string value_text(Field f, const core::FieldValue& v) {
  switch (v.kind) {
    case core::FieldValue::Kind::Unsigned: return fmt::format("{}", v.u);
    case core::FieldValue::Kind::Signed: return fmt::format("{}", v.i);
    case core::FieldValue::Kind::Double: return fmt::format("{:.{}f}", v.d, core::info(f).status.decimals);
    case core::FieldValue::Kind::Absent: break;
  }
  return "n/a";
}

// The field's value right-aligned to its cell's width ("n/a" when absent).
std::string cell(Field f, const core::GpuReading& g) {
  return lpad(value_text(f, core::read(f, g)), core::info(f).status.width);
}

}  // namespace

std::string missing_legend(const core::Snapshot& s) {
  // (field, reason) → GPUs, in status-line order; lost or failed GPUs say so on their own line instead.
  const auto& fields = status_fields();
  std::map<std::pair<std::size_t, core::Absent>, std::vector<unsigned>> missing;
  for (const auto& g : s.gpus) {
    if (g.health != core::Health::Ok) continue;
    for (std::size_t i = 0; i < fields.size(); ++i)
      if (const auto v = core::read(fields[i], g); !v.has_value()) missing[{i, v.why}].push_back(g.index);
  }
  std::string out;
  for (const auto& [key, gpus] : missing) {
    out += out.empty() ? "n/a: " : "; ";
    out += fmt::format("{} {} on GPU {}", core::info(fields[key.first]).label, core::to_string(key.second),
                       fmt::join(gpus, ","));
  }
  return out;
}

std::string Style::paint(const std::string& text, const char* sgr) const {
  if (!color) return text;
  return fmt::format("\x1b[{}m{}\x1b[0m", sgr, text);
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::vector<std::string> render_status(const core::Snapshot& s, const std::string& host, const Style& st) {
  std::vector<std::string> out;
  if (s.simulated) out.push_back(st.paint("SIMULATED GPUs (--backend sim): not real hardware", "1;30;43"));
  out.push_back(header(s, host, st));
  std::size_t name_w = 9;  // "(unknown)"
  for (const auto& g : s.gpus) name_w = std::max(name_w, printable(g.name).size());
  for (const auto& g : s.gpus) {
    std::string line = st.paint(fmt::format("[{}]", g.index), "36") + " " +
                       st.paint(pad(g.name.empty() ? "(unknown)" : printable(g.name), name_w), "34") + " |";
    if (g.health != core::Health::Ok) {
      line += " " + st.paint(fmt::format("{}: {}", g.health == core::Health::Lost ? "LOST" : "ERROR",
                                         printable(g.health_message)),
                             "1;31");
      out.push_back(std::move(line));
      continue;
    }
    // A GPU that needs a reset or service says so first: its other figures may look fine.
    if (const auto verdict = core::judge_health(g); !verdict.healthy)
      line += " " +
              st.paint("UNHEALTHY: " + printable(verdict.summary.substr(verdict.summary.find(": ") + 2)), "1;31") +
              " |";
    // Temperature with its unit glued on ("45°C"), utilization with a space ("50 %"), as gpustat has them.
    const auto temp = core::read(Field::Temperature, g);
    const bool hot = temp.has_value() && temp.as_double() >= kHotCelsius;
    const std::string temp_text =
        temp.has_value() ? value_text(Field::Temperature, temp) + unit(Field::Temperature) : "n/a";
    line += " " + st.paint(lpad(temp_text, core::info(Field::Temperature).status.width), hot ? "1;31" : "31");
    const auto util = core::read(Field::Utilization, g);
    const bool busy = util.has_value() && core::busy_utilization(static_cast<unsigned>(util.as_double()));
    const std::string util_text =
        util.has_value() ? value_text(Field::Utilization, util) + " " + unit(Field::Utilization) : "n/a";
    line += ", " + st.paint(lpad(util_text, core::info(Field::Utilization).status.width), busy ? "1;32" : "32");
    line += " | " + st.paint(cell(Field::MemoryUsed, g), "33") + " / " + cell(Field::MemoryTotal, g) + " " +
            unit(Field::MemoryUsed);
    line += " | " + st.paint(cell(Field::PowerDraw, g), "35") + " / " + cell(Field::PowerLimit, g) + " " +
            unit(Field::PowerDraw);
    // The table's other status cells, each when it has a value (the legend says why one has none).
    for (const auto f : status_fields()) {
      if (is_fixed(f) || !core::read(f, g).has_value()) continue;
      line += fmt::format(" | {} {}", core::info(f).label, cell(f, g));
      if (!unit(f).empty()) line += " " + unit(f);
    }
    line += " |";
    for (const auto& p : g.processes) {
      // Names come from the processes themselves: never let one steer the terminal.
      std::string who = p.name.empty() ? "pid" : printable(p.name);
      if (!p.user.empty()) who = printable(p.user) + ":" + who;
      std::string mem = p.used_memory_mib ? mem_mib(*p.used_memory_mib) : "?";
      line += " " + st.paint(fmt::format("{}/{}({})", who, p.pid, mem), "90");
    }
    out.push_back(std::move(line));
    // MIG: one line per instance under its GPU, with the full UUID (what CUDA_VISIBLE_DEVICES takes).
    // Its memory is part of the GPU's line above, not added to it.
    for (const auto& m : g.mig_instances) {
      const auto mib = [](const core::Reading<std::uint64_t>& r) {
        return r ? std::to_string(*r) : std::string("n/a");
      };
      // Its GPU instance's SM and tensor activity (GPM), when the driver gives them.
      std::string activity;
      if (m.prof_sm_active) activity += fmt::format(" | SM active {:.0f} %", *m.prof_sm_active * 100);
      if (m.prof_tensor_active) activity += fmt::format(" | tensor {:.0f} %", *m.prof_tensor_active * 100);
      out.push_back(fmt::format("    {} {} | {} / {} MiB | GI {} CI {}{} | {}", st.paint("MIG", "36"),
                                st.paint(pad(m.profile.empty() ? "?" : printable(m.profile), 10), "34"),
                                st.paint(lpad(mib(m.memory_used_mib), 6), "33"), lpad(mib(m.memory_total_mib), 6),
                                m.gpu_instance_id, m.compute_instance_id, activity, printable(m.uuid)));
    }
  }
  if (s.gpus.empty()) out.push_back(st.paint("No GPU found.", "1;33"));
  if (auto legend = missing_legend(s); !legend.empty()) out.push_back(st.paint(legend, "90"));
  // Why each unhealthy GPU is so, one sentence a problem (a lost GPU already said so on its line).
  for (const auto& g : s.gpus)
    for (const auto& p : core::judge_health(g).problems)
      if (p.code != "gpu_lost") out.push_back(st.paint("! " + printable(p.message), "1;31"));
  for (const auto& w : s.warnings)
    if (!s.simulated || w.find("simulated") == std::string::npos) out.push_back(st.paint("! " + printable(w), "33"));
  if (!s.process_visibility.complete) out.push_back(st.paint("! " + printable(s.process_visibility.message), "33"));
  return out;
}

std::vector<std::string> render_processes(const core::Snapshot& s, const Style& st) {
  struct Row {
    unsigned gpu;
    const core::GpuProcess* p;
    const core::GpuReading* g;
  };
  std::vector<Row> rows;
  for (const auto& g : s.gpus)
    for (const auto& p : g.processes) rows.push_back({g.index, &p, &g});
  const auto gpu_cell = [](const Row& r) {
    if (!r.p->gpu_instance_id) return std::to_string(r.gpu);
    if (const auto* m = core::mig_instance_of(*r.g, *r.p); m != nullptr && !m->profile.empty())
      return fmt::format("{} {}", r.gpu, printable(m->profile));
    return fmt::format("{} GI {}", r.gpu, *r.p->gpu_instance_id);
  };
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.p->used_memory_mib.has_value() != b.p->used_memory_mib.has_value()) return a.p->used_memory_mib.has_value();
    return a.p->used_memory_mib.value_or(0) > b.p->used_memory_mib.value_or(0);
  });
  std::vector<std::string> out;
  if (s.simulated) out.push_back(st.paint("SIMULATED GPUs (--backend sim): not real hardware", "1;30;43"));
  // Under MIG the GPU cell names the instance too ("0 3g.40gb", or "0 GI 2" when the instance is not
  // listed), so its column widens only when some process runs in one.
  std::size_t gpu_w = 3;
  for (const auto& r : rows) gpu_w = std::max(gpu_w, gpu_cell(r).size());
  out.push_back(st.paint(fmt::format("{:>{}}  {:>8}  {:<12}  {:>10}  {:<16}  {:<14}  {}", "GPU", gpu_w, "PID", "USER",
                                     "GPU MEM", "TYPE", "CONTAINER", "COMMAND"),
                         "1"));
  for (const auto& r : rows) {
    const auto& p = *r.p;
    out.push_back(fmt::format("{:>{}}  {:>8}  {:<12}  {:>10}  {:<16}  {:<14}  {}", gpu_cell(r), gpu_w, p.pid,
                              p.user.empty() ? "?" : printable(p.user),
                              p.used_memory_mib ? fmt::format("{} MiB", *p.used_memory_mib) : "unknown",
                              core::to_string(p.kind), printable(p.container.value_or("-")),
                              printable(p.command.empty() ? (p.name.empty() ? "?" : p.name) : p.command)));
  }
  for (const auto& g : s.gpus)
    if (g.memory_unattributed_mib && *g.memory_unattributed_mib > 0)
      out.push_back(st.paint(fmt::format("{:>{}}  {:>8}  {:<12}  {:>10}  {:<16}  {:<14}  {}", g.index, gpu_w, "-", "-",
                                         fmt::format("{} MiB", *g.memory_unattributed_mib), "-", "-",
                                         "other / not attributed (driver, contexts, processes not visible)"),
                             "90"));
  if (rows.empty()) out.push_back("No GPU processes.");
  if (!s.process_visibility.complete) out.push_back(st.paint("! " + printable(s.process_visibility.message), "33"));
  return out;
}

std::vector<std::string> render_report(const core::RunReport& r, const Style& st) {
  std::vector<std::string> out;
  out.push_back(st.paint(fmt::format("GPU monitoring: {:.1f} s, {} samples", r.duration_s, r.sample_count), "1"));
  auto range = [](const std::optional<core::MetricStats>& m, const char* unit, const char* spec) {
    if (!m) return std::string("n/a");
    return fmt::format(fmt::runtime(std::string("mean ") + spec + "{} ({}–{})"), m->mean, unit,
                       fmt::format(fmt::runtime(spec), m->min), fmt::format(fmt::runtime(spec), m->max));
  };
  for (const auto& [index, g] : r.gpus) {
    out.push_back(st.paint(fmt::format("[{}]", index), "36") + " " + printable(g.name));
    const auto u = [](Field f) { return " " + unit(f); };
    out.push_back("    utilization  " + range(g.utilization, u(Field::Utilization).c_str(), "{:.1f}") +
                  (g.utilization ? fmt::format("  p95 {:.1f}{}", g.utilization->p95, u(Field::Utilization)) : ""));
    out.push_back("    memory used  " + range(g.memory_used_mb, u(Field::MemoryUsed).c_str(), "{:.0f}"));
    out.push_back("    temperature  " + range(g.temperature_c, u(Field::Temperature).c_str(), "{:.1f}"));
    out.push_back("    power        " + range(g.power_draw_w, u(Field::PowerDraw).c_str(), "{:.1f}"));
    if (g.energy_joules)
      out.push_back(
          fmt::format("    energy       {:.1f} J ({})", *g.energy_joules,
                      g.energy_source == core::EnergySource::Counter ? "driver energy counter" : "integrated power"));
    // What the utilization was made of (NVML GPM): the mean of each activity, in percent like utilization.
    std::vector<std::string> activity;
    for (std::size_t i = 0; i < core::kProfilingFields.size(); ++i) {
      const auto& m = g.profiling[i];
      const auto& f = core::info(core::kProfilingFields[i]);
      if (m && f.unit.empty()) activity.push_back(fmt::format("{} {:.1f} %", f.label, m->mean * 100));
    }
    if (!activity.empty())
      out.push_back(fmt::format("    activity     {} (means, NVML GPM)", fmt::join(activity, ", ")));
    else if (!g.profiling_note.empty())
      out.push_back("    activity     n/a: " + printable(g.profiling_note));
  }
  if (r.gpus.empty()) out.push_back("No GPU readings were collected.");
  return out;
}

}  // namespace gf::app
