#include "wire/agent_docs.hpp"

#include "core/mig.hpp"

#include <algorithm>
#include <cmath>

#include "core/gpu_health.hpp"
#include "core/policy.hpp"
#include "wire/alert_json.hpp"
#include "wire/json.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

template <class T>
json opt(const core::Reading<T>& r) {
  return r ? json(*r) : json(nullptr);
}

json ms_time(std::int64_t ms) { return iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms))); }

}  // namespace

json ms_time_json(std::int64_t ms) { return ms_time(ms); }

json summary_json(const core::Snapshot& s, const std::string& node, std::size_t alerts_firing) {
  std::uint64_t total = 0, used = 0, free = 0;
  bool mem_known = false;
  double util_sum = 0, temp_sum = 0, power_sum = 0;
  unsigned util_n = 0, temp_n = 0, power_n = 0, available = 0, busy = 0, lost = 0;
  std::optional<int> temp_max;
  const core::GpuReading* busiest = nullptr;
  std::size_t processes = 0;
  for (const auto& g : s.gpus) {
    processes += g.processes.size();
    if (g.health != core::Health::Ok) {
      ++lost;
      continue;
    }
    if (g.memory_total_mib) total += *g.memory_total_mib, mem_known = true;
    if (g.memory_used_mib) used += *g.memory_used_mib;
    if (g.memory_free_mib) free += *g.memory_free_mib;
    if (g.utilization_pct) {
      util_sum += *g.utilization_pct;
      ++util_n;
      if (core::available_utilization(*g.utilization_pct))
        ++available;
      else
        ++busy;
      if (!busiest || *g.utilization_pct > busiest->utilization_pct.value_or(0)) busiest = &g;
    }
    if (g.temperature_c) {
      temp_sum += *g.temperature_c;
      ++temp_n;
      temp_max = std::max(temp_max.value_or(*g.temperature_c), *g.temperature_c);
    }
    if (g.power_draw_w) power_sum += *g.power_draw_w, ++power_n;
  }
  auto avg = [](double sum, unsigned n) { return n ? json(std::round(sum / n * 10) / 10) : json(nullptr); };
  return json{
      {"timestamp", iso8601(s.timestamp)},
      {"node", node},
      {"backend", s.backend},
      {"simulated", s.simulated},
      {"gpu_count", s.gpus.size()},
      {"available_gpus", available},
      {"busy_gpus", busy},
      {"lost_gpus", lost},
      {"memory", mem_known ? json{{"total", total}, {"used", used}, {"free", free}}
                           : json{{"total", nullptr}, {"used", nullptr}, {"free", nullptr}}},
      {"utilization_avg", avg(util_sum, util_n)},
      {"temperature_avg", avg(temp_sum, temp_n)},
      {"temperature_max", temp_max ? json(*temp_max) : json(nullptr)},
      {"power_total", power_n ? json(std::round(power_sum * 10) / 10) : json(nullptr)},
      {"busiest_gpu",
       busiest ? json{{"index", busiest->index}, {"name", busiest->name}, {"utilization", *busiest->utilization_pct}}
               : json(nullptr)},
      {"process_count", processes},
      {"alerts_firing", alerts_firing}};
}

json metrics_json(const core::Snapshot& s, const std::string& node, const std::vector<core::Alert>& firing) {
  auto j = snapshot_json(s);
  j["node"] = node;
  j["processes"] = processes_json(s)["processes"];
  j["alerts"] = alerts_json(firing);
  j["summary"] = summary_json(s, node, firing.size());
  return j;
}

json gpu_detail_json(const core::Snapshot& s, const core::GpuReading& g, const std::string& node) {
  auto j = gpu_json(g);
  j["timestamp"] = iso8601(s.timestamp);
  j["node"] = node;
  j["simulated"] = s.simulated;
  return j;
}

json alerts_json(const std::vector<core::Alert>& alerts) {
  json out = json::array();
  for (const auto& a : alerts) out.push_back(alert_json(a));
  return out;
}

json alerts_doc_json(const std::string& node, const std::vector<core::Alert>& firing,
                     const std::vector<core::Alert>& recent, const std::vector<core::AlertRule>& rules) {
  json rule_list = json::array();
  for (const auto& rule : rules)
    rule_list.push_back({{"rule", core::rule_name(rule.kind)},
                         {"event", core::event_name(rule.kind)},
                         {"enabled", rule.enabled},
                         {"threshold", rule.threshold},
                         {"duration_s", std::chrono::duration<double>(rule.duration).count()},
                         {"severity", rule.severity}});
  return json{{"node", node},
              {"firing", alerts_json(firing)},
              {"recent", alerts_json(recent)},
              {"rules", std::move(rule_list)}};
}

// {count, unhealthy: [...]} of the latest reading; count null without one.
static json unhealthy_gpus_json(const core::Snapshot* latest) {
  json list = json::array();
  if (latest == nullptr) return json{{"count", nullptr}, {"unhealthy", std::move(list)}};
  for (const auto& g : latest->gpus) {
    const auto verdict = core::judge_health(g);
    if (verdict.healthy) continue;
    json problems = json::array();
    for (const auto& p : verdict.problems) problems.push_back({{"code", p.code}, {"message", p.message}});
    list.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"reason", verdict.summary.substr(verdict.summary.find(": ") + 2)},
                    {"problems", std::move(problems)}});
  }
  return json{{"count", latest->gpus.size()}, {"unhealthy", std::move(list)}};
}

json health_json(const HealthFacts& h) {
  auto text_or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return json{
      {"status", h.problems.empty() ? "ok" : "degraded"},
      {"node", h.node},
      {"version", h.version},
      {"uptime_s", std::round(h.uptime_s * 10) / 10},
      {"problems", h.problems},
      {"backend",
       {{"name", h.backend_name},
        {"ok", h.backend_ok},
        {"error", text_or_null(h.backend_error)},
        {"gpus", h.latest ? json(h.latest->gpus.size()) : json(nullptr)},
        {"simulated", h.latest ? json(h.latest->simulated) : json(nullptr)},
        {"last_collection", h.latest ? json(iso8601(h.latest->timestamp)) : json(nullptr)},
        {"last_collection_age_s",
         h.last_collection_age_s ? json(std::round(*h.last_collection_age_s * 1000) / 1000) : json(nullptr)},
        {"collections", h.collections},
        {"collection_errors", h.collection_errors},
        {"collection",
         {{"last_success", h.last_success ? json(iso8601(*h.last_success)) : json(nullptr)},
          {"last_duration_s", h.last_duration_s ? json(std::round(*h.last_duration_s * 1e6) / 1e6) : json(nullptr)},
          {"last_error", text_or_null(h.last_failure)},
          {"last_error_at", h.last_failure_at ? json(iso8601(*h.last_failure_at)) : json(nullptr)}}}}},
      {"store",
       {{"ok", h.store_ok},
        {"path", h.store_path ? json(*h.store_path) : json(nullptr)},
        {"history", h.history},
        {"error", text_or_null(h.store_error)}}},
      {"websocket_clients", h.websocket_clients},
      {"gpus", unhealthy_gpus_json(h.latest)}};
}

json availability_json(const allocator::Availability& a, const core::Snapshot& s) {
  json per_gpu = json::array();
  for (const auto& ga : a.gpus) {
    const auto& g = *ga.gpu;
    per_gpu.push_back({{"index", g.index},
                       {"name", g.name},
                       {"qualifies", ga.qualifies},
                       {"reason", ga.qualifies ? json(nullptr) : json(ga.reason)},
                       {"memory_free_mb", opt(g.memory_free_mib)},
                       {"utilization", opt(g.utilization_pct)},
                       {"availability_score", opt(g.availability_score)}});
  }
  json choice = nullptr;
  if (a.would_choose)
    choice =
        json{{"indices", a.would_choose->indices}, {"method", a.would_choose->method}, {"why", a.would_choose->why}};
  return json{{"available", a.available},
              {"needed", a.request.need.gpus},
              {"qualifying", a.qualifying},
              {"min_memory_mb", a.request.need.min_free_memory_mib},
              {"max_utilization", a.request.need.max_utilization_pct},
              {"exclusive", !a.request.need.allow_busy},
              {"timestamp", iso8601(s.timestamp)},
              {"would_choose", choice},
              {"gpus", per_gpu}};
}

json waiter_json(const core::Waiter& w) {
  return {{"id", w.id},
          {"name", w.name},
          {"priority", w.priority},
          {"gpus", w.gpus},
          {"owner", owner_json(w.owner)},
          {"enqueued_at", ms_time(w.enqueued_at_ms)}};
}

core::Waiter waiter_from_json(const json& j) {
  core::Waiter w;
  if (!j.is_object()) return w;
  if (j.contains("id") && j["id"].is_string()) w.id = j["id"].get<std::string>();
  if (j.contains("name") && j["name"].is_string()) w.name = j["name"].get<std::string>();
  if (j.contains("priority") && j["priority"].is_number_integer()) w.priority = j["priority"].get<int>();
  if (j.contains("gpus") && j["gpus"].is_number_unsigned() && j["gpus"].get<std::uint64_t>() <= UINT32_MAX)
    w.gpus = j["gpus"].get<unsigned>();
  if (auto o = j.find("owner"); o != j.end()) w.owner = owner_from_json(*o);
  if (auto t = j.find("enqueued_at"); t != j.end()) w.enqueued_at_ms = ms_time_from_json(*t).value_or(0);
  return w;
}

json leases_json(const std::string& node, const std::vector<core::Lease>& leases,
                 const std::vector<core::Waiter>& waiting) {
  json out{{"node", node}, {"leases", json::array()}, {"waiting", json::array()}};
  for (const auto& l : leases) out["leases"].push_back(lease_json(l));
  for (const auto& w : waiting) out["waiting"].push_back(waiter_json(w));
  return out;
}

json job_json(const core::Job& j) {
  auto rec = json::parse(j.record, nullptr, false);
  if (!rec.is_object()) rec = json::object();
  rec["id"] = j.id;
  rec["name"] = j.name;
  rec["status"] = j.status;
  rec["exit_code"] = j.exit_code ? json(*j.exit_code) : json(nullptr);
  rec["started_at"] = ms_time(j.started_at_ms);
  rec["ended_at"] = j.ended_at_ms ? ms_time(*j.ended_at_ms) : json(nullptr);
  if (!rec.contains("command")) {
    auto cmd = json::parse(j.command, nullptr, false);
    rec["command"] = cmd.is_discarded() ? json(j.command) : cmd;
  }
  if (!j.lease_id.empty()) rec["lease_id"] = j.lease_id;
  // Who ran it and which task grid it belongs to: the row's columns (the record may not say).
  rec["task"] = j.task.empty() ? json(nullptr) : json(j.task);
  rec["user"] = j.owner.user.empty() ? json(nullptr) : json(j.owner.user);
  rec["uid"] = j.owner.uid ? json(*j.owner.uid) : json(nullptr);
  return rec;
}

core::Job job_from_json(const json& j) {
  core::Job out;
  if (!j.is_object()) return out;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  out.id = str("id");
  out.name = str("name");
  out.status = str("status");
  out.lease_id = str("lease_id");
  out.task = str("task");
  if (auto c = j.find("command"); c != j.end()) out.command = c->is_string() ? c->get<std::string>() : c->dump();
  if (auto e = j.find("exit_code"); e != j.end() && e->is_number_integer()) out.exit_code = e->get<int>();
  for (const char* k : {"started_at_ms", "started_at"})
    if (auto s = j.find(k); s != j.end() && out.started_at_ms == 0)
      out.started_at_ms = ms_time_from_json(*s).value_or(0);
  for (const char* k : {"ended_at_ms", "ended_at"})
    if (auto s = j.find(k); s != j.end() && !out.ended_at_ms) out.ended_at_ms = ms_time_from_json(*s);
  if (auto r = j.find("record"); r != j.end())
    out.record = r->is_string() ? r->get<std::string>() : r->dump();
  else
    out.record = j.dump();
  if (auto o = j.find("owner"); o != j.end()) out.owner = owner_from_json(*o);
  return out;
}

std::size_t job_document_bytes(const core::Job& j) {
  const std::size_t stored = j.id.size() + j.name.size() + j.status.size() + j.command.size() + j.lease_id.size() +
                             j.record.size() + j.task.size() + j.owner.user.size();
  const std::size_t served = job_json(j).dump(-1, ' ', false, json::error_handler_t::replace).size();
  return std::max(stored, served);
}

json jobs_json(const std::string& node, const std::vector<core::Job>& jobs) {
  json list = json::array();
  for (const auto& j : jobs) list.push_back(job_json(j));
  return json{{"node", node}, {"jobs", std::move(list)}};
}

json jobs_page_json(const std::string& node, const core::JobPage& page, std::size_t limit, std::size_t offset) {
  auto doc = jobs_json(node, page.jobs);
  doc["total"] = page.total;
  doc["limit"] = limit;
  doc["offset"] = offset;
  return doc;
}

json tasks_json(const std::string& node, const core::TaskPage& page, std::size_t limit, std::size_t offset) {
  json tasks = json::array();
  for (const auto& t : page.tasks)
    tasks.push_back({{"task", t.task},
                     {"user", t.owner_user},
                     {"uid", t.owner_uid ? json(*t.owner_uid) : json(nullptr)},
                     {"runs", t.runs},
                     {"succeeded", t.succeeded},
                     {"failed", t.failed},
                     {"running", t.running},
                     {"gpu_hours", std::round(t.gpu_hours * 1e4) / 1e4},
                     {"last_started_at", ms_time(t.last_started_ms)}});
  return json{{"node", node}, {"tasks", std::move(tasks)}, {"total", page.total}, {"limit", limit}, {"offset", offset}};
}

json released_json(const std::string& lease_id) { return json{{"id", lease_id}, {"released", true}}; }

json estimate_json(unsigned gpus, std::uint64_t memory_mib_per_gpu, std::optional<double> memory_fraction,
                   const std::string& engine, const std::string& explanation, std::string_view method,
                   const std::vector<std::string>& warnings) {
  return json{{"gpus", gpus},
              {"memory_mb_per_gpu", memory_mib_per_gpu},
              {"memory_fraction", memory_fraction ? json(*memory_fraction) : json(nullptr)},
              {"engine", engine},
              {"method", method},
              {"explanation", explanation},
              {"warnings", warnings}};
}

json gpu_info_json(const allocator::Selection& sel, const core::Snapshot& s, unsigned world_size) {
  json details = json::array();
  std::vector<std::string> ids;
  std::string model;
  for (unsigned i : sel.indices) {
    ids.push_back(std::to_string(i));
    for (const auto& g : s.gpus) {
      if (g.index != i) continue;
      if (model.empty()) model = g.name;
      details.push_back({{"index", g.index},
                         {"name", g.name},
                         {"uuid", g.uuid},
                         {"memory_free_mb", opt(g.memory_free_mib)},
                         {"utilization_percent", opt(g.utilization_pct)},
                         {"availability_score",
                          g.availability_score ? json(std::round(*g.availability_score * 1e4) / 1e4) : json(nullptr)}});
    }
  }
  return {{"model", model},
          {"count", sel.indices.size()},
          {"device_ids", ids},
          {"world_size", world_size},
          {"gpu_info",
           {{"count", sel.indices.size()},
            {"indices", sel.indices},
            {"allocation_method", sel.method},
            {"why", sel.why},
            {"details", details}}}};
}

json allocation_json(const core::Lease& lease, const allocator::Selection& sel, const core::Snapshot& s,
                     unsigned world_size) {
  auto j = lease_json(lease);
  std::string ids;
  for (const auto& g : lease.gpus)
    ids += (ids.empty() ? "" : ",") + (core::is_mig_uuid(g.uuid) ? g.uuid : std::to_string(g.index));
  j["cuda_visible_devices"] = ids;  // a MIG instance is named by its MIG UUID, as CUDA wants it
  j["why"] = sel.why;
  j["gpu_info"] = gpu_info_json(sel, s, world_size);
  return j;
}

nlohmann::json history_json(core::Field metric, const std::string& node, std::chrono::system_clock::time_point since,
                            std::chrono::system_clock::time_point until, std::chrono::seconds step,
                            const std::vector<HistorySeries>& series) {
  using nlohmann::json;
  auto num = [](const std::optional<double>& v) { return v ? json(std::round(*v * 100) / 100) : json(nullptr); };
  json out_series = json::array();
  for (const auto& s : series) {
    json points = json::array();
    for (const auto& pt : s.points)
      points.push_back(
          {{"t", pt.ts_ms}, {"avg", num(pt.avg)}, {"min", num(pt.min)}, {"max", num(pt.max)}, {"samples", pt.samples}});
    out_series.push_back({{"gpu", s.gpu}, {"points", std::move(points)}});
  }
  const auto& info = core::info(metric);
  return json{{"metric", info.history_metric.empty() ? std::string_view("unknown") : info.history_metric},
              {"unit", info.unit},
              {"node", node},
              {"since", iso8601(since)},
              {"until", iso8601(until)},
              {"step_s", step.count()},
              {"series", std::move(out_series)}};
}

}  // namespace gf::wire
