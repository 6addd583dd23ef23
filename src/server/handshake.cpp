#include "server/handshake.hpp"

#include <algorithm>
#include <charconv>

#include "platform/log.hpp"
#include "server/security.hpp"

namespace gf::server {

Response shutting_down() { return error_response(503, "shutting_down", "the agent is stopping"); }

std::variant<Response, WsAccept> decide_ws(const RequestHead& head, const HandshakePolicy& policy, bool hub_full) {
  if (head.path != "/ws") return error_response(404, "not_found", "WebSocket is served at /ws");
  if (policy.draining) return shutting_down();
  if (!origin_allowed(head.origin, policy.listen_host, policy.port, *policy.allowed_origins))
    return error_response(403, "forbidden_origin", "WebSocket Origin " + head.origin + " is not this agent's address");
  // Browsers cannot set headers on a WebSocket: they offer the token as a subprotocol
  // ("gpufleet.bearer.<token>") next to "gpufleet.v1", which is the one we select.
  const std::vector<std::string> protocols = offered_subprotocols(head.subprotocols);
  if (policy.auth_read &&
      !policy.tokens->reads([&](std::string_view t) { return ws_token_ok(head.authorization, protocols, t); }))
    return error_response(401, "unauthorized", "this agent needs Authorization: Bearer <token> for reads");
  if (hub_full) return error_response(503, "too_many_clients", "the WebSocket client limit is reached");
  WsAccept a;
  if (!period_from_query(head.query, a.period))
    return error_response(400, "bad_request", "period_ms must be a whole number of milliseconds");
  if (std::find(protocols.begin(), protocols.end(), "gpufleet.v1") != protocols.end()) a.subprotocol = "gpufleet.v1";
  return a;
}

namespace {

// The Socket.IO handshake once the page's origin is allowed; `d.cors` is set.
void decide_allowed_socketio(const RequestHead& head, const HandshakePolicy& policy, SioDecision& d) {
  const auto refuse = [&](unsigned status, std::string_view code, std::string_view message) {
    Response r = error_response(status, code, message);
    r.headers.insert(r.headers.end(), d.cors.begin(), d.cors.end());
    d.outcome = std::move(r);
  };
  if (head.method == Method::Options && !head.upgrade) {
    Response r = shared_response(204, "text/plain; charset=UTF-8", std::make_shared<const std::string>());
    r.headers = d.cors;
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST");
    r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    d.outcome = std::move(r);
    return;
  }
  if (head.method != Method::Get && head.method != Method::Post) {
    Response r = error_response(405, "method_not_allowed", "/socket.io/ takes GET and POST");
    r.headers.emplace_back("Allow", "GET, POST, OPTIONS");
    d.outcome = std::move(r);
    return;
  }
  const auto q = [&](const char* key) -> std::string {
    auto it = head.query.find(key);
    return it == head.query.end() ? std::string() : it->second;
  };
  if (q("EIO") != "4")
    return refuse(400, "unsupported_protocol", "only Engine.IO 4 is served (EIO=4: socket.io-client 3 and later)");
  if (q("transport") != (head.upgrade ? "websocket" : "polling"))
    return refuse(
        400, "bad_request",
        head.upgrade ? "a WebSocket upgrade needs transport=websocket" : "this request needs transport=polling");
  // The token as for /ws: Authorization or ?token= at the handshake; without either, the Socket.IO
  // CONNECT may carry it (auth {token}). A token that is offered and wrong is refused at once.
  SioAccept a;
  a.authorized = !policy.auth_read;
  if (policy.auth_read) {
    const auto qt = head.query.find("token");
    const bool offered = !head.authorization.empty() || qt != head.query.end();
    a.authorized = policy.tokens->reads([&](std::string_view t) {
      return bearer_ok(head.authorization, t) || (qt != head.query.end() && bearer_ok("Bearer " + qt->second, t));
    });
    if (offered && !a.authorized) return refuse(401, "unauthorized", "this agent needs a valid token for reads");
  }
  if (!period_from_query(head.query, a.period))
    return refuse(400, "bad_request", "period_ms must be a whole number of milliseconds");
  a.sid = q("sid");
  d.outcome = std::move(a);
}

}  // namespace

SioDecision decide_socketio(const RequestHead& head, const HandshakePolicy& policy) {
  SioDecision d;
  if (policy.draining) {
    d.outcome = shutting_down();
    return d;
  }
  // A page from another origin gets nothing: no session, and no CORS header that would let it read.
  if (!origin_allowed(head.origin, policy.listen_host, policy.port, *policy.allowed_origins)) {
    d.outcome = error_response(403, "forbidden_origin",
                               "Origin " + platform::printable(head.origin) + " is not this agent's address");
    return d;
  }
  if (!head.origin.empty()) {
    d.cors.emplace_back("Access-Control-Allow-Origin", head.origin);
    d.cors.emplace_back("Access-Control-Allow-Credentials", "true");
    d.cors.emplace_back("Vary", "Origin");
  }
  decide_allowed_socketio(head, policy, d);
  return d;
}

bool period_from_query(const std::map<std::string, std::string>& query,
                       std::optional<std::chrono::milliseconds>& period) {
  period.reset();
  auto it = query.find("period_ms");
  if (it == query.end()) return true;
  const std::string& v = it->second;
  const bool digits =
      !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return false;
  long long ms = 0;
  std::from_chars(v.data(), v.data() + v.size(), ms);
  period = std::chrono::milliseconds(ms);
  return true;
}

std::vector<std::string> offered_subprotocols(std::string_view header) {
  std::vector<std::string> protocols;
  for (std::size_t pos = 0; pos <= header.size();) {
    const auto comma = std::min(header.find(',', pos), header.size());
    std::string_view p = header.substr(pos, comma - pos);
    while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
    while (!p.empty() && p.back() == ' ') p.remove_suffix(1);
    if (!p.empty()) protocols.emplace_back(p);
    pos = comma + 1;
  }
  return protocols;
}

bool ws_token_ok(std::string_view authorization, const std::vector<std::string>& protocols, std::string_view token) {
  if (bearer_ok(authorization, token)) return true;
  constexpr std::string_view kPrefix = "gpufleet.bearer.";
  return std::any_of(protocols.begin(), protocols.end(), [&](const std::string& p) {
    return p.rfind(kPrefix, 0) == 0 && bearer_ok("Bearer " + p.substr(kPrefix.size()), token);
  });
}

}  // namespace gf::server
