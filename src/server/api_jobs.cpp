// REST handlers for allocation and jobs: leases taken and released through the node's arbiter (the one
// writer), the lease list and its queue (the arbiter's), the job records (one job also under the seeds'
// name, experiment) read from the records view, job submission, and the GPU estimate of a task. Each
// route calls one thing. The node store is the CLI's too, so `gpufleet leases` and GET /api/v1/leases
// show the same leases.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "allocator/mig_select.hpp"
#include "core/policy.hpp"
#include "core/text.hpp"
#include "estimate/estimate.hpp"
#include "platform/procfs.hpp"
#include "server/api.hpp"
#include "store/node_store.hpp"
#include "wire/agent_docs.hpp"
#include "wire/gpu_need.hpp"
#include "wire/json.hpp"
#include "wire/json_field.hpp"
#include "wire/usage_json.hpp"

namespace gf::server {
namespace {

using nlohmann::json;

// Ended leases carry their final usage row as "usage" (with the efficiency line); an additive field,
// left out when the ledger has no row (accounting off, or a lease older than it).
void add_efficiency(json& doc, const std::vector<core::Lease>& leases, node::UsageLedger* usage) {
  if (!usage) return;
  std::vector<std::string> ended;
  for (const auto& l : leases)
    if (l.released_at_ms) ended.push_back(l.id);
  if (ended.empty()) return;
  auto rows = usage->rows_of(ended);
  if (!rows) return;  // the leases are still worth sending
  for (auto& j : doc["leases"]) {
    const auto it = rows->find(j.value("id", std::string()));
    if (it != rows->end() && it->second.released_at_ms) j["usage"] = wire::lease_usage_json(it->second);
  }
}

Response no_store(const ApiContext& c) {
  return error_response(ErrorKind::NotReady, "the node store is not usable: " + c.store_error, "store_unavailable");
}

bool is_json_body(const Request& req) {
  if (req.content_type.empty()) return true;  // curl -d without -H: accept, the body is parsed anyway
  const std::string ct =
      core::lower(core::trim(std::string_view(req.content_type).substr(0, req.content_type.find(';'))));
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

const std::set<std::string> kJobStatuses = {"waiting", "running",     "succeeded", "failed",
                                            "no_gpus", "interrupted", "lost"};

// A text query parameter of at most max bytes, without control characters ("" when absent).
Result<std::string> text_param(const Request& req, const char* key, std::size_t max) {
  auto it = req.query.find(key);
  if (it == req.query.end()) return std::string();
  if (it->second.size() > max)
    return make_error(ErrorKind::Invalid, fmt::format("{} is longer than {} bytes", key, max));
  if (std::any_of(it->second.begin(), it->second.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
    return make_error(ErrorKind::Invalid, fmt::format("{} must not contain control characters", key));
  return it->second;
}

// The paging and owner filters shared by /jobs and /tasks: limit (1..1000), offset, user, uid.
Result<core::JobQuery> job_query(const Request& req, std::int64_t default_limit) {
  core::JobQuery q;
  auto limit = query_int(req, "limit", 1, 1000);
  if (!limit) return limit.error();
  auto offset = query_int(req, "offset", 0, 1000000000);
  if (!offset) return offset.error();
  auto uid = query_int(req, "uid", 0, 4294967295LL);
  if (!uid) return uid.error();
  auto user = text_param(req, "user", 64);
  if (!user) return user.error();
  q.limit = static_cast<std::size_t>(limit->value_or(default_limit));
  q.offset = static_cast<std::size_t>(offset->value_or(0));
  if (*uid) q.uid = static_cast<std::uint32_t>(**uid);
  q.user = *user;
  return q;
}

// A POST /api/v1/jobs body: image (required), args, gpus, min_memory_mb, name, priority, wait_s. Every
// string is bounded and free of control characters (they reach the Docker engine, records and terminals).
Result<JobSubmission> job_submission(const json& body) {
  static const std::set<std::string> kKeys = {"image", "args", "gpus", "min_memory_mb", "name", "priority", "wait_s"};
  for (const auto& [k, v] : body.items())
    if (!kKeys.contains(k))
      return make_error(
          ErrorKind::Invalid,
          "unknown field '" + k + "' (expected image, args, gpus, min_memory_mb, name, priority, wait_s)");
  auto text = [](const json& v, const char* what, std::size_t max) -> Result<std::string> {
    if (!v.is_string()) return make_error(ErrorKind::Invalid, fmt::format("{} must be a string", what));
    auto s = v.get<std::string>();
    if (s.size() > max) return make_error(ErrorKind::Invalid, fmt::format("{} is longer than {} bytes", what, max));
    if (std::any_of(s.begin(), s.end(), [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; }))
      return make_error(ErrorKind::Invalid, fmt::format("{} must not contain control characters", what));
    return s;
  };
  JobSubmission s;
  if (!body.contains("image")) return make_error(ErrorKind::Invalid, "image is required (a Docker image reference)");
  auto image = text(body["image"], "image", 512);
  if (!image) return image.error();
  if (image->empty() || image->front() == '-')
    return make_error(ErrorKind::Invalid, "image must be a Docker image reference");
  s.image = std::move(*image);
  if (body.contains("args")) {
    const json& a = body["args"];
    if (!a.is_array() || a.size() > 256)
      return make_error(ErrorKind::Invalid, "args must be a list of at most 256 strings");
    for (const auto& v : a) {
      auto arg = text(v, "each of args", 8192);
      if (!arg) return arg.error();
      s.args.push_back(std::move(*arg));
    }
  }
  auto need = wire::gpu_need_from_json(body, wire::kSeedNeedKeys);  // only gpus and min_memory_mb get here
  if (!need) return need.error();
  s.need = std::move(*need);
  auto priority = wire::json_int(body, "priority", 0, -1000000, 1000000);
  if (!priority) return priority.error();
  s.priority = static_cast<int>(*priority);
  if (body.contains("name")) {
    auto name = text(body["name"], "name", 200);
    if (!name) return name.error();
    s.name = std::move(*name);
  }
  if (body.contains("wait_s")) {
    const json& w = body["wait_s"];
    if (!w.is_number() || w.get<double>() < 0 || w.get<double>() > 7 * 86400)
      return make_error(ErrorKind::Invalid, "wait_s must be a number of seconds from 0 to 604800");
    s.wait = std::chrono::milliseconds(static_cast<std::int64_t>(w.get<double>() * 1000.0));
  }
  return s;
}

}  // namespace

namespace {

// POST /api/v1/allocations: a lease now or never, through the arbiter, as the token holder (an admin),
// tied to the owner process.
Response post_allocation(const ApiContext& c, const Request& req) {
  if (!c.arbiter) return no_store(c);
  auto body = json_object_body(req);
  if (!body) return error_response(body.error());
  for (const auto& [k, v] : body->items())
    if (!wire::is_gpu_need_key(k, wire::kSeedNeedKeys) && k != "name" && k != "pid")
      return error_response(
          ErrorKind::Invalid,
          "unknown field '" + k + "' (expected gpus, min_memory_mb, max_utilization, allow_busy, name, pid, mig)");
  auto need = wire::gpu_need_from_json(*body, wire::kSeedNeedKeys);
  if (!need) return error_response(need.error());
  auto pid = wire::json_int(*body, "pid", 0, 1, 1LL << 31);
  if (!pid) return error_response(pid.error());
  if (body->contains("name") && (!(*body)["name"].is_string() || (*body)["name"].get<std::string>().size() > 200))
    return error_response(ErrorKind::Invalid, "name must be a string of at most 200 characters");
  if (!need->mig_profile.empty() && need->gpus != 1)
    return error_response(ErrorKind::Invalid, "a MIG lease is one instance: gpus must be 1 with mig");

  node::AcquireRequest ar;
  ar.need = std::move(*need);
  ar.job_id = "api-" + store::new_id();
  ar.tie = core::LeaseTie::Process;
  // The owner: the process named by pid (the lease ends when it does), else the agent itself (the
  // lease lasts until DELETE, or until the agent stops).
  const std::uint32_t owner_pid = *pid ? static_cast<std::uint32_t>(*pid) : static_cast<std::uint32_t>(::getpid());
  const platform::ProcReader proc;
  auto info = proc.read(owner_pid);
  if (!info) return error_response(ErrorKind::Invalid, fmt::format("no process {} on this node", owner_pid));
  // Owner and charge agree (issue 20, finding 12): a lease for a pid belongs to the pid's uid, not to the
  // agent, so that user can release it and their quota counts it. Without a pid, the agent.
  const core::LeaseOwner owner{owner_pid, info->start_time_ticks, info->user, info->uid};
  ar.name = body->value(
      "name",
      fmt::format("api {}", owner_pid == static_cast<std::uint32_t>(::getpid()) ? std::string("agent") : info->name));
  auto got = c.arbiter->acquire_for(api_peer(), ar, owner);
  if (!got)
    return error_response(got.error(),
                          got.error().kind == ErrorKind::Unavailable ? "insufficient_gpus" : "allocation_failed");
  Response resp = json_response(201, wire::allocation_json(got->lease, got->selection, *got->snapshot, ar.need.gpus));
  resp.headers.emplace_back("Location", "/api/v1/allocations/" + got->lease.id);
  return resp;
}

// DELETE /api/v1/allocations/{id}: the token holder releases any lease.
Response delete_allocation(const ApiContext& c, const Request& req) {
  if (!c.arbiter) return no_store(c);
  const std::string& id = req.params.at("id");
  if (id.size() > 64) return error_response(ErrorKind::Invalid, "lease id too long");
  auto r = c.arbiter->release(id, true, "released through the API");
  if (!r) return error_response(r.error(), "store_error");
  if (!*r) return error_response(ErrorKind::NotFound, "no active lease " + id + " (see GET /api/v1/leases)");
  return json_response(200, wire::released_json(id));
}

// GET /api/v1/leases: the active leases (?all: ended ones too) and the arbiter's queue.
Response get_leases(const ApiContext& c, const Request& req) {
  if (!c.arbiter) return no_store(c);
  const bool all = req.query.count("all") && req.query.at("all") != "0" && req.query.at("all") != "false";
  auto leases = c.arbiter->leases(all);
  if (!leases) return error_response(leases.error(), "store_error");
  auto doc = wire::leases_json(c.node_name, *leases, c.arbiter->waiting());
  add_efficiency(doc, *leases, c.usage);
  return json_response(200, doc);
}

// GET /api/v1/jobs: a page of the record, newest first, filtered by status, user (name or uid) and task.
// Without parameters the answer is what it always was (the newest 200), plus total/limit/offset.
Response get_jobs(const ApiContext& c, const Request& req) {
  if (!c.records) return no_store(c);
  auto q = job_query(req, 200);
  if (!q) return error_response(ErrorKind::Invalid, q.error().message);
  if (auto it = req.query.find("status"); it != req.query.end()) {
    if (!kJobStatuses.contains(it->second))
      return error_response(ErrorKind::Invalid,
                            "status must be one of waiting, running, succeeded, failed, no_gpus, interrupted, lost");
    q->status = it->second;
  }
  if (auto t = text_param(req, "task", 200); !t)
    return error_response(ErrorKind::Invalid, t.error().message);
  else
    q->task = *t;
  auto series = query_bool(req, "series", true);
  if (!series) return error_response(ErrorKind::Invalid, series.error().message);
  // A list page needs the summary, not the samples: series=false leaves each record's series out.
  q->with_series = *series;
  auto page = c.records->jobs_page(*q);
  if (!page) return error_response(page.error(), "store_error");
  return json_response(200, wire::jobs_page_json(c.node_name, *page, q->limit, q->offset));
}

// GET /api/v1/tasks: the runs of each task grid summed (runs, succeeded, failed, GPU-hours) over the
// whole record, by the store, so the totals hold for users with thousands of runs.
Response get_tasks(const ApiContext& c, const Request& req) {
  if (!c.records) return no_store(c);
  auto q = job_query(req, 100);
  if (!q) return error_response(ErrorKind::Invalid, q.error().message);
  // ?task=NAME: that task's totals only (the dashboard's heading over a task's runs).
  if (auto t = text_param(req, "task", 200); !t)
    return error_response(ErrorKind::Invalid, t.error().message);
  else
    q->task = *t;
  auto page = c.records->task_totals(*q);
  if (!page) return error_response(page.error(), "store_error");
  return json_response(200, wire::tasks_json(c.node_name, *page, q->limit, q->offset));
}

// One job's record; /api/v1/experiments/{id} is the seeds' name for the same thing.
Response get_job(const ApiContext& c, const Request& req) {
  if (!c.records) return no_store(c);
  const std::string& id = req.params.at("id");
  if (id.size() > 64) return error_response(ErrorKind::Invalid, "job id too long");
  auto j = c.records->job(id);
  if (!j) return error_response(j.error(), "store_error");
  if (!*j) return error_response(ErrorKind::NotFound, "no job " + id + " (see GET /api/v1/jobs)");
  return json_response(200, wire::job_json(**j));
}

Response submission_disabled() {
  return error_response(403, "submission_disabled",
                        "job submission is off on this agent (its config: \"jobs\": {\"submit\": true})");
}

// POST /api/v1/jobs (issue 23, item 8): a Docker-image job queued through the node's arbiter, as
// `gpufleet run --docker` queues its own. A job is as powerful as the Docker socket (root on the node),
// so it needs the write token, and the agent serves these only when its config says
// "jobs": {"submit": true}.
Response post_job(const ApiContext& c, const Request& req) {
  if (!c.submitter) return submission_disabled();
  auto body = json_object_body(req);
  if (!body) return error_response(body.error());
  auto sub = job_submission(*body);
  if (!sub) return error_response(sub.error());
  auto job = c.submitter->submit(*sub);
  if (!job && job.error().kind == ErrorKind::Unavailable)
    return error_response(429, "too_many_jobs", job.error().message);
  if (!job) return error_response(job.error(), "submission_failed");
  Response resp = json_response(202, wire::job_json(*job));
  resp.headers.emplace_back("Location", "/api/v1/jobs/" + job->id);
  return resp;
}

Response delete_job(const ApiContext& c, const Request& req) {
  if (!c.submitter) return submission_disabled();
  const std::string& id = req.params.at("id");
  if (id.size() > 64) return error_response(ErrorKind::Invalid, "job id too long");
  if (auto done = c.submitter->cancel(id); !done) return error_response(done.error(), "not_cancellable");
  return json_response(200, json{{"id", id}, {"cancelled", true}});
}

// POST /api/v1/estimate: the GPUs and memory a task needs.
Response post_estimate(const Request& req) {
  auto body = json_object_body(req);
  if (!body) return error_response(body.error());
  estimate::EstimateOptions opts;
  if (auto it = req.query.find("engine"); it != req.query.end()) opts.engine = it->second;
  if (auto it = req.query.find("method"); it != req.query.end()) {
    auto m = estimate::parse_memory_method(it->second);
    if (!m) return error_response(m.error());
    opts.method = *m;
  }
  // A model named by a local path is not read over the network API: that would let anyone who can
  // reach the agent probe the node's files. The model id's table entry is used instead.
  opts.read_file = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto e = estimate::estimate_text(req.body, opts);  // the body is a JSON object (checked above)
  if (!e) return error_response(e.error());
  return json_response(200, wire::estimate_json(e->gpus, e->memory_mb_per_gpu, e->memory_fraction, e->engine,
                                                e->explanation, e->method, e->warnings));
}

}  // namespace

void add_job_routes(Router& r, ApiContext& ctx) {
  const ApiContext* c = &ctx;
  auto route = [c](Response (*handler)(const ApiContext&, const Request&)) {
    return [c, handler](const Request& req) { return handler(*c, req); };
  };
  r.add(Method::Post, "/api/v1/allocations", Access::Write, Exec::Blocking, route(post_allocation));
  r.add(Method::Delete, "/api/v1/allocations/{id}", Access::Write, Exec::Blocking, route(delete_allocation));
  r.add(Method::Get, "/api/v1/leases", Access::Read, Exec::Blocking, route(get_leases));
  r.add(Method::Get, "/api/v1/jobs", Access::Read, Exec::Blocking, route(get_jobs));
  r.add(Method::Get, "/api/v1/tasks", Access::Read, Exec::Blocking, route(get_tasks));
  r.add(Method::Get, "/api/v1/jobs/{id}", Access::Read, Exec::Blocking, route(get_job));
  r.add(Method::Get, "/api/v1/experiments/{id}", Access::Read, Exec::Blocking, route(get_job));
  r.add(Method::Post, "/api/v1/jobs", Access::Write, Exec::Blocking, route(post_job));
  // What this request's credentials may do here, for the dashboard: show the job form and cancel buttons
  // only to the token holder, and only where submission is on.
  r.add(Method::Get, "/api/v1/session", Access::Read, Exec::Inline, [c](const Request& req) {
    return json_response(200, json{{"writer", req.writer}, {"jobs_submit", c->submitter != nullptr}});
  });
  r.add(Method::Delete, "/api/v1/jobs/{id}", Access::Write, Exec::Blocking, route(delete_job));
  r.add(Method::Post, "/api/v1/estimate", Access::Read, Exec::Blocking, post_estimate);
}

}  // namespace gf::server
