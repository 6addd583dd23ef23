#include "app/agent_client.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "platform/fs.hpp"
#include "platform/log.hpp"

namespace gf::app {
namespace {

using Clock = platform::UnixLineSocket::Clock;
constexpr auto kSlice = std::chrono::milliseconds(200);  // how often a wait looks at its cancel flag

}  // namespace

std::optional<AgentLocation> find_agent(const std::string& option) {
  if (option == "none") return std::nullopt;
  if (!option.empty()) return AgentLocation{option, true, false};
  if (auto env = platform::env("GPUFLEET_SOCKET")) {
    if (*env == "none") return std::nullopt;
    return AgentLocation{*env, true, false};
  }
  const std::string root_sock = "/run/gpufleet/agent.sock";
  if (platform::exists(root_sock)) return AgentLocation{root_sock, false, false};
  std::string own;
  if (auto xdg = platform::env("XDG_RUNTIME_DIR"))
    own = *xdg + "/gpufleet/agent.sock";
  else
    own = fmt::format("/tmp/gpufleet-{}/agent.sock", ::geteuid());
  if (platform::exists(own)) return AgentLocation{own, false, true};
  return std::nullopt;
}

namespace {
std::optional<std::chrono::seconds> limit_from_environment() {
  const auto v = platform::env("GPUFLEET_AGENT_TIMEOUT");
  if (!v || v->empty() || v->size() > 3) return std::nullopt;
  int n = 0;
  for (const char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n < 1 || n > 600) return std::nullopt;
  return std::chrono::seconds(n);
}
}  // namespace

std::chrono::seconds agent_connect_limit() { return limit_from_environment().value_or(kAgentConnectLimit); }
std::chrono::seconds agent_silence_limit() { return limit_from_environment().value_or(kAgentSilenceLimit); }

ErrorKind error_kind_from_name(std::string_view name) {
  for (auto k : {ErrorKind::Failed, ErrorKind::Invalid, ErrorKind::Usage, ErrorKind::NotFound, ErrorKind::Unavailable,
                 ErrorKind::NotReady, ErrorKind::Unsupported, ErrorKind::Permission})
    if (to_string(k) == name) return k;
  return ErrorKind::Failed;
}

Result<AgentClient> AgentClient::connect(const std::string& path) {
  const auto deadline = Clock::now() + agent_connect_limit();
  auto s = platform::UnixLineSocket::connect(path, agent_connect_limit());
  if (!s) return with_context("cannot reach the agent: ", s.error());
  // Only root's agent or our own is believed: a socket another user planted where ours would be (say
  // /tmp/gpufleet-<uid>/ when there is no XDG_RUNTIME_DIR) must not hear our commands or answer them.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(s->fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return make_error(ErrorKind::Permission, fmt::format("cannot tell who serves the socket {}", path));
  if (cred.uid != 0 && cred.uid != ::geteuid())
    return make_error(
        ErrorKind::Permission,
        fmt::format("the socket {} is served by uid {}, neither root nor you: not talking to it", path, cred.uid));
  AgentClient c(path, std::move(*s));
  auto line = c.sock_.read_line(deadline, kAgentMaxLine);
  if (!line) {
    if (line.error().kind == ErrorKind::Unavailable) return c.not_answering();
    return make_error(
        fmt::format("the agent at {} closed the connection before its greeting ({})", path, line.error().message));
  }
  auto hello = nlohmann::json::parse(*line, nullptr, false);
  if (!hello.is_object() || hello.value("hello", "") != "gpufleet-agent")
    return make_error(fmt::format("{} is not a gpufleet agent (its first line is not the greeting)", path));
  if (!hello.contains("protocol") || !hello["protocol"].is_number_integer() || hello["protocol"].get<int>() != 1)
    return make_error(fmt::format("the agent at {} speaks another protocol version ({})", path,
                                  hello.contains("protocol") ? hello["protocol"].dump() : "none"));
  if (auto p = hello.find("peer"); p != hello.end() && p->is_object()) {
    c.peer_.uid = p->value("uid", 0u);
    c.peer_.gid = p->value("gid", 0u);
    c.peer_.pid = p->value("pid", 0u);
    c.peer_.user = p->value("user", "");
    c.peer_.admin = p->value("admin", false);
  }
  return c;
}

Error AgentClient::not_answering() const {
  return make_error(ErrorKind::Failed, fmt::format("the agent at {} is not answering", path_));
}

Result<std::int64_t> AgentClient::send(const std::string& op, nlohmann::json args) {
  if (!args.is_object()) args = nlohmann::json::object();
  const std::int64_t id = next_id_++;
  args["id"] = id;
  args["op"] = op;
  auto w = sock_.write_all(args.dump() + "\n", Clock::now() + agent_silence_limit());
  if (!w) {
    if (w.error().kind == ErrorKind::Unavailable) return not_answering();
    return make_error(fmt::format("the agent at {} closed the connection ({})", path_, w.error().message));
  }
  return id;
}

Result<nlohmann::json> AgentClient::next_message(std::chrono::milliseconds limit) {
  auto line = sock_.read_line(Clock::now() + limit, kAgentMaxReply);
  if (!line) {
    if (line.error().kind == ErrorKind::Unavailable) return line.error();  // the caller counts silence
    return make_error(fmt::format("the agent at {} closed the connection ({})", path_, line.error().message));
  }
  auto j = nlohmann::json::parse(*line, nullptr, false);
  if (!j.is_object())
    return make_error(fmt::format("the agent at {} sent a malformed line (not a JSON object)", path_));
  return j;
}

void AgentClient::print_notice(const nlohmann::json& e) const {
  const std::string lease = e.contains("lease") && e["lease"].is_string() ? e["lease"].get<std::string>() : "?";
  const std::string ev = e.value("event", "");
  std::string text;
  if (auto m = e.find("message"); m != e.end() && m->is_string()) text = m->get<std::string>();
  if (auto r = e.find("reason"); text.empty() && r != e.end() && r->is_string())
    text = "ended: " + r->get<std::string>();
  if (text.empty()) return;  // an event this client does not know: nothing to say
  if (ev == "lease_ended" && !ending_.empty() && lease == ending_) return;  // we ended it ourselves
  std::fprintf(stderr, "gpufleet: lease %s: %s\n", platform::escape_control(lease).c_str(),
               platform::escape_control(text).c_str());
}

Result<nlohmann::json> AgentClient::wait_reply(std::int64_t id, const Event& on_event,
                                               const std::atomic<bool>* cancel) {
  auto heard = Clock::now();
  bool cancel_sent = false;
  for (;;) {
    if (cancel && cancel->load() && !cancel_sent) {
      cancel_sent = true;
      if (auto c = send("cancel", {{"target", id}}); !c) return c.error();
    }
    auto m = next_message(kSlice);
    if (!m) {
      if (m.error().kind != ErrorKind::Unavailable) return m.error();
      if (Clock::now() - heard >= agent_silence_limit()) return not_answering();
      continue;
    }
    heard = Clock::now();
    const nlohmann::json& j = *m;
    const auto idp = j.find("id");
    const bool for_us = idp != j.end() && idp->is_number_integer() && idp->get<std::int64_t>() == id;
    if (j.contains("event")) {
      if (for_us) {
        if (on_event) on_event(j);
      } else if (idp == j.end() || idp->is_null()) {
        print_notice(j);
      }
      continue;
    }
    if (idp != j.end() && idp->is_null() && j.value("ok", true) == false) {
      // The agent refused the connection's input as a whole (a line too long, not JSON) and closes it.
      const auto& err = j["error"];
      return make_error(error_kind_from_name(err.is_object() ? err.value("kind", "failed") : "failed"),
                        err.is_object() ? err.value("message", "the agent refused the request") : "refused");
    }
    if (!for_us) continue;  // the answer to an earlier cancel, or to nothing we wait for
    if (!j.contains("ok") || !j["ok"].is_boolean())
      return make_error(fmt::format("the agent at {} sent a malformed reply (no \"ok\")", path_));
    if (j["ok"].get<bool>()) return j;
    const auto& err = j.contains("error") && j["error"].is_object() ? j["error"] : nlohmann::json::object();
    std::string msg = err.contains("message") && err["message"].is_string() ? err["message"].get<std::string>()
                                                                            : std::string("the agent refused");
    const std::string kind = err.contains("kind") && err["kind"].is_string() ? err["kind"].get<std::string>() : "";
    return make_error(error_kind_from_name(kind), platform::escape_control(msg));
  }
}

Result<nlohmann::json> AgentClient::call(const std::string& op, nlohmann::json args, const Event& on_event,
                                         const std::atomic<bool>* cancel) {
  auto id = send(op, std::move(args));
  if (!id) return id.error();
  return wait_reply(*id, on_event, cancel);
}

bool AgentClient::watch_until(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    auto m = next_message(kSlice);
    if (m) {
      if (m->contains("event")) print_notice(*m);
      continue;
    }
    if (m.error().kind != ErrorKind::Unavailable) return false;
  }
  return true;
}

}  // namespace gf::app
