// REST handlers for allocation and jobs: leases taken and released through the agent, the lease and
// job lists, one job (also under the seeds' name, experiment), and the GPU estimate of a task. They
// share the node store with the CLI, so `gpufleet leases` and GET /api/v1/leases show the same leases.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "core/policy.hpp"
#include "platform/procfs.hpp"
#include "scheduler/estimate.hpp"
#include "server/api.hpp"
#include "wire/agent_docs.hpp"
#include "wire/json.hpp"

namespace gf::server {
namespace {

using nlohmann::json;

Response no_store(const ApiContext& c) {
  return error_response(ErrorKind::NotReady, "the node store is not usable: " + c.store_error, "store_unavailable");
}

bool is_json_body(const Request& req) {
  if (req.content_type.empty()) return true;  // curl -d without -H: accept, the body is parsed anyway
  std::string ct = req.content_type.substr(0, req.content_type.find(';'));
  std::transform(ct.begin(), ct.end(), ct.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  while (!ct.empty() && ct.back() == ' ') ct.pop_back();
  // curl -d sends application/x-www-form-urlencoded unless told otherwise; the body must still be JSON.
  return ct == "application/json" || ct == "application/x-www-form-urlencoded";
}

// The body as a JSON object, or the error response to send.
Result<json> json_object_body(const Request& req) {
  if (!is_json_body(req)) return make_error(ErrorKind::Unsupported, "the body must be application/json");
  auto j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return make_error(ErrorKind::Invalid, "the body is not valid JSON");
  if (!j.is_object()) return make_error(ErrorKind::Invalid, "the body must be a JSON object");
  return j;
}

// An integer field within [min, max], or the default when absent.
Result<std::int64_t> int_field(const json& j, const char* key, std::int64_t def, std::int64_t min, std::int64_t max) {
  if (!j.contains(key)) return def;
  const auto& v = j[key];
  if (!v.is_number_integer() &&
      !(v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<std::int64_t>(v.get<double>()))))
    return make_error(ErrorKind::Invalid, fmt::format("{} must be an integer", key));
  const auto n = v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<double>());
  if (n < min || n > max)
    return make_error(ErrorKind::Invalid, fmt::format("{} must be from {} to {} (got {})", key, min, max, n));
  return n;
}

// The HTTP token holder, as the arbiter sees it: the agent's own user, an admin.
node::Peer api_peer() {
  node::Peer p;
  p.uid = static_cast<std::uint32_t>(::geteuid());
  p.gid = static_cast<std::uint32_t>(::getegid());
  p.pid = static_cast<std::uint32_t>(::getpid());
  p.user = "api";
  p.admin = true;
  return p;
}

node::AcquireRequest to_acquire(const scheduler::AllocationRequest& ar) {
  node::AcquireRequest r;
  r.gpus = ar.gpus;
  r.min_memory_mib = ar.min_memory_mib;
  r.max_utilization_pct = ar.max_utilization_pct;
  r.allow_busy = !ar.refuse_busy;
  r.name = ar.name;
  r.job_id = ar.job_id;
  r.tie = core::LeaseTie::Process;
  return r;
}

}  // namespace

void add_job_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;

  r.add(Method::Post, "/api/v1/allocations", Access::Write, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    auto body = json_object_body(req);
    if (!body) return error_response(body.error());
    static const std::set<std::string> kKeys = {"gpus",       "min_memory_mb", "max_utilization",
                                                "allow_busy", "name",          "pid"};
    for (const auto& [k, v] : body->items())
      if (!kKeys.contains(k))
        return error_response(
            ErrorKind::Invalid,
            "unknown field '" + k + "' (expected gpus, min_memory_mb, max_utilization, allow_busy, name, pid)");
    auto gpus = int_field(*body, "gpus", 1, 1, 1024);
    auto floor =
        int_field(*body, "min_memory_mb", static_cast<std::int64_t>(core::kDefaultMinFreeMemoryMib), 0, 1LL << 40);
    auto ceiling = int_field(*body, "max_utilization", core::kDefaultMaxUtilizationPct, 0, 100);
    auto pid = int_field(*body, "pid", 0, 1, 1LL << 31);
    for (const auto* f : {&gpus, &floor, &ceiling, &pid})
      if (!*f) return error_response(f->error());
    if (body->contains("allow_busy") && !(*body)["allow_busy"].is_boolean())
      return error_response(ErrorKind::Invalid, "allow_busy must be true or false");
    if (body->contains("name") && (!(*body)["name"].is_string() || (*body)["name"].get<std::string>().size() > 200))
      return error_response(ErrorKind::Invalid, "name must be a string of at most 200 characters");

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
    if (!info) return error_response(ErrorKind::Invalid, fmt::format("no process {} on this node", owner_pid));
    ar.owner.pid = owner_pid;
    ar.owner.start_time = info->start_time_ticks;
    ar.owner.user = info->user;
    ar.name = body->value(
        "name",
        fmt::format("api {}", owner_pid == static_cast<std::uint32_t>(::getpid()) ? std::string("agent") : info->name));
    // Through the arbiter when the agent has one (the only writer of the node's leases): the token
    // holder is an admin, and the lease is tied to the owner process.
    auto got = c->arbiter ? c->arbiter->acquire_for(api_peer(), to_acquire(ar), ar.owner)
                          : c->jobs->with([&](core::JobStore&, scheduler::NodeAllocator& a) { return a.allocate(ar); });
    if (!got)
      return error_response(got.error(),
                            got.error().kind == ErrorKind::Unavailable ? "insufficient_gpus" : "allocation_failed");
    Response resp = json_response(201, wire::allocation_json(got->lease, got->selection, *got->snapshot, ar.gpus));
    resp.headers.emplace_back("Location", "/api/v1/allocations/" + got->lease.id);
    return resp;
  });

  r.add(Method::Delete, "/api/v1/allocations/{id}", Access::Write, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const std::string& id = req.params.at("id");
    if (id.size() > 64) return error_response(ErrorKind::Invalid, "lease id too long");
    if (c->arbiter) {
      auto r = c->arbiter->release(id, true, "released through the API");
      if (!r) return error_response(r.error(), "store_error");
      if (!*r) return error_response(ErrorKind::NotFound, "no active lease " + id + " (see GET /api/v1/leases)");
      return json_response(200, json{{"id", id}, {"released", true}});
    }
    auto done = c->jobs->with(
        [&](core::JobStore& s, scheduler::NodeAllocator&) { return s.release(id, "released through the API"); });
    if (!done) return error_response(done.error(), "store_error");
    if (!*done) return error_response(ErrorKind::NotFound, "no active lease " + id + " (see GET /api/v1/leases)");
    return json_response(200, json{{"id", id}, {"released", true}});
  });

  r.add(Method::Get, "/api/v1/leases", Access::Read, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const bool all = req.query.count("all") && req.query.at("all") != "0" && req.query.at("all") != "false";
    auto leases =
        c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return all ? s.history(200) : s.active(); });
    if (!leases) return error_response(leases.error(), "store_error");
    // The arbiter keeps the agent's queue in memory; the store's queue is the CLI's without an agent.
    auto waiting = c->arbiter ? Result<std::vector<core::Waiter>>(c->arbiter->waiting())
                              : c->jobs->with([](core::JobStore& s, scheduler::NodeAllocator&) { return s.waiters(); });
    // The waiting list is secondary: when it cannot be read, the leases are still worth sending.
    return json_response(200,
                         wire::leases_json(c->node_name, *leases, waiting ? *waiting : std::vector<core::Waiter>{}));
  });

  r.add(Method::Get, "/api/v1/jobs", Access::Read, Exec::Blocking, [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    auto limit = query_int(req, "limit", 1, 10000);
    if (!limit) return error_response(ErrorKind::Invalid, limit.error().message);
    auto list = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) {
      return s.jobs(static_cast<std::size_t>(limit->value_or(200)));
    });
    if (!list) return error_response(list.error(), "store_error");
    return json_response(200, wire::jobs_json(c->node_name, *list));
  });

  // One job's record; /api/v1/experiments/{id} is the seeds' name for the same thing.
  auto one_job = [c](const Request& req) {
    if (!c->jobs) return no_store(*c);
    const std::string& id = req.params.at("id");
    if (id.size() > 64) return error_response(ErrorKind::Invalid, "job id too long");
    auto j = c->jobs->with([&](core::JobStore& s, scheduler::NodeAllocator&) { return s.job(id); });
    if (!j) return error_response(j.error(), "store_error");
    if (!*j) return error_response(ErrorKind::NotFound, "no job " + id + " (see GET /api/v1/jobs)");
    return json_response(200, wire::job_json(**j));
  };
  r.add(Method::Get, "/api/v1/jobs/{id}", Access::Read, Exec::Blocking, one_job);
  r.add(Method::Get, "/api/v1/experiments/{id}", Access::Read, Exec::Blocking, one_job);

  r.add(Method::Post, "/api/v1/estimate", Access::Read, Exec::Blocking, [](const Request& req) {
    auto body = json_object_body(req);
    if (!body) return error_response(body.error());
    scheduler::EstimateOptions opts;
    if (auto it = req.query.find("engine"); it != req.query.end()) opts.engine = it->second;
    // A model named by a local path is not read over the network API: that would let anyone who can
    // reach the agent probe the node's files. The model id's table entry is used instead.
    opts.read_file = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    auto e = scheduler::estimate_text(req.body, opts);  // the body is a JSON object (checked above)
    if (!e) return error_response(e.error());
    return json_response(200, json{{"gpus", e->gpus},
                                   {"memory_mb_per_gpu", e->memory_mb_per_gpu},
                                   {"memory_fraction", e->memory_fraction ? json(*e->memory_fraction) : json(nullptr)},
                                   {"engine", e->engine},
                                   {"explanation", e->explanation}});
  });
}

}  // namespace gf::server
