// `gpufleet usage`: GPU accounting per user or job, from the node's agent (GET /api/v1/usage through
// the agent socket's `get` op, or over HTTP with --agent URL for a remote one) or, without an agent,
// from the node file's usage tables. `leases --all` reads the same tables for its efficiency line.
#include <fmt/format.h>

#include <cstdio>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/jobs.hpp"
#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/log.hpp"
#include "store/usage_store.hpp"
#include "wire/usage_json.hpp"

namespace gf::app {

namespace {

std::string cell(const std::optional<double>& v, const char* f) {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("n/a");
}

void print_table(const wire::UsageDoc& d) {
  const char* head = d.by == "job" ? "JOB" : "USER";
  std::printf("%-20s  %6s  %10s  %10s  %6s  %10s  %10s\n", head, "LEASES", "GPU-H HELD", "GPU-H BUSY", "BUSY",
              "ENERGY KWH", "PEAK MEM");
  auto row = [](const wire::UsageRow& r, const std::string& key) {
    std::printf("%-20s  %6zu  %10.2f  %10.2f  %6s  %10.3f  %10s\n", platform::escape_control(key).c_str(), r.leases,
                r.held_gpu_h, r.busy_gpu_h, cell(r.busy_pct, "{:.0f} %").c_str(), r.energy_kwh,
                r.peak_mem_mib ? fmt::format("{} MiB", *r.peak_mem_mib).c_str() : "n/a");
  };
  for (const auto& r : d.rows) row(r, r.key.empty() ? "(none)" : r.key);
  if (d.rows.empty())
    std::printf("No leases in this period.\n");
  else if (d.rows.size() > 1)
    row(d.total, "total");
}

}  // namespace

Result<std::string> fetch_usage_document(const UsageCommand& u, const std::string& path_query) {
  if (!u.agent.empty()) {
    platform::HttpRequest req;
    std::string base = u.agent;
    while (!base.empty() && base.back() == '/') base.pop_back();
    req.url = base + path_query;
    req.timeout = std::chrono::seconds(10);
    auto out = platform::http_perform(req);
    if (!out.ok()) return make_error(ErrorKind::Unavailable, "the agent at " + u.agent + ": " + out.error().message);
    if (out.response().status != 200) {
      auto j = nlohmann::json::parse(out.response().body, nullptr, false);
      const std::string why = j.is_object() && j.contains("message") && j["message"].is_string()
                                  ? j["message"].get<std::string>()
                                  : "HTTP " + std::to_string(out.response().status);
      return make_error(out.response().status == 400 ? ErrorKind::Usage : ErrorKind::Failed,
                        "the agent at " + u.agent + ": " + why);
    }
    return std::move(out.response().body);
  }
  // No agent: the node file's own tables (the ledger writes them; running leases as of its last flush).
  auto since = core::parse_duration(u.since, core::BareNumber::Seconds);
  if (!since) return make_error(ErrorKind::Usage, "--since: " + since.error().message);
  const std::string db = u.db.empty() ? store::default_db_path() : u.db;
  auto st = store::UsageStore::open(db);
  if (!st) return st.error();
  const std::int64_t since_ms = store::now_ms() - std::chrono::milliseconds(*since).count();
  auto rows = (*st)->since(since_ms);
  if (!rows) return rows.error();
  return wire::usage_json("", since_ms, u.by == "job" ? core::UsageGroup::Job : core::UsageGroup::User, *rows).dump();
}

namespace {

// The document from the node's agent over its socket (nullopt: no agent runs here).
Result<std::optional<std::string>> usage_via_socket(const GlobalOptions& g, const UsageCommand& u,
                                                    const std::string& path_query) {
  auto agent = connect_agent(g, u.db);
  if (!agent) return agent.error();
  if (!*agent) return std::optional<std::string>();
  auto r = (*agent)->call("get", {{"path", path_query}});
  if (!r) return r.error();
  const int status = r->value("status", 0);
  const auto body = r->value("body", nlohmann::json());
  if (status != 200) {
    const std::string why = body.is_object() && body.contains("message") && body["message"].is_string()
                                ? body["message"].get<std::string>()
                                : "status " + std::to_string(status);
    return make_error(status == 400 ? ErrorKind::Usage : ErrorKind::Failed, "the agent: " + why);
  }
  return std::optional<std::string>(body.dump());
}

}  // namespace

int run_usage(const GlobalOptions& g, const UsageCommand& u, const UsageFetch& fetch) {
  if (u.by != "user" && u.by != "job") {
    print_error("--by: expected user or job");
    return kExitUsage;
  }
  if (auto d = core::parse_duration(u.since, core::BareNumber::Seconds); !d) {
    print_error("--since: " + d.error().message);
    return kExitUsage;
  }
  const std::string path = "/api/v1/usage?since=" + platform::url_escape(u.since) + "&by=" + u.by;
  Result<std::string> text = std::string();
  if (fetch) {
    text = fetch(path);
  } else if (u.agent.empty()) {
    auto via = usage_via_socket(g, u, path);
    if (!via) {
      print_error(via.error().message);
      return exit_code(via.error());
    }
    text = *via ? std::move(**via) : fetch_usage_document(u, path);
  } else {
    text = fetch_usage_document(u, path);
  }
  if (!text) {
    print_error(text.error().message);
    return exit_code(text.error());
  }
  auto doc = wire::parse_usage_json(*text);
  if (!doc) {
    print_error(doc.error().message);
    return exit_code(doc.error());
  }
  if (u.json) {
    std::printf("%s\n", nlohmann::json::parse(*text).dump(2).c_str());
    return kExitOk;
  }
  print_table(*doc);
  return kExitOk;
}

std::map<std::string, std::string> efficiency_lines(const std::string& db_path,
                                                    const std::vector<core::Lease>& leases) {
  std::map<std::string, std::string> out;
  bool any = false;
  for (const auto& l : leases) any = any || l.released_at_ms.has_value();
  if (!any) return out;
  auto st = store::UsageStore::open(db_path);
  if (!st) return out;  // no accounting here: the lease list is still worth printing
  for (const auto& l : leases) {
    if (!l.released_at_ms) continue;
    auto r = (*st)->get(l.id);
    if (r && *r && (*r)->released_at_ms) out[l.id] = wire::efficiency_line(**r);
  }
  return out;
}

}  // namespace gf::app
