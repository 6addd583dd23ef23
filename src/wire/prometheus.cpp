#include "wire/prometheus.hpp"

#include "core/fields.hpp"
#include "core/gpu_health.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace gf::wire {
namespace {

// ---------------------------------------------------------------------------------------------------------
// Values. A sample's value is taken from a Reading without converting integers to double, so a 64-bit
// counter (energy in mJ, ECC errors) prints exactly.

using Value = core::FieldValue;
using Kind = core::FieldValue::Kind;

constexpr Value unsigned_value(std::uint64_t v) { return core::unsigned_field(v); }
constexpr Value double_value(double v) { return core::double_field(v); }

void append_double(std::string& out, double d) {
  // The exposition format spells the special values this way; fmt would write "nan"/"inf".
  if (std::isnan(d)) {
    out += "NaN";
  } else if (std::isinf(d)) {
    out += d > 0 ? "+Inf" : "-Inf";
  } else {
    // fmt's "{}" is the shortest text that reads back to the same double, and it never consults the
    // locale (only the "L" flag does), so a decimal-comma global locale cannot turn 1.5 into 1,5.
    char buf[32];  // the longest shortest-form double, "-2.2250738585072014e-308", is 24 characters
    const auto r = fmt::format_to_n(buf, sizeof buf, FMT_COMPILE("{}"), d);
    out.append(buf, std::min(r.size, sizeof buf));
  }
}

void append_value(std::string& out, const Value& v) {
  switch (v.kind) {
    case Kind::Unsigned: {
      const fmt::format_int f(v.u);
      out.append(f.data(), f.size());
      return;
    }
    case Kind::Signed: {
      const fmt::format_int f(v.i);
      out.append(f.data(), f.size());
      return;
    }
    case Kind::Double: append_double(out, v.d); return;
    case Kind::Absent: return;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Escaping. Label values escape backslash, double quote and newline; HELP text escapes backslash and
// newline. The fast path (nothing to escape, the usual case) is one scan and one append.

// (A plain loop, not find_first_of: libstdc++'s calls memchr over the specials once per character, which was
// the largest user-side cost of a /metrics scrape, whose agent series carry ~1.7 kB of HELP text.)
void append_escaped(std::string& out, std::string_view s, std::string_view specials) {
  const bool quote = specials.find('"') != std::string_view::npos;
  bool plain = true;
  for (const char c : s)
    if (c == '\\' || c == '\n' || (quote && c == '"')) {
      plain = false;
      break;
    }
  if (plain) {
    out += s;
    return;
  }
  for (const char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (specials.find(c) != std::string_view::npos) {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
}

void append_label_value(std::string& out, std::string_view s) { append_escaped(out, s, "\\\"\n"); }
void append_help_text(std::string& out, std::string_view s) { append_escaped(out, s, "\\\n"); }

// ---------------------------------------------------------------------------------------------------------
// Families.

using Type = core::MetricType;

struct Family {
  std::string_view name;
  std::string_view help;
  Type type;
};

constexpr Family family_of(core::Field f) {
  const core::FieldInfo& i = core::info(f);
  return {i.prometheus_name, i.prometheus_help, i.prometheus_type};
}

void append_header(std::string& out, const Family& f) {
  out += "# HELP ";
  out += f.name;
  out += ' ';
  append_help_text(out, f.help);
  out += "\n# TYPE ";
  out += f.name;
  out += f.type == Type::Counter ? " counter\n" : " gauge\n";
}

// `labels` is the inside of the braces, already escaped; empty means no braces at all.
void append_sample(std::string& out, std::string_view name, std::string_view labels, const Value& v) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    out += labels;
    out += '}';
  }
  out += ' ';
  append_value(out, v);
  out += '\n';
}

struct GpuFamily {
  Family family;
  Value (*value)(const core::GpuReading&);
  // A MIG instance's own value of the family (core::kMigFields), or null: no per-instance samples.
  Value (*mig_value)(const core::MigInstance&);
};

// (A loop, not core::mig_field: GCC 12 under -fsanitize does not take a pointer's comparison with null
// as a constant expression.)
constexpr GpuFamily field_family(core::Field f) {
  for (const auto& m : core::kMigFields)
    if (m.id == f && m.per_instance_series) return {family_of(f), core::info(f).read, m.read};
  return {family_of(f), core::info(f).read, nullptr};
}

// The DCGM families, in the order of dcgm-exporter's default-counters.csv, then the extra DCGM fields we
// can fill. Names, help, units and types come from the field table (DCGM's own; its counters keep their
// names, without "_total"). No DCGM_FI_DEV_FB_RESERVED: total - used - free is the reserved memory only
// when the backend used nvmlDeviceGetMemoryInfo_v2; with v1 or nvidia-smi "used" already includes it,
// and the snapshot does not say which was used.
constexpr std::array kDcgmFamilies{
    field_family(core::Field::SmClock),
    field_family(core::Field::MemClock),
    field_family(core::Field::Temperature),
    field_family(core::Field::PowerDraw),
    field_family(core::Field::Energy),
    field_family(core::Field::Utilization),
    field_family(core::Field::MemoryUtilization),
    field_family(core::Field::MemoryFree),
    field_family(core::Field::MemoryUsed),
    field_family(core::Field::EccUncorrectedVolatile),
    field_family(core::Field::Fan),
    field_family(core::Field::PowerLimit),
    field_family(core::Field::PerformanceState),
    field_family(core::Field::ClockEventReasons),
    field_family(core::Field::PersistenceMode),
    field_family(core::Field::MigMode),
    field_family(core::Field::EccCorrectedVolatile),
    field_family(core::Field::EccCorrectedAggregate),
    field_family(core::Field::EccUncorrectedAggregate),
    field_family(core::Field::RetiredPagesSbe),
    field_family(core::Field::RetiredPagesDbe),
    field_family(core::Field::RetiredPagesPending),
    field_family(core::Field::RemappedRowsCorrectable),
    field_family(core::Field::RemappedRowsUncorrectable),
    field_family(core::Field::RemappedRowsPending),
    field_family(core::Field::RemappedRowsFailure),
    field_family(core::Field::PcieReplay),
    field_family(core::Field::PowerViolation),
    field_family(core::Field::ThermalViolation),
    field_family(core::Field::LastXid),
    field_family(core::Field::ProfGraphicsActive),
    field_family(core::Field::ProfSmActive),
    field_family(core::Field::ProfSmOccupancy),
    field_family(core::Field::ProfTensorActive),
    field_family(core::Field::ProfDramActive),
    field_family(core::Field::ProfFp64Active),
    field_family(core::Field::ProfFp32Active),
    field_family(core::Field::ProfFp16Active),
    field_family(core::Field::ProfPcieTxBytes),
    field_family(core::Field::ProfPcieRxBytes),
    field_family(core::Field::ProfNvlinkTxBytes),
    field_family(core::Field::ProfNvlinkRxBytes),
    field_family(core::Field::SmClockMax),
};

// DCGM's name for the clock-event mask before DCGM 3.3, which existing dashboards and alert rules still
// query: the same samples as DCGM_FI_DEV_CLOCKS_EVENT_REASONS, under the old name.
constexpr GpuFamily kClockThrottleAlias{
    {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
     "Why the clocks are held down now (old name of DCGM_FI_DEV_CLOCKS_EVENT_REASONS).", Type::Gauge},
    core::info(core::Field::ClockEventReasons).read,
    nullptr};

constexpr Family kHealthFamily{
    "gpufleet_gpu_health",
    "GPU health as gpufleet sees it: 1 for the current state (ok, unhealthy, lost or error; unhealthy: a critical "
    "XID or a failed row remap).",
    Type::Gauge};

constexpr std::array kGpufleetGpuFamilies{
    field_family(core::Field::AvailabilityScore),
    // DCGM exports no total (FB_TOTAL is not in dcgm-exporter's counters); free + used is not it either.
    field_family(core::Field::MemoryTotal),
    GpuFamily{{"gpufleet_gpu_processes", "Processes gpufleet sees on the GPU.", Type::Gauge},
              [](const core::GpuReading& g) { return unsigned_value(g.processes.size()); },
              nullptr},
    field_family(core::Field::MemoryUnattributed),
};

// Every field of the table is exported by exactly one of the two lists above.
constexpr bool every_field_exported() {
  for (const auto& f : core::kFields) {
    int n = 0;
    for (const auto& d : kDcgmFamilies) n += d.family.name == f.prometheus_name;
    for (const auto& d : kGpufleetGpuFamilies) n += d.family.name == f.prometheus_name;
    if (n != 1) return false;
  }
  return true;
}
static_assert(every_field_exported(), "a field of core::kFields has no Prometheus family (or two)");

struct AgentFamily {
  Family family;
  Value (*value)(const AgentStats&);
};

constexpr Family kAgentInfoFamily{"gpufleet_agent_info", "The gpufleet agent's version and GPU backend; always 1.",
                                  Type::Gauge};

constexpr std::array kAgentFamilies{
    AgentFamily{{"gpufleet_agent_uptime_seconds", "Seconds since the agent started.", Type::Gauge},
                [](const AgentStats& a) { return double_value(a.uptime_seconds); }},
    AgentFamily{{"gpufleet_collections_total", "Snapshots collected from the GPU backend.", Type::Counter},
                [](const AgentStats& a) { return unsigned_value(a.collections_total); }},
    AgentFamily{{"gpufleet_collection_errors_total", "Snapshot collections that failed.", Type::Counter},
                [](const AgentStats& a) { return unsigned_value(a.collection_errors_total); }},
    AgentFamily{
        {"gpufleet_collection_duration_seconds", "Duration of the last snapshot collection (in seconds).", Type::Gauge},
        [](const AgentStats& a) { return double_value(a.last_collection_duration_seconds); }},
    AgentFamily{{"gpufleet_leases_active", "GPU leases currently held.", Type::Gauge},
                [](const AgentStats& a) { return unsigned_value(a.active_leases); }},
    AgentFamily{{"gpufleet_jobs_waiting", "Jobs waiting for GPUs.", Type::Gauge},
                [](const AgentStats& a) { return unsigned_value(a.waiting_jobs); }},
    AgentFamily{{"gpufleet_jobs_running", "Jobs running.", Type::Gauge},
                [](const AgentStats& a) { return unsigned_value(a.jobs_running); }},
    AgentFamily{{"gpufleet_jobs_finished_total", "Jobs that have finished, whatever their outcome.", Type::Counter},
                [](const AgentStats& a) { return unsigned_value(a.jobs_finished_total); }},
    AgentFamily{{"gpufleet_alerts_firing", "Alerts currently firing.", Type::Gauge},
                [](const AgentStats& a) { return unsigned_value(a.alerts_firing); }},
    AgentFamily{{"gpufleet_websocket_clients", "WebSocket clients connected.", Type::Gauge},
                [](const AgentStats& a) { return unsigned_value(a.websocket_clients); }},
};

// Bytes of every # HELP / # TYPE pair, for the reserve.
constexpr std::size_t header_bytes(const Family& f) { return 2 * f.name.size() + f.help.size() + 32; }
constexpr std::size_t all_header_bytes() {
  std::size_t n =
      header_bytes(kHealthFamily) + header_bytes(kAgentInfoFamily) + header_bytes(kClockThrottleAlias.family);
  for (const auto& f : kDcgmFamilies) n += header_bytes(f.family);
  for (const auto& f : kGpufleetGpuFamilies) n += header_bytes(f.family);
  for (const auto& f : kAgentFamilies) n += header_bytes(f.family);
  return n;
}
constexpr std::size_t kGpuSamplesPerGpu = kDcgmFamilies.size() + 2 + kGpufleetGpuFamilies.size();

// ---------------------------------------------------------------------------------------------------------
// Labels.

bool is_nvidia_backend(std::string_view backend) {
  return backend == "nvml" || backend == "nvidia-smi" || backend == "sim";
}

// gpu="0",UUID="…",pci_bus_id="…",device="nvidia0",modelName="…"[,GPU_I_PROFILE="…",GPU_I_ID="…"]
// [,Hostname="…"] — dcgm-exporter's order; the GPU_I_ labels name a MIG instance of the GPU.
std::string gpu_labels(const core::GpuReading& g, std::string_view device_prefix, std::string_view hostname,
                       const core::MigInstance* mig = nullptr) {
  std::string l;
  l.reserve(96 + g.uuid.size() + g.pci_bus_id.size() + g.name.size() + hostname.size());
  const fmt::format_int index(g.index);
  l += "gpu=\"";
  l.append(index.data(), index.size());
  l += "\",UUID=\"";
  append_label_value(l, g.uuid);
  l += "\",pci_bus_id=\"";
  append_label_value(l, g.pci_bus_id);
  l += "\",device=\"";
  l += device_prefix;
  l.append(index.data(), index.size());
  l += "\",modelName=\"";
  append_label_value(l, g.name);
  l += '"';
  if (mig != nullptr) {
    l += ",GPU_I_PROFILE=\"";
    append_label_value(l, mig->profile);
    l += "\",GPU_I_ID=\"";
    l += fmt::format_int(mig->gpu_instance_id).c_str();
    l += '"';
  }
  if (!hostname.empty()) {
    l += ",Hostname=\"";
    append_label_value(l, hostname);
    l += '"';
  }
  return l;
}

// Per GPU, the labels of each of its MIG instances (in mig_instances order); built once per text, and only
// when some GPU has instances.
using MigLabels = std::vector<std::vector<std::string>>;

// Each GPU's sample, then (for the families with a per-instance value: framebuffer, profiling) one per
// MIG instance with the parent's labels and GPU_I_PROFILE / GPU_I_ID added, as dcgm-exporter does. The
// parent's own sample stays the whole-GPU figure: a query that adds the instances must leave it out
// ({GPU_I_ID=""} selects it). Compute instances of one GPU instance repeat its profiling values.
void write_gpu_family(std::string& out, const GpuFamily& f, const core::Snapshot& s,
                      const std::vector<std::string>& labels, const MigLabels& mig_labels) {
  bool header = false;
  auto sample = [&](std::string_view l, const Value& v) {
    if (v.kind == Kind::Absent) return;
    if (!header) {
      append_header(out, f.family);
      header = true;
    }
    append_sample(out, f.family.name, l, v);
  };
  for (std::size_t i = 0; i < s.gpus.size(); ++i) {
    const core::GpuReading& g = s.gpus[i];
    if (g.health == core::Health::Lost) continue;  // a lost GPU's values, if any, are stale
    sample(labels[i], f.value(g));
    if (f.mig_value == nullptr || i >= mig_labels.size()) continue;
    for (std::size_t k = 0; k < g.mig_instances.size(); ++k) sample(mig_labels[i][k], f.mig_value(g.mig_instances[k]));
  }
}

}  // namespace

void write_prometheus_gpus(std::string& out, const core::Snapshot& s, const std::string& hostname) {
  const std::string_view device_prefix = is_nvidia_backend(s.backend) ? "nvidia" : "gpu";
  std::vector<std::string> labels;
  labels.reserve(s.gpus.size());
  std::size_t label_bytes = 0;
  for (const auto& g : s.gpus) {
    labels.push_back(gpu_labels(g, device_prefix, hostname));
    label_bytes += labels.back().size();
  }
  // Each GPU sample is name{labels} value\n: at most ~40 bytes of name and ~24 of value around the labels.
  out.reserve(out.size() + all_header_bytes() + kGpuSamplesPerGpu * (label_bytes + s.gpus.size() * 80) + 1024);

  MigLabels mig_labels;
  const bool any_mig =
      std::any_of(s.gpus.begin(), s.gpus.end(), [](const auto& g) { return !g.mig_instances.empty(); });
  if (any_mig) {
    mig_labels.resize(s.gpus.size());
    std::size_t instance_label_bytes = 0;
    for (std::size_t i = 0; i < s.gpus.size(); ++i) {
      for (const auto& m : s.gpus[i].mig_instances) {
        mig_labels[i].push_back(gpu_labels(s.gpus[i], device_prefix, hostname, &m));
        instance_label_bytes += mig_labels[i].back().size() + 80;
      }
    }
    out.reserve(out.size() + core::kMigFields.size() * instance_label_bytes);
  }

  for (const auto& f : kDcgmFamilies) write_gpu_family(out, f, s, labels, mig_labels);
  write_gpu_family(out, kClockThrottleAlias, s, labels, mig_labels);

  if (!s.gpus.empty()) {
    append_header(out, kHealthFamily);
    for (std::size_t i = 0; i < s.gpus.size(); ++i) {
      out += kHealthFamily.name;
      out += '{';
      out += labels[i];
      out += ",state=\"";
      const auto& g = s.gpus[i];
      // Answering but unhealthy (core/gpu_health.hpp) is its own state; lost stays lost.
      out += g.health == core::Health::Ok && !core::judge_health(g).healthy ? std::string_view("unhealthy")
                                                                            : core::to_string(g.health);
      out += "\"} 1\n";
    }
  }

  for (const auto& f : kGpufleetGpuFamilies) write_gpu_family(out, f, s, labels, mig_labels);
}

void write_prometheus_agent(std::string& out, std::string_view snapshot_backend, const std::string& hostname,
                            const AgentStats& agent) {
  out.reserve(out.size() + 1024 + (kAgentFamilies.size() + 1) * hostname.size() + agent.version.size() +
              agent.backend.size());
  // Agent series: only Hostname (when set), so they filter like the GPU series.
  std::string host_label;
  if (!hostname.empty()) {
    host_label.reserve(hostname.size() + 12);
    host_label += "Hostname=\"";
    append_label_value(host_label, hostname);
    host_label += '"';
  }

  append_header(out, kAgentInfoFamily);
  out += kAgentInfoFamily.name;
  out += "{version=\"";
  append_label_value(out, agent.version);
  out += "\",backend=\"";
  append_label_value(out, agent.backend.empty() ? snapshot_backend : std::string_view(agent.backend));
  out += '"';
  if (!host_label.empty()) {
    out += ',';
    out += host_label;
  }
  out += "} 1\n";

  // Their HELP and TYPE lines never change: made once, not escaped again at every scrape.
  static const auto headers = [] {
    std::array<std::string, kAgentFamilies.size()> h;
    for (std::size_t k = 0; k < h.size(); ++k) append_header(h[k], kAgentFamilies[k].family);
    return h;
  }();
  for (std::size_t k = 0; k < kAgentFamilies.size(); ++k) {
    const auto& f = kAgentFamilies[k];
    out += headers[k];
    append_sample(out, f.family.name, host_label, f.value(agent));
  }
}

void write_prometheus_users(std::string& out, const std::string& hostname, const std::vector<UserUsage>& users) {
  if (users.empty()) return;
  struct UserFamily {
    Family family;
    double UserUsage::*value;
  };
  static constexpr std::array<UserFamily, 3> kUserFamilies{{
      {{"gpufleet_user_gpu_held_seconds_total", "GPU-seconds held by the user's leases (ended and running).",
        Type::Counter},
       &UserUsage::held_gpu_seconds},
      {{"gpufleet_user_gpu_busy_seconds_total",
        "GPU-seconds of the user's leases during which the GPU's utilization was at or above the busy threshold.",
        Type::Counter},
       &UserUsage::busy_gpu_seconds},
      {{"gpufleet_user_energy_joules_total", "Energy drawn by the GPUs of the user's leases while held (J).",
        Type::Counter},
       &UserUsage::energy_joules},
  }};
  for (const auto& f : kUserFamilies) {
    append_header(out, f.family);
    for (const auto& u : users) {
      std::string labels = "user=\"";
      append_label_value(labels, u.user);
      labels += '"';
      if (!hostname.empty()) {
        labels += ",Hostname=\"";
        append_label_value(labels, hostname);
        labels += '"';
      }
      append_sample(out, f.family.name, labels, double_value(u.*(f.value)));
    }
  }
}

void write_prometheus(std::string& out, const core::Snapshot& s, const std::string& hostname, const AgentStats& agent) {
  write_prometheus_gpus(out, s, hostname);
  write_prometheus_agent(out, s.backend, hostname, agent);
}

std::string prometheus_text(const core::Snapshot& s, const std::string& hostname, const AgentStats& agent) {
  std::string out;
  write_prometheus(out, s, hostname, agent);
  return out;
}

}  // namespace gf::wire
