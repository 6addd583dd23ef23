// `gpufleet estimate` and `gpufleet task run`: what a task needs, and running its parameter grid.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "estimate/estimate.hpp"
#include "platform/fs.hpp"
#include "wire/agent_docs.hpp"

namespace gf::app {
namespace {

Result<estimate::TaskValue> read_task(const std::string& path) {
  auto text = platform::read_file(path, 16 * 1024 * 1024);
  if (!text) return make_error("cannot read task file " + path);
  auto task = estimate::parse_task(*text);
  if (!task) return with_context(path + ": ", task.error());
  return task;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

std::string value_text(const estimate::TaskValue& v) {
  return v.is_string() ? v.get_string() : estimate::to_json_text(v);
}

}  // namespace

int run_estimate(const GlobalOptions&, const std::string& path, const std::string& engine, const std::string& method,
                 bool json) {
  auto task = read_task(path);
  if (!task) {
    print_error(task.error().message);
    return exit_code(task.error());
  }
  estimate::EstimateOptions opts;
  opts.engine = engine;
  auto m = estimate::parse_memory_method(method);
  if (!m) {
    print_error(m.error().message);
    return kExitUsage;
  }
  opts.method = *m;
  auto e = estimate::estimate(*task, opts);
  if (!e) {
    print_error(path + ": " + e.error().message);
    return exit_code(e.error());
  }
  for (const auto& w : e->warnings) std::fprintf(stderr, "gpufleet: warning: %s: %s\n", path.c_str(), w.c_str());
  if (json) {
    std::printf("%s\n", wire::estimate_json(e->gpus, e->memory_mb_per_gpu, e->memory_fraction, e->engine,
                                            e->explanation, e->method, e->warnings)
                            .dump(2)
                            .c_str());
  } else {
    std::printf("%u GPU(s), %llu MiB free on each%s\n", e->gpus, static_cast<unsigned long long>(e->memory_mb_per_gpu),
                e->memory_fraction
                    ? fmt::format(" (the engine reserves {:.0f} % of each GPU)", *e->memory_fraction * 100).c_str()
                    : "");
    std::printf("%s\n", e->explanation.c_str());
  }
  return kExitOk;
}

namespace {

// Every job of the grid estimated before any runs: a bad value should not surface after an hour of
// runs. An exit status when one fails (and said why).
std::optional<int> estimate_grid(const TaskCommand& t, const estimate::TaskValue& task,
                                 const std::vector<estimate::TaskValue>& grid,
                                 std::vector<estimate::Estimate>& estimates) {
  estimate::EstimateOptions eo;
  eo.engine = t.engine;
  auto method = estimate::parse_memory_method(t.method);
  if (!method) {
    print_error(method.error().message);
    return kExitUsage;
  }
  eo.method = *method;
  for (const auto& combo : grid) {
    estimate::TaskValue one = task;
    one.set("parameters", combo);
    auto e = estimate::estimate(one, eo);
    if (!e) {
      print_error(fmt::format("{}: job {}: {}", t.path, estimate::to_json_text(combo), e.error().message));
      return exit_code(e.error());
    }
    estimates.push_back(std::move(*e));
  }
  return std::nullopt;
}

// An engine that reserves a fraction of every GPU (vLLM's gpu-memory-utilization, SGLang's
// mem-fraction-static) needs that fraction of the GPU's memory free: taken of the largest GPU here.
// 0 when no job's engine reserves one (the GPUs are not read then).
std::uint64_t largest_gpu_mib(const GlobalOptions& g, const std::vector<estimate::Estimate>& estimates) {
  std::uint64_t largest = 0;
  for (const auto& e : estimates) {
    if (!e.memory_fraction) continue;
    auto node = open_context(g);
    if (auto s = node.monitor->snapshot(false); s)
      for (const auto& gpu : (*s)->gpus) largest = std::max(largest, gpu.memory_total_mib.value_or(0));
    break;
  }
  return largest;
}

// One grid point as a run: its placeholders filled in its command, named after the task and its
// parameters (`label`), with the GPUs and memory of its estimate unless the command line gave them.
RunCommand job_of(const TaskCommand& t, const estimate::TaskValue& combo, const estimate::Estimate& estimate,
                  const std::string& task_name, std::uint64_t largest_gpu, std::string& label) {
  RunCommand r = t.run;
  for (const auto& [k, v] : combo.members()) {
    label += fmt::format("{}{}={}", label.empty() ? "" : " ", k, value_text(v));
    for (auto& a : r.argv) a = replace_all(a, "{" + k + "}", value_text(v));
  }
  r.alloc.name = fmt::format("{} [{}]", task_name, label);
  r.task = task_name;
  r.alloc.need.gpus = estimate.gpus;
  if (!t.min_memory_given) {
    r.alloc.need.min_free_memory_mib = estimate.memory_mb_per_gpu;
    if (estimate.memory_fraction)
      r.alloc.need.min_free_memory_mib =
          std::max(r.alloc.need.min_free_memory_mib,
                   static_cast<std::uint64_t>(*estimate.memory_fraction * static_cast<double>(largest_gpu)));
  }
  return r;
}

struct Outcome {
  std::string name;
  int code;
};

// The table of exit statuses on stderr; the task's status: ok when every job passed.
int report(const std::vector<Outcome>& outcomes) {
  int failed = 0;
  std::fprintf(stderr, "\n%-6s  %s\n", "EXIT", "JOB");
  for (const auto& o : outcomes) {
    std::fprintf(stderr, "%-6d  %s\n", o.code, o.name.c_str());
    if (o.code != 0) ++failed;  // skipped jobs count as failed
  }
  std::fprintf(stderr, "%zu passed, %d failed\n", outcomes.size() - static_cast<std::size_t>(failed), failed);
  return failed == 0 ? kExitOk : kExitError;
}

}  // namespace

int run_task(const GlobalOptions& g, const TaskCommand& t) {
  auto task = read_task(t.path);
  if (!task) {
    print_error(task.error().message);
    return exit_code(task.error());
  }
  if (t.run.argv.empty() && t.run.docker_image.empty()) {
    print_error("task run: no command given (usage: gpufleet task run TASK.json [OPTIONS] -- CMD [ARGS...])");
    return kExitUsage;
  }
  const auto* given = task->find("parameters");
  const estimate::TaskValue params = given ? *given : estimate::TaskValue::object();
  auto grid = estimate::expand_grid(params);
  if (!grid) {
    print_error(t.path + ": " + grid.error().message);
    return exit_code(grid.error());
  }
  std::vector<estimate::Estimate> estimates;
  if (auto code = estimate_grid(t, *task, *grid, estimates)) return *code;
  // Every grid point reads the same keys: say each suspicious one once.
  for (const auto& w : estimates.front().warnings)
    std::fprintf(stderr, "gpufleet: warning: %s: %s\n", t.path.c_str(), w.c_str());
  const auto* named = task->find("name");
  const std::string task_name = named && named->is_string() ? named->get_string() : std::string("task");
  const std::uint64_t largest_gpu = largest_gpu_mib(g, estimates);
  std::fprintf(stderr, "gpufleet: %zu job(s) from %s\n", grid->size(), t.path.c_str());
  std::vector<Outcome> outcomes;
  for (std::size_t i = 0; i < grid->size(); ++i) {
    std::string label;
    const RunCommand r = job_of(t, (*grid)[i], estimates[i], task_name, largest_gpu, label);
    std::fprintf(stderr, "gpufleet: job %zu/%zu: %s: %u GPU(s), %llu MiB each\n", i + 1, grid->size(), label.c_str(),
                 r.alloc.need.gpus, static_cast<unsigned long long>(r.alloc.need.min_free_memory_mib));
    // A job whose GPUs never come fails with its message; the others go on. An interrupt
    // (Ctrl-C, SIGTERM) stops the whole task.
    outcomes.push_back({r.alloc.name, run_job(g, r)});
    if (last_run_interrupted()) {
      for (std::size_t k = i + 1; k < grid->size(); ++k)
        outcomes.push_back({fmt::format("{} (skipped: interrupted)", task_name), -1});
      break;
    }
  }
  return report(outcomes);
}

}  // namespace gf::app
