#pragma once
// The WebSocket and Socket.IO handshakes, decided without a socket: from a request's head (filled once
// by the HTTP session) and the server's policy, a handshake is refused with its response, or accepted
// with what the connection needs (its update period, the subprotocol to echo, the Socket.IO session it
// names). Also the parts both share: ?period_ms=, the subprotocols a client offers, where a browser's
// token may come from, and the answer while the agent stops.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "server/http.hpp"
#include "server/security.hpp"

namespace gf::server {

// What a handshake reads of a request: its header, decoded once.
struct RequestHead {
  Method method = Method::Get;
  std::string path;
  std::map<std::string, std::string> query;
  std::string authorization;
  std::string origin;        // absent: empty
  std::string subprotocols;  // Sec-WebSocket-Protocol, as sent
  bool upgrade = false;      // a WebSocket upgrade request
};

// What the server's state and options say about handshakes.
struct HandshakePolicy {
  bool draining = false;
  std::string_view listen_host;
  unsigned short port = 0;
  const std::vector<std::string>* allowed_origins = nullptr;
  bool auth_read = false;  // reads need a token: tokens.reads()
  const ReadTokens* tokens = nullptr;
};

// 503 "the agent is stopping": the answer to any request while the server drains.
Response shutting_down();

// /ws: accepted with the client's period (nullopt: the hub's default) and the subprotocol to echo
// ("gpufleet.v1" when offered, else none). `hub_full`: the client cap is reached, with the handshakes
// under way.
struct WsAccept {
  std::optional<std::chrono::milliseconds> period;
  std::string subprotocol;
};
std::variant<Response, WsAccept> decide_ws(const RequestHead& head, const HandshakePolicy& policy, bool hub_full);

// /socket.io/ (Engine.IO 4): the CORS headers an allowed page gets (on the answers to come, and on most
// refusals), then either an answer (a refusal, or a CORS preflight's 204) or what to do: open a session
// (sid empty) or use the one named, on polling or (upgrade) the WebSocket.
struct SioAccept {
  std::optional<std::chrono::milliseconds> period;
  bool authorized = false;  // the handshake carried a good token (or none is needed)
  std::string sid;
};
struct SioDecision {
  std::vector<std::pair<std::string, std::string>> cors;
  std::variant<Response, SioAccept> outcome;
};
SioDecision decide_socketio(const RequestHead& head, const HandshakePolicy& policy);

// ?period_ms=N (whole milliseconds, at most 9 digits): nullopt in *period when absent; false when malformed.
bool period_from_query(const std::map<std::string, std::string>& query,
                       std::optional<std::chrono::milliseconds>& period);

// Sec-WebSocket-Protocol's comma-separated list, each name trimmed, empty names dropped.
std::vector<std::string> offered_subprotocols(std::string_view header);

// A WebSocket client's token: the Authorization header, or (browsers cannot set headers on a WebSocket)
// a "gpufleet.bearer.<token>" subprotocol.
bool ws_token_ok(std::string_view authorization, const std::vector<std::string>& protocols, std::string_view token);

}  // namespace gf::server
