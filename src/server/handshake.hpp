#pragma once
// The parts of a WebSocket or Socket.IO handshake that need no socket, shared by both upgrades:
// ?period_ms=, the subprotocols a client offers, and where a browser's token may come from.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gf::server {

// ?period_ms=N (whole milliseconds, at most 9 digits): nullopt in *period when absent; false when malformed.
bool period_from_query(const std::map<std::string, std::string>& query,
                       std::optional<std::chrono::milliseconds>& period);

// Sec-WebSocket-Protocol's comma-separated list, each name trimmed, empty names dropped.
std::vector<std::string> offered_subprotocols(std::string_view header);

// A WebSocket client's token: the Authorization header, or (browsers cannot set headers on a WebSocket)
// a "gpufleet.bearer.<token>" subprotocol.
bool ws_token_ok(std::string_view authorization, const std::vector<std::string>& protocols, std::string_view token);

}  // namespace gf::server
