// `gpufleet status`, `gpufleet ps`, `gpufleet backends`: one reading, printed.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/render.hpp"
#include "core/fields.hpp"
#include "platform/log.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

void print_lines(const std::vector<std::string>& lines, std::FILE* f = stdout) {
  for (const auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
}

// One fresh reading, handed to `print`; the exit code of the whole verb.
template <class Print>
int with_snapshot(const GlobalOptions& g, Print print) {
  Context ctx = open_context(g);
  if (report_unusable_backend(ctx)) return kExitNoBackend;
  auto snap = ctx.monitor->snapshot(true);  // fresh: at most auto-detection's probe of a moment ago
  if (!snap) {
    print_error(snap.error().message);
    return exit_code(snap.error());
  }
  print(**snap);
  return kExitOk;
}

}  // namespace

int run_status(const GlobalOptions& g, bool json) {
  return with_snapshot(g, [&](const core::Snapshot& s) {
    if (json)
      std::printf("%s\n", wire::snapshot_json(s).dump(2).c_str());
    else
      print_lines(render_status(s, hostname(), Style{use_color(1, g)}));
  });
}

int run_ps(const GlobalOptions& g, bool json) {
  return with_snapshot(g, [&](const core::Snapshot& s) {
    if (json)
      std::printf("%s\n", wire::processes_json(s).dump(2).c_str());
    else if (s.gpus.empty())
      print_lines(render_status(s, hostname(), Style{use_color(1, g)}));  // says why
    else
      print_lines(render_processes(s, Style{use_color(1, g)}));
  });
}

int run_fields(bool json) {
  if (json) {
    std::printf("%s\n", wire::fields_json().dump(2).c_str());
    return kExitOk;
  }
  // fmt pads by display width, so "°C" lines up like the ASCII units.
  fmt::print("{:<32} {:<5} {:<38} {:<8} {}\n", "KEY", "UNIT", "PROMETHEUS", "TYPE", "HISTORY");
  for (const auto& f : core::kFields)
    fmt::print("{:<32} {:<5} {:<38} {:<8} {}\n", f.json_key, f.unit, f.prometheus_name,
               core::to_string(f.prometheus_type), f.history_metric.empty() ? std::string_view("-") : f.history_metric);
  return kExitOk;
}

int run_backends(const GlobalOptions& g, bool json) {
  Context ctx = open_context(g);
  const bool found = ctx.monitor->has_backend();
  // What the chosen backend can tell of each GPU beyond the basics: profiling (NVML GPM) or why not.
  // The reading is auto-detection's probe when there was one, so no second query.
  nlohmann::json gpus = nlohmann::json::array();
  if (found) {
    if (auto snap = ctx.monitor->snapshot(true)) {
      for (const auto& gpu : (*snap)->gpus) {
        const bool profiling = core::read(core::Field::ProfSmActive, gpu).has_value() ||
                               core::read(core::Field::ProfGraphicsActive, gpu).has_value();
        gpus.push_back({{"index", gpu.index},
                        {"uuid", gpu.uuid},
                        {"name", gpu.name},
                        {"profiling", profiling},
                        {"profiling_note",
                         gpu.profiling_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(gpu.profiling_note)}});
      }
    }
  }
  if (json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : ctx.steps)
      steps.push_back({{"backend", s.backend}, {"chosen", s.chosen}, {"detail", s.detail}});
    std::printf("%s\n", nlohmann::json{{"chosen",
                                        found ? nlohmann::json(ctx.monitor->backend_name()) : nlohmann::json(nullptr)},
                                       {"steps", steps},
                                       {"gpus", gpus}}
                            .dump(2)
                            .c_str());
  } else {
    for (const auto& s : ctx.steps)
      std::printf("%-11s %s  %s\n", s.backend.c_str(), s.chosen ? "chosen " : "skipped",
                  platform::printable(s.detail).c_str());
    for (const auto& gpu : gpus)
      if (gpu["profiling_note"].is_string())
        std::printf("GPU %u profiling: %s\n", gpu["index"].get<unsigned>(),
                    platform::printable(gpu["profiling_note"].get<std::string>()).c_str());
    if (!found) std::printf("No GPU backend is usable on this machine.\n");
  }
  return found ? kExitOk : kExitNoBackend;
}

}  // namespace gf::app
