// `gpufleet status`, `gpufleet ps`, `gpufleet backends`: one reading, printed.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/render.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

void print_lines(const std::vector<std::string>& lines, std::FILE* f = stdout) {
  for (const auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
}

// Opens the context; on an explicit backend that cannot be used, says why and yields the exit code.
std::optional<Context> open_or_report(const GlobalOptions& g, int& code) {
  Context ctx = open_context(g);
  if (ctx.explicit_backend_failed) {
    for (const auto& line : describe_steps(ctx.steps)) print_error(line);
    code = kExitNoBackend;
    return std::nullopt;
  }
  return ctx;
}

}  // namespace

int run_status(const GlobalOptions& g, bool json) {
  int code = kExitOk;
  auto ctx = open_or_report(g, code);
  if (!ctx) return code;
  auto snap = ctx->monitor->snapshot(false);
  if (!snap) {
    print_error(snap.error().message);
    return kExitError;
  }
  if (json) {
    std::printf("%s\n", wire::snapshot_json(**snap).dump(2).c_str());
  } else {
    print_lines(render_status(**snap, hostname(), Style{use_color(1, g)}));
  }
  return kExitOk;
}

int run_ps(const GlobalOptions& g, bool json) {
  int code = kExitOk;
  auto ctx = open_or_report(g, code);
  if (!ctx) return code;
  auto snap = ctx->monitor->snapshot(false);
  if (!snap) {
    print_error(snap.error().message);
    return kExitError;
  }
  if (json) {
    std::printf("%s\n", wire::processes_json(**snap).dump(2).c_str());
  } else {
    if ((*snap)->gpus.empty()) print_lines(render_status(**snap, hostname(), Style{use_color(1, g)}));
    else print_lines(render_processes(**snap, Style{use_color(1, g)}));
  }
  return kExitOk;
}

int run_backends(const GlobalOptions& g, bool json) {
  Context ctx = open_context(g);
  const bool found = ctx.monitor->has_backend();
  if (json) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : ctx.steps) steps.push_back({{"backend", s.backend}, {"chosen", s.chosen}, {"detail", s.detail}});
    std::printf("%s\n", nlohmann::json{{"chosen", found ? nlohmann::json(ctx.monitor->backend_name()) : nlohmann::json(nullptr)},
                                       {"steps", steps}}.dump(2).c_str());
  } else {
    for (const auto& s : ctx.steps)
      std::printf("%-11s %s  %s\n", s.backend.c_str(), s.chosen ? "chosen " : "skipped", s.detail.c_str());
    if (!found) std::printf("No GPU backend is usable on this machine.\n");
  }
  return found ? kExitOk : kExitNoBackend;
}

}  // namespace gf::app
