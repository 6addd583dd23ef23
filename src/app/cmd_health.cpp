// `gpufleet health clear GPU`: clears the XIDs recorded on one GPU through the node's agent
// (POST /api/v1/gpus/{gpu}/health/clear with the agent's write token), as `dcgmi health --clear` does.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "core/gpu_health.hpp"
#include "platform/fs.hpp"
#include "platform/http_client.hpp"
#include "platform/log.hpp"
#include "platform/url.hpp"
#include "platform/users.hpp"
#include "store/node_store.hpp"

namespace gf::app {
namespace {

using nlohmann::json;
using platform::printable;

constexpr std::size_t kMaxNote = 200;  // the agent's limit

// $GPUFLEET_TOKEN, else the token file: --token-file, else the one `serve` makes beside its store.
Result<std::string> write_token(const HealthClearCommand& h) {
  if (auto env = platform::env("GPUFLEET_TOKEN"); env && !env->empty()) return *env;
  const std::string path =
      !h.token_file.empty() ? h.token_file
                            : (std::filesystem::path(store::default_db_path()).parent_path() / "agent.token").string();
  platform::TokenFileRules rules;
  rules.root_may_own = true;  // root's agent, its token read by an admin it was shared with
  auto t = platform::read_token_file(path, rules);
  if (!t)
    return make_error(t.error().kind,
                      t.error().message + " (the agent's write token: set GPUFLEET_TOKEN or --token-file)");
  return t->token;
}

std::string xid_line(const json& e) {
  const auto xid = e.value("xid", 0u);
  const auto what =
      e.contains("description") && e["description"].is_string() ? e["description"].get<std::string>() : std::string();
  return fmt::format("XID {}{} at {}", xid, what.empty() ? "" : " (" + what + ")", e.value("time", std::string("?")));
}

void print_answer(const json& a) {
  const std::string gpu = fmt::format("GPU {}", a.value("gpu", 0u));
  const std::string uuid = a.contains("uuid") && a["uuid"].is_string() ? " (" + a["uuid"].get<std::string>() + ")" : "";
  const auto& xids = a.contains("cleared_xids") && a["cleared_xids"].is_array() ? a["cleared_xids"] : json::array();
  if (xids.empty() && !(a.contains("last_xid_cleared") && a["last_xid_cleared"].is_number())) {
    std::printf("%s: no XIDs were recorded since the agent started or the last clear; nothing to clear\n",
                printable(gpu + uuid).c_str());
  } else {
    std::printf("%s: cleared\n", printable(gpu + uuid).c_str());
    for (const auto& e : xids) std::printf("  %s\n", printable(xid_line(e)).c_str());
    if (xids.empty()) std::printf("  XID %s (the last one)\n", a["last_xid_cleared"].dump().c_str());
  }
  if (a.value("healthy", false)) {
    std::printf("%s is healthy\n", gpu.c_str());
    return;
  }
  // A lost GPU or a failed row remap is state: it stays while the driver says so.
  std::printf("%s is still unhealthy (a clear takes out XIDs only):\n", gpu.c_str());
  if (a.contains("health_problems") && a["health_problems"].is_array())
    for (const auto& p : a["health_problems"])
      if (p.is_object()) std::printf("  %s\n", printable(p.value("message", std::string("?"))).c_str());
}

}  // namespace

int run_health_clear(const GlobalOptions&, const HealthClearCommand& h) {
  if (h.note.size() > kMaxNote) {
    print_error(fmt::format("--note: at most {} bytes", kMaxNote));
    return kExitUsage;
  }
  auto token = write_token(h);
  if (!token) {
    print_error(token.error().message);
    return kExitError;
  }
  std::string base = h.agent;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (base.rfind("http://", 0) != 0 && base.rfind("https://", 0) != 0) {
    print_error("--agent: expected http://HOST:PORT or https://…, got '" + printable(h.agent, 100) + "'");
    return kExitUsage;
  }
  platform::HttpRequest req;
  req.method = "POST";
  req.url = base + "/api/v1/gpus/" + platform::url_escape(h.gpu) + "/health/clear";
  req.bearer_token = *token;
  req.timeout = std::chrono::seconds(30);
  // Who asks, in the agent's log beside "the write token's holder": this user, and their words.
  const std::string who = platform::user_name(static_cast<std::uint32_t>(::geteuid()));
  std::string note = who.empty() ? fmt::format("uid {}", ::geteuid()) : who;
  if (!h.note.empty()) note += ": " + h.note;
  req.body = json{{"note", note.substr(0, kMaxNote)}}.dump();
  auto out = platform::http_perform(req);
  const std::string shown = platform::url_for_display(base);
  if (!out.ok()) {
    print_error("the agent at " + shown + ": " + out.error().message);
    return kExitError;
  }
  const auto& resp = out.response();
  auto j = json::parse(resp.body, nullptr, false);
  if (resp.status != 200) {
    std::string why = j.is_object() && j.contains("message") && j["message"].is_string()
                          ? j["message"].get<std::string>()
                          : fmt::format("HTTP {}", resp.status);
    if (resp.status == 401) why += " (the token is not the agent's write token)";
    print_error("the agent at " + shown + ": " + printable(why, 300));
    return resp.status == 400 ? kExitUsage : kExitError;
  }
  if (!j.is_object()) {
    print_error("the agent at " + shown + " answered something that is not a JSON object");
    return kExitError;
  }
  if (h.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_answer(j);
  return kExitOk;
}

}  // namespace gf::app
