// REST handlers for allocation and jobs: leases taken and released through the agent, the lease and
// job lists, one experiment, and the GPU estimate of a task. They share the node store with the CLI,
// so `gpufleet leases` and GET /api/v1/leases show the same leases.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "platform/procfs.hpp"
#include "scheduler/allocation_json.hpp"
#include "scheduler/estimate.hpp"
#include "server/api.hpp"
#include "wire/json.hpp"

namespace gf::server {
namespace {

using nlohmann::json;

Response no_store(const ApiContext& c) { return error_response(503, "store_unavailable", "the node store is not usable: " + c.store_error); }

bool is_json_body(const Request& req) {
  if (req.content_type.empty()) return true;  // curl -d without -H: accept, the body is parsed anyway
  std::string ct = req.content_type.substr(0, req.content_type.find(';'));
  std::transform(ct.begin(), ct.end(), ct.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  // curl -d sends application/x-www-form-urlencoded unless told otherwise; the body must still be JSON.
  return ct == "application/json" || ct == "application/x-www-form-urlencoded";
}

// The body as a JSON object, or the error response to send.
Result<json> json_object_body(const Request& req) {
  if (!is_json_body(req)) return make_error("415:the body must be application/json");
  auto j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return make_error("400:the body is not valid JSON");
  if (!j.is_object()) return make_error("400:the body must be a JSON object");
  return j;
}

Response body_error(const Error& e) {
  const auto colon = e.message.find(':');
  const unsigned status = static_cast<unsigned>(std::stoul(e.message.substr(0, colon)));
  return error_response(status, status == 415 ? "unsupported_media_type" : "bad_request", e.message.substr(colon + 1));
}

// An integer field within [min, max], or the default when absent.
Result<std::int64_t> int_field(const json& j, const char* key, std::int64_t def, std::int64_t min, std::int64_t max) {
  if (!j.contains(key)) return def;
  const auto& v = j[key];
  if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<std::int64_t>(v.get<double>()))))
    return make_error(fmt::format("{} must be an integer", key));
  const auto n = v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<double>());
  if (n < min || n > max) return make_error(fmt::format("{} must be from {} to {} (got {})", key, min, max, n));
  return n;
}

json experiment_json(const store::Experiment& e) {
  auto rec = json::parse(e.record, nullptr, false);
  if (!rec.is_object()) rec = json::object();
  // The row's own columns are the truth (a run whose owner died is "lost" there, whatever it wrote).
  rec["id"] = e.id;
  rec["name"] = e.name;
  rec["status"] = e.status;
  rec["exit_code"] = e.exit_code ? json(*e.exit_code) : json(nullptr);
  auto at = [](std::int64_t ms) { return wire::iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms))); };
  rec["started_at"] = at(e.started_at_ms);
  rec["ended_at"] = e.ended_at_ms ? json(at(*e.ended_at_ms)) : json(nullptr);
  if (!rec.contains("command")) {
    auto cmd = json::parse(e.command, nullptr, false);
    rec["command"] = cmd.is_discarded() ? json(e.command) : cmd;
  }
  if (!e.lease_id.empty()) rec["lease_id"] = e.lease_id;
  return rec;
}

}  // namespace

void add_job_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;

  r.add(Method::Post, "/api/v1/allocations", Access::Write, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    auto body = json_object_body(req);
    if (!body) return body_error(body.error());
    static const std::set<std::string> kKeys = {"gpus", "min_memory_mb", "max_utilization", "allow_busy", "name", "pid"};
    for (const auto& [k, v] : body->items())
      if (!kKeys.contains(k))
        return error_response(400, "bad_request", "unknown field '" + k + "' (expected gpus, min_memory_mb, max_utilization, allow_busy, name, pid)");
    auto gpus = int_field(*body, "gpus", 1, 1, 1024);
    auto floor = int_field(*body, "min_memory_mb", 8000, 0, 1LL << 40);
    auto ceiling = int_field(*body, "max_utilization", 50, 0, 100);
    auto pid = int_field(*body, "pid", 0, 1, 1LL << 31);
    for (const auto* f : {&gpus, &floor, &ceiling, &pid})
      if (!*f) return error_response(400, "bad_request", f->error().message);
    if (body->contains("allow_busy") && !(*body)["allow_busy"].is_boolean())
      return error_response(400, "bad_request", "allow_busy must be true or false");
    if (body->contains("name") && (!(*body)["name"].is_string() || (*body)["name"].get<std::string>().size() > 200))
      return error_response(400, "bad_request", "name must be a string of at most 200 characters");

    scheduler::AllocationRequest ar;
    ar.gpus = static_cast<unsigned>(*gpus);
    ar.min_memory_mib = static_cast<std::uint64_t>(*floor);
    ar.max_utilization_pct = static_cast<unsigned>(*ceiling);
    ar.refuse_busy = !body->value("allow_busy", false);
    ar.job_id = "api-" + store::new_id();
    // The owner: the process named by pid (the lease ends when it does), else the agent itself (the
    // lease lasts until DELETE, or until the agent stops).
    const std::uint32_t owner_pid = *pid ? static_cast<std::uint32_t>(*pid) : static_cast<std::uint32_t>(::getpid());
    const platform::ProcReader proc;
    auto info = proc.read(owner_pid);
    if (!info) return error_response(400, "bad_request", fmt::format("no process {} on this node", owner_pid));
    ar.owner.pid = owner_pid;
    ar.owner.start_time = info->start_time_ticks;
    ar.owner.user = info->user;
    ar.name = body->value("name", fmt::format("api {}", owner_pid == static_cast<std::uint32_t>(::getpid()) ? std::string("agent") : info->name));
    bool unavailable = false;
    auto got = c->jobs->with([&](core::JobStore&, scheduler::NodeAllocator& a) { return a.allocate(ar, &unavailable); });
    if (!got) {
      if (unavailable) return error_response(409, "insufficient_gpus", got.error().message);
      return error_response(500, "allocation_failed", got.error().message);
    }
    auto j = wire::lease_json(got->lease);
    std::string ids;
    for (const auto& g : got->lease.gpus) ids += (ids.empty() ? "" : ",") + std::to_string(g.index);
    j["cuda_visible_devices"] = ids;
    j["why"] = got->selection.why;
    j["gpu_info"] = scheduler::gpu_info_json(*got, ar.gpus);
    Response resp = json_response(201, j);
    resp.headers.emplace_back("Location", "/api/v1/allocations/" + got->lease.id);
    return resp;
  });

  r.add(Method::Delete, "/api/v1/allocations/{id}", Access::Write, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const std::string& id = req.params.at("id");
    if (id.size() > 64) return error_response(400, "bad_request", "lease id too long");
    auto done = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return s.release(id, "released through the API"); });
    if (!done) return error_response(500, "store_error", done.error().message);
    if (!*done) return error_response(404, "not_found", "no active lease " + id + " (see GET /api/v1/leases)");
    return json_response(200, json{{"id", id}, {"released", true}});
  });

  r.add(Method::Get, "/api/v1/leases", Access::Read, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const bool all = req.query.count("all") && req.query.at("all") != "0" && req.query.at("all") != "false";
    auto leases = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return all ? s.history(200) : s.active(); });
    if (!leases) return error_response(500, "store_error", leases.error().message);
    auto waiting = c->jobs->with([](core::JobStore& s, scheduler::NodeAllocator&) { return s.waiters(); });
    json out{{"node", c->node_name}, {"leases", json::array()}, {"waiting", json::array()}};
    for (const auto& l : *leases) out["leases"].push_back(wire::lease_json(l));
    if (waiting)
      for (const auto& w : *waiting)
        out["waiting"].push_back({{"id", w.id}, {"name", w.name}, {"priority", w.priority}, {"gpus", w.gpus},
                                  {"owner", {{"pid", w.owner.pid}, {"user", w.owner.user}}},
                                  {"enqueued_at", wire::iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(w.enqueued_at_ms)))}});
    return json_response(200, out);
  });

  r.add(Method::Get, "/api/v1/jobs", Access::Read, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    auto limit = query_int(req, "limit", 1, 10000);
    if (!limit) return error_response(400, "bad_request", limit.error().message);
    auto list = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) {
      return s.experiments(static_cast<std::size_t>(limit->value_or(200)));
    });
    if (!list) return error_response(500, "store_error", list.error().message);
    json jobs = json::array();
    for (const auto& e : *list) jobs.push_back(experiment_json(e));
    return json_response(200, json{{"node", c->node_name}, {"jobs", std::move(jobs)}});
  });

  r.add(Method::Get, "/api/v1/experiments/{id}", Access::Read, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const std::string& id = req.params.at("id");
    if (id.size() > 64) return error_response(400, "bad_request", "experiment id too long");
    auto e = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return s.experiment(id); });
    if (!e) return error_response(500, "store_error", e.error().message);
    if (!*e) return error_response(404, "not_found", "no experiment " + id + " (see GET /api/v1/jobs)");
    return json_response(200, experiment_json(**e));
  });

  r.add(Method::Post, "/api/v1/estimate", Access::Read, Exec::Blocking, [](const Request& req) {
    auto body = json_object_body(req);
    if (!body) return body_error(body.error());
    scheduler::EstimateOptions opts;
    if (auto it = req.query.find("engine"); it != req.query.end()) opts.engine = it->second;
    // A model named by a local path is not read over the network API: that would let anyone who can
    // reach the agent probe the node's files. The model id's table entry is used instead.
    opts.read_file = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    auto e = scheduler::estimate(*body, opts);
    if (!e) return error_response(400, "bad_request", e.error().message);
    return json_response(200, json{{"gpus", e->gpus},
                                   {"memory_mb_per_gpu", e->memory_mb_per_gpu},
                                   {"memory_fraction", e->memory_fraction ? json(*e->memory_fraction) : json(nullptr)},
                                   {"engine", e->engine},
                                   {"explanation", e->explanation}});
  });
}

}  // namespace gf::server
