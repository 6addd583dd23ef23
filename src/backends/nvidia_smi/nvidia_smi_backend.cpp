// The nvidia-smi fallback backend: for hosts where libnvidia-ml cannot be loaded into our process
// (a container with only the tool mounted, a driver/library mismatch) but nvidia-smi still answers.
// Each snapshot runs nvidia-smi twice (GPUs, then compute processes; with a GPU in MIG mode also -L, and
// -q -x when MIG devices exist), without a shell, each under a
// hard timeout: a wedged driver makes nvidia-smi hang in the kernel, and the sampler must not hang too.
#include "backends/nvidia_smi/nvidia_smi_backend.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backends/nvidia_smi/csv.hpp"
#include "backends/nvidia_smi/mig_text.hpp"
#include "platform/clock.hpp"
#include "platform/log.hpp"
#include "platform/subprocess.hpp"

namespace gf::backends {
namespace nvidia_smi {
namespace {

// nvidia-smi prints a few hundred bytes per GPU or process; anything near this is not its output.
constexpr std::size_t kMaxOutputBytes = 4 * 1024 * 1024;
constexpr std::chrono::milliseconds kDefaultTimeout{5000};

std::string describe(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{} s", d.count() / 1000);
  return fmt::format("{} ms", d.count());
}

// First non-blank line of what the program said (nvidia-smi writes its errors to stdout).
std::string first_line(const platform::ProcessOutput& out) {
  for (const std::string* text : {&out.out, &out.err}) {
    std::string_view rest = *text;
    while (!rest.empty()) {
      const std::size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (line.empty()) continue;
      return platform::printable(line, 300);  // the reason stays one printable line
    }
  }
  return "(no output)";
}

// The --query-gpu lists, newest first. A driver that rejects a field of one list is asked the next
// list that lacks that field.
constexpr std::array<std::span<const Field> (*)() noexcept, 3> kQueryLists{&current_fields, &throttle_fields,
                                                                           &basic_fields};

bool contains(std::span<const Field> columns, std::string_view name) {
  for (const Field f : columns)
    if (field_name(f) == name) return true;
  return false;
}

class NvidiaSmiBackend final : public Backend {
 public:
  NvidiaSmiBackend(std::string exe, std::chrono::milliseconds timeout, const core::Clock& clock)
      : exe_(std::move(exe)), timeout_(timeout), clock_(clock) {}

  std::string_view name() const noexcept override { return "nvidia-smi"; }

  Result<core::Snapshot> snapshot() override {
    auto table = query_gpus();
    if (!table) return table.error();

    core::Snapshot s;
    s.timestamp = clock_.wall_now();
    s.backend = "nvidia-smi";
    s.driver_version = std::move(table->driver_version);
    s.gpus = std::move(table->gpus);
    add_processes(s);
    add_mig_instances(s);
    add_persistence_warning(s);
    return s;
  }

  // The first query, run when the backend is opened: it proves nvidia-smi answers and settles which
  // field list this driver accepts.
  Result<void> probe() {
    auto table = query_gpus();
    if (!table) return table.error();
    return {};
  }

 private:
  // Runs nvidia-smi with `args`. An error for a timeout or a program that cannot start; a non-zero
  // exit is left to the caller, which may want to read a field complaint from the output.
  Result<platform::ProcessOutput> run(std::vector<std::string> args) const {
    args.insert(args.begin(), exe_);
    platform::RunOptions ro;
    ro.timeout = timeout_;
    ro.max_output_bytes = kMaxOutputBytes;
    auto out = platform::run_process(args, ro);
    if (!out) return make_error("nvidia-smi: " + out.error().message);
    if (out->timed_out)
      return make_error(fmt::format("nvidia-smi did not answer within {}; killed it", describe(timeout_)));
    return out;
  }

  static Error exit_error(const platform::ProcessOutput& out) {
    return make_error(fmt::format("nvidia-smi exited with status {}: {}", out.exit_code, first_line(out)));
  }

  Result<GpuTable> query_gpus() {
    for (std::size_t i = list_; i < kQueryLists.size();) {
      const auto columns = kQueryLists[i]();
      auto out = run({"--query-gpu=" + join_fields(columns), "--format=csv,noheader,nounits"});
      if (!out) return out.error();
      // nvidia-smi refuses an unknown field with a message and a non-zero exit (2).
      if (auto rejected = out->exit_code != 0 ? rejected_field(out->out + out->err) : std::nullopt) {
        // Older drivers do not know the newer names (clocks_event_reasons.* arrived with R535). Move on
        // to the next list without that field and remember it, so later snapshots ask it directly.
        std::size_t next = i + 1;
        while (next < kQueryLists.size() && !rejected->empty() && contains(kQueryLists[next](), *rejected)) ++next;
        if (next >= kQueryLists.size()) return exit_error(*out);
        i = next;
        continue;
      }
      if (out->exit_code != 0) return exit_error(*out);
      auto table = parse_gpu_lines(out->out, columns);
      if (!table) return make_error("nvidia-smi --query-gpu printed something unexpected: " + table.error().message);
      list_ = i;
      return table;
    }
    return make_error("nvidia-smi accepts none of the known --query-gpu field lists");
  }

  Result<std::vector<ComputeApp>> query_compute_apps() const {
    auto out = run({"--query-compute-apps=" + std::string(kComputeAppsQuery), "--format=csv,noheader,nounits"});
    if (!out) return out.error();
    if (out->exit_code != 0) return exit_error(*out);
    return parse_compute_apps(out->out);
  }

  // nvidia-smi has no CSV query for graphics processes (there is --query-compute-apps and nothing
  // like it for graphics; only the human-readable table lists "G" processes, and parsing that is not
  // worth its fragility). So this backend sees compute processes only, and says so.
  void add_processes(core::Snapshot& s) const {
    auto apps = query_compute_apps();
    if (!apps) {
      // The GPU readings are good; losing the process list must not cost the whole snapshot.
      s.process_visibility = {false, "nvidia-smi --query-compute-apps failed: " + apps.error().message};
      return;
    }
    for (auto& app : *apps) {
      for (auto& g : s.gpus) {
        if (!g.uuid.empty() && g.uuid == app.gpu_uuid) {
          g.processes.push_back(std::move(app.process));
          break;
        }
      }
    }
    s.process_visibility = {false, "nvidia-smi lists compute processes only; graphics processes are not shown"};
  }

  // MIG: only when a GPU is in MIG mode. `nvidia-smi -L` (one quick call for every GPU) names the MIG
  // devices; only when it lists some is the query interface (`-q -x`, one call for every GPU) asked for
  // their instance ids and memory and the processes' instance ids. So at most two extra runs per
  // collection, none on a node without MIG.
  void add_mig_instances(core::Snapshot& s) const {
    bool any = false;
    for (auto& g : s.gpus) {
      if (!g.mig_enabled.value_or(false)) continue;
      any = true;
      // Under MIG nvidia-smi prints [N/A] for the whole GPU's utilization: say why.
      for (auto* r : {&g.utilization_pct, &g.memory_utilization_pct})
        if (!*r && r->why() == core::Absent::Unavailable)
          *r = core::Reading<unsigned>::absent(core::Absent::MigEnabled);
    }
    if (!any) return;
    auto listed = run_parsed({"-L"}, &parse_list);
    if (!listed) {
      s.warnings.push_back("MIG devices are not shown: " + listed.error().message);
      return;
    }
    const bool devices =
        std::any_of(listed->begin(), listed->end(), [](const ListedGpu& g) { return !g.migs.empty(); });
    if (!devices) return;
    auto xml = run_parsed({"-q", "-x"}, &parse_query_xml);
    auto problems = nvidia_smi::add_mig_instances(s.gpus, *listed, xml ? *xml : std::vector<XmlGpu>{});
    if (!xml) {  // one sentence for all the devices it leaves out
      s.warnings.push_back("MIG devices are not shown: " + xml.error().message);
      return;
    }
    for (auto& p : problems) s.warnings.push_back(std::move(p));
  }

  template <class T>
  Result<T> run_parsed(std::vector<std::string> args, Result<T> (*parse)(std::string_view)) const {
    auto out = run(std::move(args));
    if (!out) return out.error();
    if (out->exit_code != 0) return exit_error(*out);
    return parse(out->out);  // its errors name the command
  }

  static void add_persistence_warning(core::Snapshot& s) {
    std::vector<unsigned> off;
    for (const auto& g : s.gpus)
      if (g.persistence_mode.has_value() && !*g.persistence_mode) off.push_back(g.index);
    if (off.empty()) return;
    s.warnings.push_back(
        fmt::format("Persistence mode is off on GPU{} {}, so the driver tears the GPU down when idle and the first "
                    "queries become slow; enable it with `nvidia-smi -pm 1`.",
                    off.size() > 1 ? "s" : "", fmt::join(off, ", ")));
  }

  std::string exe_;
  std::chrono::milliseconds timeout_;
  const core::Clock& clock_;
  std::size_t list_ = 0;  // index into kQueryLists of the list this driver accepts
};

}  // namespace
}  // namespace nvidia_smi

Result<std::unique_ptr<Backend>> open_nvidia_smi(const BackendOptions& opts) {
  const auto exe = platform::find_executable(opts.nvidia_smi);
  if (!exe) {
    if (opts.nvidia_smi.find('/') == std::string::npos) return make_error(opts.nvidia_smi + ": not found in PATH");
    return make_error(opts.nvidia_smi + ": not found or not executable");
  }
  // A zero or negative timeout would kill every run at once; take the default instead.
  const auto timeout = opts.nvidia_smi_timeout.count() > 0 ? opts.nvidia_smi_timeout : nvidia_smi::kDefaultTimeout;
  const core::Clock& clock = opts.clock ? *opts.clock : platform::system_clock();
  auto backend = std::make_unique<nvidia_smi::NvidiaSmiBackend>(*exe, timeout, clock);
  if (auto probed = backend->probe(); !probed) return probed.error();
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gf::backends
