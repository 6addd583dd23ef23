// The nvidia-smi fallback backend: for hosts where libnvidia-ml cannot be loaded into our process
// (a container with only the tool mounted, a driver/library mismatch) but nvidia-smi still answers.
// Each snapshot runs nvidia-smi twice (GPUs, then compute processes; with a GPU in MIG mode also -L, and
// -q -x when MIG devices exist), without a shell, each under a
// hard timeout: a wedged driver makes nvidia-smi hang in the kernel, and the sampler must not hang too.
//
// Health beyond --query-gpu (issue 21) costs more runs, so they are paced, and their answers kept in
// between (README, "GPU health"):
//   - remapped rows (--query-remapped-rows, a small CSV, a run like the --query-gpu one): at most
//     every kRemappedRowsInterval, so ~3 % more runs at 1 Hz. A row-remap failure makes a GPU
//     unhealthy, so every reader asks, one-shot commands included; the counters move rarely (a remap
//     happens at an uncorrectable error, and takes effect at the next reset), so 30 s loses nothing;
//   - the PCIe replay counter and the clock-event counters (-q -x, the whole query: the costliest run
//     nvidia-smi has: it asks the driver for everything): at most every kCountersInterval, only for
//     long-running readers (the same switch as XID events: BackendOptions::xid_events); they are
//     counters, read as rates over minutes, so a 60 s step costs them no meaning; free whenever the MIG
//     step ran -q -x anyway;
//   - XIDs from the kernel log (BackendOptions::kernel_log, /dev/kmsg), read without blocking at each
//     snapshot: no process at all.
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
#include "backends/nvidia_smi/health_text.hpp"
#include "backends/nvidia_smi/mig_text.hpp"
#include "core/kernel_xid.hpp"
#include "platform/clock.hpp"
#include "platform/kmsg.hpp"
#include "platform/log.hpp"
#include "platform/subprocess.hpp"

namespace gf::backends {
namespace nvidia_smi {
namespace {

// nvidia-smi prints a few hundred bytes per GPU or process; anything near this is not its output.
constexpr std::size_t kMaxOutputBytes = 4 * 1024 * 1024;
constexpr std::chrono::milliseconds kDefaultTimeout{5000};
// How often the paced health queries run (see the top of this file).
constexpr std::chrono::seconds kRemappedRowsInterval{30};
constexpr std::chrono::seconds kCountersInterval{60};

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
  NvidiaSmiBackend(std::string exe, std::chrono::milliseconds timeout, const core::Clock& clock, bool long_running)
      : exe_(std::move(exe)), timeout_(timeout), clock_(clock), long_running_(long_running) {}

  // Starts reading XIDs from the kernel log at `path`, from its end on. Without it (or when it cannot
  // be opened) last_xid is absent: "not queried", or the reason it could not be read.
  void watch_kernel_log(const std::string& path) {
    auto reader = platform::KmsgReader::open(path);
    if (reader) {
      kmsg_.emplace(std::move(*reader));
      xid_why_.reset();
      return;
    }
    const ErrorKind kind = reader.error().kind;
    xid_why_ = kind == ErrorKind::Permission ? core::Absent::NoPermission
               : kind == ErrorKind::NotFound ? core::Absent::NotSupported
                                             : core::Absent::Error;
    xid_problem_ = "XIDs are not reported: cannot read the kernel log " + reader.error().message +
                   (kind == ErrorKind::Permission ? " (it needs root or CAP_SYSLOG)" : "");
  }

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
    xml_round_.reset();
    add_mig_instances(s);
    add_remapped_rows(s);
    add_counters(s);
    add_xids(s);
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
  void add_mig_instances(core::Snapshot& s) {
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
    if (xml) xml_round_ = *xml;  // the health counters read it too
    auto problems = nvidia_smi::add_mig_instances(s.gpus, *listed, xml ? *xml : std::vector<XmlGpu>{});
    if (!xml) {  // one sentence for all the devices it leaves out
      s.warnings.push_back("MIG devices are not shown: " + xml.error().message);
      return;
    }
    for (auto& p : problems) s.warnings.push_back(std::move(p));
  }

  // Remapped rows, every kRemappedRowsInterval; the last answer in between.
  void add_remapped_rows(core::Snapshot& s) {
    const auto now = clock_.now();
    if (remapped_supported_ && remapped_every_.due(now)) {
      remapped_every_.ran(now);
      refresh_remapped_rows();
    }
    for (auto& g : s.gpus) {
      if (remapped_why_) {
        g.remapped_rows_correctable = g.remapped_rows_uncorrectable =
            core::Reading<std::uint64_t>::absent(*remapped_why_);
        g.remapped_rows_pending = g.remapped_rows_failure = core::Reading<bool>::absent(*remapped_why_);
      } else {
        apply_remapped_rows(remapped_, g);
      }
    }
    if (!remapped_problem_.empty()) s.warnings.push_back("Remapped rows are not shown: " + remapped_problem_);
  }

  void refresh_remapped_rows() {
    auto out = run({"--query-remapped-rows=" + std::string(kRemappedRowsQuery), "--format=csv,noheader,nounits"});
    remapped_problem_.clear();
    if (out && out->exit_code != 0) {
      // A driver without the query (before R450) refuses the option or its fields; one without row
      // remapping on any GPU may say "Not Supported". Either way: never ask again.
      const std::string said = out->out + out->err;
      if (rejected_field(said) || said.find("Invalid combination") != std::string::npos ||
          said.find("ot Supported") != std::string::npos || said.find("ot supported") != std::string::npos) {
        remapped_supported_ = false;
        remapped_why_ = core::Absent::NotSupported;
        return;
      }
    }
    Result<std::vector<RemappedRows>> rows = make_error("");
    if (!out) {
      rows = out.error();
    } else if (out->exit_code != 0) {
      rows = exit_error(*out);
    } else {
      rows = parse_remapped_rows(out->out);
    }
    if (!rows) {
      remapped_why_ = core::Absent::Error;
      remapped_problem_ = rows.error().message;
      return;
    }
    remapped_why_.reset();
    remapped_ = std::move(*rows);
  }

  // The PCIe replay counter and the clock-event counters from -q -x, every kCountersInterval, for
  // long-running readers only; the MIG step's -q -x of this round serves for free.
  void add_counters(core::Snapshot& s) {
    if (!long_running_) return;  // "not queried"
    const auto now = clock_.now();
    if (xml_round_) {
      counters_ = std::move(*xml_round_);
      counters_problem_.clear();
      counters_every_.ran(now);
    } else if (counters_every_.due(now)) {
      counters_every_.ran(now);
      auto xml = run_parsed({"-q", "-x"}, &parse_query_xml);
      if (xml) {
        counters_ = std::move(*xml);
        counters_problem_.clear();
      } else {
        counters_.clear();
        counters_problem_ = xml.error().message;
      }
    }
    for (auto& g : s.gpus) {
      const auto x =
          std::find_if(counters_.begin(), counters_.end(), [&](const XmlGpu& y) { return y.uuid == g.uuid; });
      if (x == counters_.end() || g.uuid.empty()) {
        const auto why = counters_problem_.empty() ? core::Absent::Unavailable : core::Absent::Error;
        for (auto* r : {&g.pcie_replay_count, &g.power_violation_us, &g.thermal_violation_us})
          *r = core::Reading<std::uint64_t>::absent(why);
        continue;
      }
      g.pcie_replay_count = x->pcie_replay_count;
      g.power_violation_us = x->power_violation_us;
      g.thermal_violation_us = x->thermal_violation_us;
    }
    if (!counters_problem_.empty())
      s.warnings.push_back("PCIe replays and clock-event times are not shown: " + counters_problem_);
  }

  // XIDs the kernel logged since the last snapshot, then every GPU's recent XIDs.
  void add_xids(core::Snapshot& s) {
    if (!kmsg_ && !xid_why_) return;  // not asked for: last_xid stays "not queried"
    if (kmsg_) {
      const auto now = clock_.wall_now();
      kmsg_->poll([&](std::string_view line) {
        const auto x = core::parse_kernel_xid(line);
        if (!x || !xids_.record(*x, now)) return;
        // A change worth a line; the detail carries a process name another user chose: printable.
        std::string who = fmt::format("PCI {:04x}:{:02x}:{:02x} (not a GPU nvidia-smi lists)", x->gpu.domain,
                                      x->gpu.bus, x->gpu.device);
        for (const auto& g : s.gpus)
          if (core::parse_pci_address(g.pci_bus_id) == x->gpu) who = fmt::format("GPU {} ({})", g.index, g.pci_bus_id);
        std::string_view detail = x->detail;
        while (!detail.empty() && (detail.front() == ',' || detail.front() == ' ')) detail.remove_prefix(1);
        platform::log_line("nvidia-smi", fmt::format("the kernel logged XID {} for {}: {}", x->xid, who,
                                                     platform::printable(detail, 160)));
      });
    }
    for (auto& g : s.gpus) {
      if (xid_why_) {
        g.last_xid = core::Reading<unsigned>::absent(*xid_why_);
      } else {
        xids_.fill(g);
      }
    }
    if (!xid_problem_.empty()) s.warnings.push_back(xid_problem_);
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
  bool long_running_ = false;

  // Remapped rows: the last answer, or why there is none (NotSupported: never asked again).
  Every remapped_every_{kRemappedRowsInterval};
  bool remapped_supported_ = true;
  std::optional<core::Absent> remapped_why_;
  std::string remapped_problem_;
  std::vector<RemappedRows> remapped_;

  // -q -x counters: the last answer, and this round's -q -x when the MIG step ran one.
  Every counters_every_{kCountersInterval};
  std::vector<XmlGpu> counters_;
  std::string counters_problem_;
  std::optional<std::vector<XmlGpu>> xml_round_;

  // XIDs from the kernel log.
  std::optional<platform::KmsgReader> kmsg_;
  std::optional<core::Absent> xid_why_;  // set when the log could not be opened
  std::string xid_problem_;
  core::KernelXids xids_;
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
  auto backend = std::make_unique<nvidia_smi::NvidiaSmiBackend>(*exe, timeout, clock, opts.xid_events);
  if (auto probed = backend->probe(); !probed) return probed.error();
  if (opts.xid_events) backend->watch_kernel_log(opts.kernel_log);
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace gf::backends
