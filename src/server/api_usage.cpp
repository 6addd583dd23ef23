// GET /api/v1/usage: the node's GPU accounting (node::UsageLedger) grouped by user or job.
#include <chrono>

#include "server/api.hpp"
#include "wire/usage_json.hpp"

namespace gf::server {

void add_usage_routes(Router& r, ApiContext& ctx) {
  ApiContext* c = &ctx;
  r.add(Method::Get, "/api/v1/usage", Access::Read, Exec::Blocking, [c](const Request& req) {
    using namespace std::chrono;
    if (!c->usage) return error_response(ErrorKind::NotReady, "this agent keeps no accounting (no store)");
    const auto now = c->clock->wall_now();
    auto since = req.query.count("since") ? parse_time(req.query.at("since"), now)
                                          : Result<system_clock::time_point>(now - hours(24 * 7));
    if (!since) return error_response(ErrorKind::Invalid, "since: " + since.error().message);
    const std::string by = req.query.count("by") ? req.query.at("by") : "user";
    if (by != "user" && by != "job")
      return error_response(ErrorKind::Invalid, "by: expected user or job, got '" + by.substr(0, 32) + "'");
    const auto since_ms = core::to_epoch_ms(*since);
    auto rows = c->usage->since(since_ms);
    if (!rows) return error_response(rows.error(), "store_error");
    return json_response(200, wire::usage_json(c->node_name, since_ms,
                                               by == "user" ? core::UsageGroup::User : core::UsageGroup::Job, *rows));
  });
}

}  // namespace gf::server
