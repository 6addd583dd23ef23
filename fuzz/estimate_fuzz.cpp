// libFuzzer target for GPU requirement estimation: task files are user input (`gpufleet task run
// task.json`), and so is a model directory's config.json. Crashes, sanitizer reports, exceptions that
// reach the module boundary ("internal error") and the invariant traps below are findings.
//
// Input layout: byte 0 chooses the engine option (bits 0-1: none, vllm, sglang, an invalid one) and
// whether a config.json exists (bit 2); the rest is the task text, then, after the first NUL, the
// config.json text. The filesystem is never touched: read_file is replaced.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "estimate/estimate.hpp"
#include "estimate/estimate_engine.hpp"
#include "estimate/model_size.hpp"
#include "estimate/task.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

namespace gs = gf::estimate;

void check_result(const gf::Result<gs::Estimate>& r) {
  if (!r) {
    const auto& m = r.error().message;
    check(!m.empty());
    check(m.rfind("estimate: internal error", 0) != 0);  // an exception got as far as the boundary
    return;
  }
  check(r->gpus >= 1 && r->gpus <= gs::kMaxWorldSize);
  check(r->memory_mb_per_gpu > 0);
  check(r->engine == "default" || r->engine == "vllm" || r->engine == "sglang");
  if (r->memory_fraction) check(*r->memory_fraction > 0 && *r->memory_fraction <= 1);
  check(!r->explanation.empty() && r->explanation.back() != '\n');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto nul = rest.find('\0');
  const std::string_view task_text = rest.substr(0, nul);
  const std::string config_text(nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1));
  const bool has_config = (mode & 4) != 0;

  gs::EstimateOptions options;
  constexpr const char* kEngines[] = {"", "vllm", "SGLang", "tgi"};
  options.engine = kEngines[mode & 3];
  options.read_file = [&](const std::string&) -> std::optional<std::string> {
    if (!has_config) return std::nullopt;
    return config_text;
  };

  const auto whole = gs::estimate_text(task_text, options);
  check_result(whole);

  // The same text as a TaskValue: a task is an object, and writing it out and reading it back gives
  // the same value.
  const auto task = gs::parse_task(task_text);
  check(!whole || task.has_value());  // an estimate implies a readable task
  if (task) {
    check(task->is_object());
    const auto text = gs::to_json_text(*task);
    const auto again = gs::parse_task(text);
    check(again && gs::to_json_text(*again) == text);
  }

  // Every experiment of the sweep: none may need more GPUs than the sweep's largest configuration.
  if (task) {
    if (const auto* params = task->find("parameters")) {
      const auto grid = gs::expand_grid(*params, 64);
      if (grid) {
        check(!grid->empty());
        std::size_t n = 0;
        for (const auto& experiment : *grid) {
          if (++n > 8) break;
          check(experiment.is_object() && experiment.size() == params->size());
          auto one = *task;
          one.set("parameters", experiment);
          const auto r = gs::estimate(one, options);
          check_result(r);
          if (r && whole) check(r->gpus <= whole->gpus);
        }
      }
    }
  }

  // The pure parts on their own.
  if (const auto shape = gs::parse_model_config(config_text)) {
    const double total = gs::count_parameters(*shape).total();
    check(std::isfinite(total) && total > 0);
  }
  if (const auto named = gs::size_from_name(task_text)) {
    check(named->params > 0 && named->params <= 1e15);
    check(named->bytes == 0.5 || named->bytes == 1.0 || named->bytes == 2.0);
  }
  return 0;
}
