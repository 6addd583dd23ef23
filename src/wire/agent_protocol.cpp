#include "wire/agent_protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "wire/agent_docs.hpp"
#include "wire/gpu_need.hpp"
#include "wire/json.hpp"
#include "wire/json_field.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

// A line for the socket: invalid UTF-8 (a process name, say) is replaced, never thrown on.
std::string line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

Error invalid(std::string msg) { return make_error(ErrorKind::Invalid, std::move(msg)); }

Result<std::string> get_str(const json& j, const char* key, std::size_t max, bool required = false) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) return invalid(fmt::format("{} is required", key));
    return std::string();
  }
  if (!it->is_string()) return invalid(fmt::format("{} must be a string", key));
  auto s = it->get<std::string>();
  if (s.size() > max) return invalid(fmt::format("{} is longer than {} bytes", key, max));
  if (required && s.empty()) return invalid(fmt::format("{} must not be empty", key));
  return s;
}

Result<bool> get_bool(const json& j, const char* key, bool def) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (!it->is_boolean()) return invalid(fmt::format("{} must be true or false", key));
  return it->get<bool>();
}

// Every key of j is "id", "op", one of keys or (with_need) a GPU need's key.
Result<void> known_keys(const json& j, std::initializer_list<const char*> keys, bool with_need = false) {
  for (const auto& [k, v] : j.items()) {
    if (k == "id" || k == "op" || (with_need && is_gpu_need_key(k, kAgentNeedKeys))) continue;
    bool ok = false;
    for (const char* want : keys) ok = ok || k == want;
    if (!ok) return invalid(fmt::format("unknown argument '{}'", k.size() > 64 ? k.substr(0, 64) + "…" : k));
  }
  return {};
}

#define GF_TRY(var, expr) \
  auto var = (expr);      \
  if (!var) return var.error();

Result<AgentOp> parse_acquire(const json& j) {
  if (auto k = known_keys(j, {"name", "job_id", "priority", "wait_s", "tie"}, /*with_need=*/true); !k) return k.error();
  AcquireArgs a;
  GF_TRY(need, gpu_need_from_json(j, kAgentNeedKeys));
  GF_TRY(name, get_str(j, "name", 200));
  GF_TRY(job, get_str(j, "job_id", 64));
  GF_TRY(prio, json_int(j, "priority", 0, -1000000, 1000000));
  GF_TRY(tie, get_str(j, "tie", 16));
  a.need = std::move(*need);
  a.name = std::move(*name);
  a.job_id = std::move(*job);
  a.priority = static_cast<int>(*prio);
  if (tie->empty() || *tie == "connection")
    a.tie = core::LeaseTie::Connection;
  else if (*tie == "parent")
    a.tie = core::LeaseTie::Process;
  else
    return invalid("tie must be \"connection\" or \"parent\"");
  if (auto it = j.find("wait_s"); it != j.end()) {
    if (!it->is_number()) return invalid("wait_s must be a number of seconds");
    const double w = it->get<double>();
    if (!std::isfinite(w) || w < 0 || w > 1e9) return invalid("wait_s must be from 0 to 1e9 seconds");
    a.wait = std::chrono::milliseconds(static_cast<std::int64_t>(w * 1000.0));
  }
  return AgentOp(std::move(a));
}

Result<AgentOp> parse_job_put(const json& j) {
  if (auto k = known_keys(j, {"job"}); !k) return k.error();
  auto it = j.find("job");
  if (it == j.end() || !it->is_object()) return invalid("job must be an object");
  const json& o = *it;
  if (auto k = known_keys(
          o, {"name", "status", "command", "exit_code", "started_at_ms", "ended_at_ms", "lease_id", "record", "task"});
      !k)
    return k.error();
  JobPutArgs a;
  GF_TRY(id, get_str(o, "id", 64));
  GF_TRY(name, get_str(o, "name", 200));
  GF_TRY(status, get_str(o, "status", 32, true));
  GF_TRY(lease, get_str(o, "lease_id", 64));
  GF_TRY(task, get_str(o, "task", 200));
  // Times up to the end of year 9999: a record's times are summed (GPU-hours) and turned into clock
  // values (nanoseconds), where INT64_MAX milliseconds would overflow.
  constexpr std::int64_t kLatestMs = 253402300799999;
  GF_TRY(started, json_int(o, "started_at_ms", 0, 0, kLatestMs));
  // Job ids are shown to every user (`gpufleet jobs`) and used in paths: letters, digits, '.', '_', '-'.
  if (!std::all_of(id->begin(), id->end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' ||
               c == '-';
      }))
    return make_error(ErrorKind::Invalid, "job.id: letters, digits, '.', '_' and '-' only");
  a.job.id = std::move(*id);
  a.job.name = std::move(*name);
  a.job.status = std::move(*status);
  a.job.lease_id = std::move(*lease);
  a.job.task = std::move(*task);
  a.job.started_at_ms = *started;
  if (auto c = o.find("exit_code"); c != o.end() && !c->is_null()) {
    GF_TRY(code, json_int(o, "exit_code", 0, -1000000, 1000000));
    a.job.exit_code = static_cast<int>(*code);
  }
  if (auto e = o.find("ended_at_ms"); e != o.end() && !e->is_null()) {
    GF_TRY(ended, json_int(o, "ended_at_ms", 0, 0, kLatestMs));
    // An end before the start (the wall clock stepped back during the run) is kept as a run of no time.
    a.job.ended_at_ms = std::max(*ended, *started);
  }
  if (auto c = o.find("command"); c != o.end()) {
    if (!c->is_array()) return invalid("job.command must be an array of strings");
    for (const auto& arg : *c)
      if (!arg.is_string()) return invalid("job.command must be an array of strings");
    a.job.command = c->dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    a.job.command = "[]";
  }
  if (auto r = o.find("record"); r != o.end()) {
    if (!r->is_object()) return invalid("job.record must be an object");
    a.job.record = r->dump(-1, ' ', false, json::error_handler_t::replace);
    if (a.job.record.size() > (1u << 20)) return invalid("job.record is larger than 1 MiB");
  } else {
    a.job.record = "{}";
  }
  return AgentOp(std::move(a));
}

#undef GF_TRY

}  // namespace

ParsedRequest parse_agent_request(std::string_view text) {
  ParsedRequest out;
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.size() > kMaxRequestLine) {
    out.op = invalid(fmt::format("the request is longer than {} bytes", kMaxRequestLine));
    out.close = true;
    return out;
  }
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.op = invalid("a request must be one JSON object on one line");
    out.close = true;
    return out;
  }
  auto id = j.find("id");
  if (id == j.end() || !(id->is_number_integer() || id->is_number_unsigned())) {
    out.op = invalid("a request needs an integer id");
    return out;
  }
  if (id->is_number_unsigned() && id->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    out.op = invalid("id is too large");
    return out;
  }
  out.id = id->get<std::int64_t>();
  auto op = j.find("op");
  if (op == j.end() || !op->is_string()) {
    out.op = invalid("a request needs an op (a string)");
    return out;
  }
  const std::string name = op->get<std::string>();
  auto simple = [&](std::initializer_list<const char*> keys) { return known_keys(j, keys); };
  if (name == "acquire") {
    out.op = parse_acquire(j);
  } else if (name == "cancel") {
    if (auto k = simple({"target"}); !k) {
      out.op = k.error();
    } else if (auto t = j.find("target"); t == j.end() || !(t->is_number_integer() || t->is_number_unsigned())) {
      out.op = invalid("target must be the integer id of a waiting acquire");
    } else {
      out.op = AgentOp(CancelArgs{
          t->is_number_unsigned() && t->get<std::uint64_t>() > INT64_MAX ? INT64_MAX : t->get<std::int64_t>()});
    }
  } else if (name == "release") {
    auto k = simple({"lease"});
    auto lease = get_str(j, "lease", 64, true);
    if (!k)
      out.op = k.error();
    else if (!lease)
      out.op = lease.error();
    else
      out.op = AgentOp(ReleaseArgs{std::move(*lease)});
  } else if (name == "leases") {
    auto k = simple({"all"});
    auto all = get_bool(j, "all", false);
    if (!k)
      out.op = k.error();
    else if (!all)
      out.op = all.error();
    else
      out.op = AgentOp(LeasesArgs{*all});
  } else if (name == "job_put") {
    out.op = parse_job_put(j);
  } else if (name == "jobs") {
    auto k = simple({"limit"});
    auto limit = json_int(j, "limit", 200, 1, 1000);
    if (!k)
      out.op = k.error();
    else if (!limit)
      out.op = limit.error();
    else
      out.op = AgentOp(JobsArgs{static_cast<std::size_t>(*limit)});
  } else if (name == "job") {
    // The request's own "id" is taken: the job's id travels as "job" (docs/agent-socket.md).
    auto k = simple({"job"});
    auto which = get_str(j, "job", 64, true);
    if (!k)
      out.op = k.error();
    else if (!which)
      out.op = which.error();
    else
      out.op = AgentOp(JobArgs{std::move(*which)});
  } else if (name == "get") {
    auto k = simple({"path"});
    auto path = get_str(j, "path", 2048, true);
    if (!k)
      out.op = k.error();
    else if (!path)
      out.op = path.error();
    else if (path->front() != '/')
      out.op = invalid("path must start with /");
    else
      out.op = AgentOp(GetArgs{std::move(*path)});
  } else {
    out.op = invalid(fmt::format("unknown op '{}' (acquire, cancel, release, leases, job_put, jobs, job, get)",
                                 name.size() > 32 ? name.substr(0, 32) + "…" : name));
  }
  return out;
}

std::string greeting_line(const PeerView& p, std::string_view version) {
  return line(json{{"hello", "gpufleet-agent"},
                   {"protocol", kAgentProtocol},
                   {"version", version},
                   {"peer", {{"uid", p.uid}, {"gid", p.gid}, {"pid", p.pid}, {"user", p.user}, {"admin", p.admin}}}});
}

std::string ok_line(std::int64_t id, json result) {
  if (!result.is_object()) result = json::object();
  json out{{"id", id}, {"ok", true}};
  out.update(result);
  out["id"] = id;
  out["ok"] = true;
  return line(out);
}

std::string error_line(std::optional<std::int64_t> id, const Error& e) {
  return line(json{{"id", id ? json(*id) : json(nullptr)},
                   {"ok", false},
                   {"error", {{"kind", std::string(to_string(e.kind))}, {"message", e.message}}}});
}

std::string waiting_line(std::int64_t id, double waited_s, const std::string& why, std::size_t ahead,
                         const std::vector<core::Lease>& holders) {
  json h = json::array();
  for (const auto& l : holders) h.push_back(lease_json(l));
  return line(json{{"id", id},
                   {"event", "waiting"},
                   {"waited_s", std::round(waited_s * 10) / 10},
                   {"why", why},
                   {"ahead", ahead},
                   {"holders", std::move(h)}});
}

std::string lease_warning_line(const std::string& lease, const std::string& message) {
  return line(json{{"event", "lease_warning"}, {"lease", lease}, {"message", message}});
}

std::string lease_ended_line(const std::string& lease, const std::string& reason) {
  return line(json{{"event", "lease_ended"}, {"lease", lease}, {"reason", reason}});
}

json leases_result_json(const std::vector<core::Lease>& leases, const std::vector<core::Waiter>& waiting) {
  json l = json::array(), w = json::array();
  for (const auto& x : leases) l.push_back(lease_json(x));
  for (const auto& x : waiting) w.push_back(waiter_json(x));
  return json{{"leases", std::move(l)}, {"waiting", std::move(w)}};
}

json job_put_result_json(const std::string& job_id) { return json{{"job_id", job_id}}; }

json jobs_result_json(const std::vector<core::Job>& jobs) {
  json list = json::array();
  for (const auto& j : jobs) list.push_back(job_json(j));
  return json{{"jobs", std::move(list)}};
}

json job_result_json(const core::Job& job) { return json{{"job", job_json(job)}}; }

json get_result_json(unsigned status, std::optional<std::string_view> body) {
  json b = nullptr;
  if (body) {
    b = json::parse(*body, nullptr, false);
    if (b.is_discarded()) b = std::string(*body);
  }
  return json{{"status", status}, {"body", std::move(b)}};
}

json acquire_result_json(const core::Lease& lease, const allocator::Selection& sel, const core::Snapshot& s,
                         unsigned world_size) {
  return json{{"lease", lease_json(lease)}, {"why", sel.why}, {"gpu_info", gpu_info_json(sel, s, world_size)}};
}

json job_to_json(const core::Job& j) {
  json out{{"name", j.name}, {"status", j.status}, {"started_at_ms", j.started_at_ms}};
  if (!j.id.empty()) out["id"] = j.id;
  auto cmd = json::parse(j.command, nullptr, false);
  out["command"] = cmd.is_discarded() ? json::array() : cmd;
  out["exit_code"] = j.exit_code ? json(*j.exit_code) : json(nullptr);
  out["ended_at_ms"] = j.ended_at_ms ? json(*j.ended_at_ms) : json(nullptr);
  out["lease_id"] = j.lease_id;
  if (!j.task.empty()) out["task"] = j.task;
  auto rec = json::parse(j.record.empty() ? "{}" : j.record, nullptr, false);
  out["record"] = rec.is_object() ? rec : json::object();
  return out;
}

}  // namespace gf::wire
