#include "wire/json.hpp"

#include "core/fields.hpp"
#include "core/gpu_health.hpp"
#include "core/mig.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gf::wire {

double round_to(double v, int decimals) {
  // A table, not std::pow: pow is the only caller of libm's large pow code and tables on the rendering
  // path, and faulting them in cost ~128 KiB of RSS at the agent's first rendering (issue 24, goal 1).
  static constexpr double kPowersOfTen[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
  if (decimals <= 0) return std::round(v);
  const double f = kPowersOfTen[std::min(decimals, 9)];
  return std::round(v * f) / f;
}

namespace {

using nlohmann::json;

// A field's JSON value as the table says to write it; null when absent.
json field_json(const core::FieldInfo& f, const core::FieldValue& v) {
  using Kind = core::FieldValue::Kind;
  if (!v.has_value()) return nullptr;
  switch (f.json_form) {
    case core::JsonForm::Boolean: return v.as_double() != 0;
    case core::JsonForm::EnabledDisabled: return v.as_double() != 0 ? "enabled" : "disabled";
    case core::JsonForm::PerformanceState: return fmt::format("P{}", v.u);
    case core::JsonForm::ClockEventNames: {
      json names = json::array();
      for (auto n : core::clock_event_names(v.u)) names.push_back(std::string(n));
      return names;
    }
    case core::JsonForm::Number: break;
  }
  switch (v.kind) {
    case Kind::Unsigned: return v.u;
    case Kind::Signed: return v.i;
    case Kind::Double: return f.json_decimals > 0 ? round_to(v.d, f.json_decimals) : v.d;
    case Kind::Absent: break;
  }
  return nullptr;
}

json process_json(const core::GpuProcess& p, const core::GpuReading* gpu = nullptr) {
  json j{{"pid", p.pid},
         {"name", p.name},
         {"user", p.user.empty() ? json(nullptr) : json(p.user)},
         {"command", p.command.empty() ? json(nullptr) : json(p.command)},
         {"used_memory_mb", p.used_memory_mib ? json(*p.used_memory_mib) : json(nullptr)},
         {"type", std::string(core::to_string(p.kind))},
         {"container", p.container ? json(*p.container) : json(nullptr)}};
  if (p.container_pid) j["container_pid"] = *p.container_pid;
  // MIG: the instance the driver says the process runs in (null when MIG is off or it does not say).
  j["gpu_instance_id"] = p.gpu_instance_id ? json(*p.gpu_instance_id) : json(nullptr);
  j["compute_instance_id"] = p.compute_instance_id ? json(*p.compute_instance_id) : json(nullptr);
  const core::MigInstance* m = gpu != nullptr ? core::mig_instance_of(*gpu, p) : nullptr;
  j["mig_uuid"] = m ? json(m->uuid) : json(nullptr);
  j["mig_profile"] = m ? json(m->profile) : json(nullptr);
  // Only backends that measure it per process (DRM fdinfo) say anything; elsewhere the key is left out.
  // A null says why, as a GPU's fields do.
  if (p.utilization_pct) {
    j["utilization"] = *p.utilization_pct;
  } else if (p.utilization_pct.why() != core::Absent::NotQueried) {
    j["utilization"] = nullptr;
    j["missing_reasons"] = {{"utilization", std::string(core::code(p.utilization_pct.why()))}};
  }
  return j;
}

json metric_json(const std::optional<core::MetricStats>& m, bool with_samples) {
  if (!m) return nullptr;
  json j{{"min", round_to(m->min, 3)},
         {"max", round_to(m->max, 3)},
         {"mean", round_to(m->mean, 3)},
         {"p50", round_to(m->p50, 3)},
         {"p95", round_to(m->p95, 3)}};
  if (with_samples) j["samples"] = m->samples;
  return j;
}

// What the GPU's "utilization" was made of over the run (NVML GPM): each activity ratio's and
// throughput's statistics under its key in the GPU document's "profiling" object; a field no sample had
// is left out (a record is kept under a size limit: twelve nulls per GPU add up), and "note" says why
// when there are none at all.
json profiling_json(const core::GpuRunStats& g) {
  json out = json::object();
  for (std::size_t i = 0; i < core::kProfilingFields.size(); ++i) {
    std::string_view key = core::info(core::kProfilingFields[i]).json_key;
    key.remove_prefix(key.find('.') + 1);  // "profiling.tensor_active" -> "tensor_active"
    const auto& m = g.profiling[i];
    if (!m) continue;
    // Ratios keep 4 decimals (as in the GPU document); bytes/s are whole numbers.
    const int decimals = core::info(core::kProfilingFields[i]).json_decimals;
    out[std::string(key)] = json{{"min", round_to(m->min, decimals)},   {"max", round_to(m->max, decimals)},
                                 {"mean", round_to(m->mean, decimals)}, {"p50", round_to(m->p50, decimals)},
                                 {"p95", round_to(m->p95, decimals)},   {"samples", m->samples}};
  }
  if (!g.profiling_note.empty()) out["note"] = g.profiling_note;
  return out;
}

std::string_view energy_source(core::EnergySource s) {
  switch (s) {
    case core::EnergySource::Counter: return "energy_counter";
    case core::EnergySource::IntegratedPower: return "integrated_power";
    case core::EnergySource::None: break;
  }
  return "none";
}

}  // namespace

// The health verdict (core/gpu_health.hpp) and the XIDs behind it.
static void add_health_verdict(json& j, const core::GpuReading& g) {
  const auto verdict = core::judge_health(g);
  auto problems = [](const std::vector<core::HealthProblem>& list) {
    json out = json::array();
    for (const auto& p : list) out.push_back({{"code", p.code}, {"message", p.message}});
    return out;
  };
  j["healthy"] = verdict.healthy;
  j["health_problems"] = problems(verdict.problems);
  j["health_notes"] = problems(verdict.notes);
  json xids = json::array();
  for (const auto& x : g.recent_xids) xids.push_back({{"xid", x.xid}, {"time", iso8601(x.time)}});
  j["recent_xids"] = std::move(xids);
}
namespace {
// Puts `v` at a field's json_key under `j` ("memory.used" -> j["memory"]["used"]).
void put_at_key(json& j, std::string_view key, json v) {
  json* slot = &j;
  for (auto dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.')) {
    slot = &(*slot)[std::string(key.substr(0, dot))];
    key.remove_prefix(dot + 1);
  }
  (*slot)[std::string(key)] = std::move(v);
}

// A MIG instance: its identity, then the fields it has of its own (core::kMigFields: memory, the profiling
// of its GPU instance) at the same keys as in the GPU's object, null with the reason when absent.
json mig_instance_json(const core::MigInstance& m) {
  json j{{"index", m.index},
         {"uuid", m.uuid},
         {"profile", m.profile.empty() ? json(nullptr) : json(m.profile)},
         {"name", m.name},
         {"gpu_instance_id", m.gpu_instance_id},
         {"compute_instance_id", m.compute_instance_id}};
  json missing = json::object();
  for (const auto& mf : core::kMigFields) {
    const core::FieldInfo& f = core::info(mf.id);
    const core::FieldValue v = mf.read(m);
    put_at_key(j, f.json_key, field_json(f, v));
    if (!v.has_value()) missing[std::string(f.json_key)] = std::string(core::code(v.why));
  }
  j["missing_reasons"] = std::move(missing);
  j["profiling_note"] = m.profiling_note.empty() ? json(nullptr) : json(m.profiling_note);
  return j;
}
}  // namespace

json gpu_json(const core::GpuReading& g) {
  json procs = json::array();
  for (const auto& p : g.processes) procs.push_back(process_json(p, &g));
  json instances = json::array();
  for (const auto& m : g.mig_instances) instances.push_back(mig_instance_json(m));
  json j{
      {"id", fmt::format("gpu-{}", g.index)},
      {"index", g.index},
      {"name", g.name},
      {"uuid", g.uuid},
      {"pci_bus_id", g.pci_bus_id},
      {"health", std::string(core::to_string(g.health))},
      {"health_message", g.health_message.empty() ? json(nullptr) : json(g.health_message)},
      {"processes", std::move(procs)},
      // MIG: the GPU's instances (their memory is part of the GPU's, never added to it); empty when MIG is off.
      {"mig_instances", std::move(instances)},
  };
  add_health_verdict(j, g);
  // Every metric from the field table: its value at its key, or null and the reason in missing_reasons.
  json missing = json::object();
  for (const auto& f : core::kFields) {
    const core::FieldValue v = f.read(g);
    put_at_key(j, f.json_key, field_json(f, v));
    if (!v.has_value()) missing[std::string(f.json_key)] = std::string(core::code(v.why));
  }
  j["missing_reasons"] = std::move(missing);
  // Why the profiling (GPM) readings are missing, when they are: no GPM before Hopper, a driver without
  // it, the first sample of a span, MIG. Null when they are there.
  j["profiling_note"] = g.profiling_note.empty() ? json(nullptr) : json(g.profiling_note);
  return j;
}

json fields_json() {
  json fields = json::array();
  for (const auto& f : core::kFields) {
    fields.push_back({{"key", f.json_key},
                      {"label", f.label},
                      {"unit", f.unit.empty() ? json(nullptr) : json(f.unit)},
                      {"description", f.description},
                      {"prometheus", {{"name", f.prometheus_name}, {"type", core::to_string(f.prometheus_type)}}},
                      {"history_metric", f.history_metric.empty() ? json(nullptr) : json(f.history_metric)}});
  }
  json reasons = json::object();
  for (const auto& r : core::kAbsentReasons) reasons[std::string(r.code)] = std::string(r.words);
  return json{{"fields", std::move(fields)}, {"missing_reasons", std::move(reasons)}};
}

json snapshot_json(const core::Snapshot& s) {
  json gpus = json::array();
  for (const auto& g : s.gpus) gpus.push_back(gpu_json(g));
  return json{
      {"timestamp", iso8601(s.timestamp)},
      {"backend", s.backend},
      {"simulated", s.simulated},
      {"driver_version", s.driver_version.empty() ? json(nullptr) : json(s.driver_version)},
      {"cuda_driver_version", s.cuda_driver_version.empty() ? json(nullptr) : json(s.cuda_driver_version)},
      {"warnings", s.warnings},
      {"process_visibility",
       {{"complete", s.process_visibility.complete},
        {"message", s.process_visibility.message.empty() ? json(nullptr) : json(s.process_visibility.message)}}},
      {"gpus", std::move(gpus)},
  };
}

json processes_json(const core::Snapshot& s) {
  struct Row {
    const core::GpuReading* gpu;
    const core::GpuProcess* proc;
  };
  std::vector<Row> rows;
  for (const auto& g : s.gpus)
    for (const auto& p : g.processes) rows.push_back({&g, &p});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const auto ma = a.proc->used_memory_mib, mb = b.proc->used_memory_mib;
    if (ma.has_value() != mb.has_value()) return ma.has_value();
    return ma.value_or(0) > mb.value_or(0);
  });
  json list = json::array();
  for (const auto& r : rows) {
    json j = process_json(*r.proc, r.gpu);
    j["gpu_index"] = r.gpu->index;
    j["gpu_uuid"] = r.gpu->uuid;
    list.push_back(std::move(j));
  }
  json unattributed = json::array();
  for (const auto& g : s.gpus)
    if (g.memory_unattributed_mib && *g.memory_unattributed_mib > 0)
      unattributed.push_back({{"gpu_index", g.index}, {"memory_mb", *g.memory_unattributed_mib}});
  return json{
      {"timestamp", iso8601(s.timestamp)},
      {"backend", s.backend},
      {"simulated", s.simulated},
      {"process_visibility",
       {{"complete", s.process_visibility.complete},
        {"message", s.process_visibility.message.empty() ? json(nullptr) : json(s.process_visibility.message)}}},
      {"processes", std::move(list)},
      {"unattributed", std::move(unattributed)}};
}

json run_report_json(const core::RunReport& r, bool with_series) {
  json stats = json::object();
  for (const auto& [index, g] : r.gpus) {
    stats[std::to_string(index)] = json{
        {"name", g.name},
        {"uuid", g.uuid},
        {"sample_count", g.sample_count},
        {"utilization", metric_json(g.utilization, true)},
        {"memory_used_mb", metric_json(g.memory_used_mb, true)},
        {"memory_usage_percent", metric_json(g.memory_usage_percent, true)},
        {"temperature_c", metric_json(g.temperature_c, true)},
        {"power_draw_w", metric_json(g.power_draw_w, true)},
        {"energy_joules", g.energy_joules ? json(round_to(*g.energy_joules, 3)) : json(nullptr)},
        {"energy_source", std::string(energy_source(g.energy_source))},
        {"profiling", profiling_json(g)},
    };
  }
  json out{{"monitoring_duration_seconds", round_to(r.duration_s, 3)},
           {"sample_count", r.sample_count},
           {"gpu_stats", std::move(stats)}};
  if (with_series) {
    json series = json::object();
    for (const auto& [index, pts] : r.series) {
      json t = json::array(), u = json::array(), m = json::array(), tc = json::array(), p = json::array();
      auto opt = [](const std::optional<double>& v) { return v ? json(round_to(*v, 2)) : json(nullptr); };
      for (const auto& pt : pts) {
        t.push_back(round_to(pt.t_s, 3));
        u.push_back(opt(pt.utilization));
        m.push_back(opt(pt.memory_used_mb));
        tc.push_back(opt(pt.temperature_c));
        p.push_back(opt(pt.power_draw_w));
      }
      series[std::to_string(index)] = json{{"t", std::move(t)},
                                           {"utilization", std::move(u)},
                                           {"memory_used_mb", std::move(m)},
                                           {"temperature_c", std::move(tc)},
                                           {"power_draw_w", std::move(p)}};
    }
    out["series"] = std::move(series);
  }
  return out;
}

nlohmann::json owner_json(const core::LeaseOwner& o) {
  return {{"pid", o.pid}, {"user", o.user}, {"uid", o.uid ? nlohmann::json(*o.uid) : nlohmann::json(nullptr)}};
}

nlohmann::json lease_json(const core::Lease& l) {
  nlohmann::json gpus = nlohmann::json::array();
  // A MIG lease holds one instance: its parent's index and the instance's MIG UUID (mig: true).
  for (const auto& g : l.gpus)
    gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"mig", core::is_mig_uuid(g.uuid)}});
  return {{"id", l.id},
          {"job_id", l.job_id},
          {"name", l.name},
          {"gpus", gpus},
          {"owner", owner_json(l.owner)},
          {"tie", l.tie == core::LeaseTie::None ? nlohmann::json(nullptr) : nlohmann::json(core::tie_name(l.tie))},
          {"created_at", iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(l.created_at_ms)))},
          {"released_at", l.released_at_ms ? nlohmann::json(iso8601(std::chrono::system_clock::time_point(
                                                 std::chrono::milliseconds(*l.released_at_ms))))
                                           : nlohmann::json(nullptr)},
          {"release_reason", l.release_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.release_reason)}};
}

std::optional<std::int64_t> ms_time_from_json(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_string()) return std::nullopt;
  auto t = parse_iso8601(v.get_ref<const std::string&>());
  if (!t) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count();
}

namespace {

// A whole number from 0 to 2^32 - 1 (written signed or unsigned), or nullopt.
std::optional<std::uint32_t> u32(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    return v <= UINT32_MAX ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(v)) : std::nullopt;
  }
  const auto v = it->get<std::int64_t>();
  return v >= 0 && v <= UINT32_MAX ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(v)) : std::nullopt;
}

}  // namespace

core::LeaseOwner owner_from_json(const nlohmann::json& o) {
  core::LeaseOwner out;
  if (!o.is_object()) return out;
  out.pid = u32(o, "pid").value_or(0);
  if (auto u = o.find("user"); u != o.end() && u->is_string()) out.user = u->get<std::string>();
  out.uid = u32(o, "uid");
  return out;
}

Result<core::Lease> lease_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string())
    return make_error("the agent sent a lease without an id");
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  core::Lease l;
  l.id = j["id"].get<std::string>();
  l.job_id = str("job_id");
  l.name = str("name");
  if (auto g = j.find("gpus"); g != j.end() && g->is_array())
    for (const auto& x : *g)
      if (x.is_object())
        l.gpus.push_back({u32(x, "index").value_or(0),
                          x.contains("uuid") && x["uuid"].is_string() ? x["uuid"].get<std::string>() : ""});
  if (auto o = j.find("owner"); o != j.end()) l.owner = owner_from_json(*o);
  l.tie = core::tie_from_name(str("tie"));
  if (j.contains("created_at")) l.created_at_ms = ms_time_from_json(j["created_at"]).value_or(0);
  if (j.contains("released_at")) l.released_at_ms = ms_time_from_json(j["released_at"]);
  l.release_reason = str("release_reason");
  return l;
}

}  // namespace gf::wire
