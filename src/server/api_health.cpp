// POST /api/v1/gpus/{gpu}/health/clear: an operator clears the XIDs recorded on one GPU after dealing
// with them (a reset, a reboot), as `dcgmi health --clear` does. The token holder only; every clear is
// logged. Later readings no longer list those XIDs (sampler/health_clears.hpp); the xid_errors alert
// resolves at the next collection, which /ws and Socket.IO announce as any resolved alert.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/gpu_health.hpp"
#include "platform/log.hpp"
#include "server/api.hpp"
#include "wire/time.hpp"

namespace gf::server {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxNoteBytes = 200;

// The optional body {"note": "…"}: who clears and why, in the operator's words (kept in the log).
Result<std::string> clear_note(const Request& req) {
  if (req.body.empty()) return std::string();
  const auto j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(ErrorKind::Invalid, "the body is not a JSON object");
  for (const auto& [k, v] : j.items())
    if (k != "note") return make_error(ErrorKind::Invalid, "unknown member \"" + platform::printable(k, 40) + "\"");
  const auto n = j.find("note");
  if (n == j.end()) return std::string();
  if (!n->is_string()) return make_error(ErrorKind::Invalid, "\"note\" must be a string");
  const auto& s = n->get_ref<const std::string&>();
  if (s.size() > kMaxNoteBytes)
    return make_error(ErrorKind::Invalid, fmt::format("\"note\" is longer than {} bytes", kMaxNoteBytes));
  return s;
}

json problems_json(const std::vector<core::HealthProblem>& list) {
  json out = json::array();
  for (const auto& p : list) out.push_back({{"code", p.code}, {"message", p.message}});
  return out;
}

json clear_json(const sampler::Monitor::XidsCleared& r, std::chrono::system_clock::time_point at,
                const std::string& note, const std::string& node) {
  json events = json::array();
  for (const auto& e : r.cleared.events) {
    const auto what = core::xid_description(e.xid);
    events.push_back({{"xid", e.xid},
                      {"time", wire::iso8601(e.time)},
                      {"description", what.empty() ? json(nullptr) : json(std::string(what))}});
  }
  const auto before = core::judge_health(r.before), after = core::judge_health(r.after);
  return json{{"node", node},
              {"gpu", r.before.index},
              {"uuid", r.before.uuid.empty() ? json(nullptr) : json(r.before.uuid)},
              {"cleared_at", wire::iso8601(at)},
              {"cleared_xids", std::move(events)},
              {"last_xid_cleared", r.cleared.last_xid ? json(*r.cleared.last_xid) : json(nullptr)},
              {"healthy_before", before.healthy},
              {"healthy", after.healthy},
              // What a clear does not touch: a lost GPU or a failed row remap is state, read anew.
              {"health_problems", problems_json(after.problems)},
              {"note", note.empty() ? json(nullptr) : json(note)}};
}

}  // namespace

void add_health_clear_route(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Post, "/api/v1/gpus/{gpu}/health/clear", Access::Write, Exec::Blocking, [c](const Request& req) {
    const std::string& which = req.params.at("gpu");
    if (which.empty() || which.size() > 96)
      return error_response(ErrorKind::Invalid, "name the GPU by its index or UUID");
    auto note = clear_note(req);
    if (!note) return error_response(note.error());
    const auto at = c->clock->wall_now();
    auto r = c->monitor->clear_xids(which, at);
    if (!r) return error_response(ErrorKind::NotReady, "cannot read the GPUs: " + r.error().message);
    if (!*r)
      return error_response(ErrorKind::NotFound,
                            "no GPU '" + platform::printable(which, 96) + "' on this node (give its index or UUID)");
    const auto& done = **r;
    std::vector<std::string> xids;
    for (const auto& e : done.cleared.events) xids.push_back(fmt::format("{} at {}", e.xid, wire::iso8601(e.time)));
    if (xids.empty() && done.cleared.last_xid) xids.push_back(fmt::format("{} (the last XID)", *done.cleared.last_xid));
    platform::log_line(
        "health",
        fmt::format("GPU {} ({}): XIDs cleared at {} by the write token's holder (REST){}: {}", done.before.index,
                    done.before.uuid.empty() ? "no UUID" : platform::printable(done.before.uuid, 96), wire::iso8601(at),
                    note->empty() ? "" : ", note: \"" + platform::printable(*note) + "\"",
                    xids.empty() ? "none were recorded" : fmt::format("{}", fmt::join(xids, ", "))));
    // Publish a reading with the clear applied now, rather than at the next collection.
    (void)c->agent->fresh();
    return json_response(200, clear_json(done, at, *note, c->node_name));
  });
}

}  // namespace gf::server
