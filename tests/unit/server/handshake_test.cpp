// The socket-free parts of the /ws and Socket.IO handshakes: their decisions (decide_ws,
// decide_socketio), ?period_ms=, offered subprotocols, and the token a browser offers as a subprotocol.
#include "server/handshake.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gf::server {
namespace {

using std::chrono::milliseconds;

TEST(Handshake, PeriodIsWholeMillisecondsOrAbsent) {
  std::optional<milliseconds> p = milliseconds(7);
  EXPECT_TRUE(period_from_query({}, p));
  EXPECT_FALSE(p.has_value());
  EXPECT_TRUE(period_from_query({{"period_ms", "250"}}, p));
  EXPECT_EQ(p, milliseconds(250));
  EXPECT_TRUE(period_from_query({{"period_ms", "999999999"}}, p));
  EXPECT_EQ(p, milliseconds(999999999));
  for (const char* bad : {"", "-1", "1.5", "1e3", " 5", "1000000000", "0x10", "abc"}) {
    EXPECT_FALSE(period_from_query({{"period_ms", bad}}, p)) << bad;
  }
}

TEST(Handshake, SubprotocolsAreSplitAndTrimmed) {
  EXPECT_EQ(offered_subprotocols(""), std::vector<std::string>{});
  EXPECT_EQ(offered_subprotocols("gpufleet.v1"), std::vector<std::string>{"gpufleet.v1"});
  EXPECT_EQ(offered_subprotocols(" gpufleet.v1 , gpufleet.bearer.abc,,  "),
            (std::vector<std::string>{"gpufleet.v1", "gpufleet.bearer.abc"}));
}

TEST(Handshake, TokenComesFromTheHeaderOrTheBearerSubprotocol) {
  EXPECT_TRUE(ws_token_ok("Bearer s3cret", {}, "s3cret"));
  EXPECT_TRUE(ws_token_ok("", {"gpufleet.v1", "gpufleet.bearer.s3cret"}, "s3cret"));
  EXPECT_FALSE(ws_token_ok("", {"gpufleet.v1"}, "s3cret"));
  EXPECT_FALSE(ws_token_ok("Bearer wrong", {"gpufleet.bearer.wrong"}, "s3cret"));
  EXPECT_FALSE(ws_token_ok("", {"gpufleet.bearer."}, "s3cret"));
  EXPECT_FALSE(ws_token_ok("", {"xgpufleet.bearer.s3cret"}, "s3cret"));
}

// A policy for an agent at 127.0.0.1:8080 whose reads need a token (or not).
struct HandshakeRig {
  std::vector<std::string> origins{"https://dash.example"};
  ReadTokens tokens{"s3cret", "reader"};
  HandshakePolicy policy(bool auth_read = false, bool draining = false) const {
    return {draining, "127.0.0.1", 8080, &origins, auth_read, &tokens};
  }
};

RequestHead ws_head(std::string query_period = {}) {
  RequestHead h;
  h.path = "/ws";
  h.upgrade = true;
  if (!query_period.empty()) h.query["period_ms"] = query_period;
  return h;
}

// The status and error code of a refusal (0 and "" when accepted).
template <class Accept>
std::pair<unsigned, std::string> refusal(const std::variant<Response, Accept>& d) {
  const auto* r = std::get_if<Response>(&d);
  if (!r) return {0, ""};
  const auto j = nlohmann::json::parse(*r->body, nullptr, false);
  return {r->status, j.is_object() ? j.value("error", "") : ""};
}

TEST(Handshake, WsRefusalsComeInOrder) {
  HandshakeRig rig;
  auto h = ws_head();
  h.path = "/other";
  EXPECT_EQ(refusal(decide_ws(h, rig.policy(), false)), std::make_pair(404u, std::string("not_found")));
  EXPECT_EQ(refusal(decide_ws(ws_head(), rig.policy(false, true), false)),
            std::make_pair(503u, std::string("shutting_down")));
  h = ws_head();
  h.origin = "https://evil.example";
  EXPECT_EQ(refusal(decide_ws(h, rig.policy(), false)), std::make_pair(403u, std::string("forbidden_origin")));
  h.origin = "https://dash.example";  // allowed by name
  EXPECT_EQ(refusal(decide_ws(h, rig.policy(), false)).first, 0u);
  EXPECT_EQ(refusal(decide_ws(ws_head(), rig.policy(true), false)), std::make_pair(401u, std::string("unauthorized")));
  EXPECT_EQ(refusal(decide_ws(ws_head(), rig.policy(), true)), std::make_pair(503u, std::string("too_many_clients")));
  EXPECT_EQ(refusal(decide_ws(ws_head("1.5"), rig.policy(), false)), std::make_pair(400u, std::string("bad_request")));
}

TEST(Handshake, WsAcceptsWithPeriodSubprotocolAndEitherToken) {
  HandshakeRig rig;
  auto h = ws_head("250");
  h.subprotocols = "gpufleet.v1, gpufleet.bearer.reader";
  auto d = decide_ws(h, rig.policy(true), false);
  ASSERT_TRUE(std::holds_alternative<WsAccept>(d));
  EXPECT_EQ(std::get<WsAccept>(d).period, std::chrono::milliseconds(250));
  EXPECT_EQ(std::get<WsAccept>(d).subprotocol, "gpufleet.v1");
  h = ws_head();
  h.authorization = "Bearer s3cret";
  d = decide_ws(h, rig.policy(true), false);
  ASSERT_TRUE(std::holds_alternative<WsAccept>(d));
  EXPECT_FALSE(std::get<WsAccept>(d).period);
  EXPECT_EQ(std::get<WsAccept>(d).subprotocol, "");  // none offered: none echoed
  h.authorization = "Bearer wrong";
  EXPECT_EQ(refusal(decide_ws(h, rig.policy(true), false)).first, 401u);
}

RequestHead sio_head(std::string transport = "polling") {
  RequestHead h;
  h.path = "/socket.io/";
  h.query = {{"EIO", "4"}, {"transport", std::move(transport)}};
  return h;
}

TEST(Handshake, SocketIoRefusesForeignPagesWithoutCors) {
  HandshakeRig rig;
  auto h = sio_head();
  h.origin = "https://evil.example";
  auto d = decide_socketio(h, rig.policy());
  EXPECT_TRUE(d.cors.empty());
  EXPECT_EQ(refusal(d.outcome), std::make_pair(403u, std::string("forbidden_origin")));
  d = decide_socketio(sio_head(), rig.policy(false, true));
  EXPECT_EQ(refusal(d.outcome), std::make_pair(503u, std::string("shutting_down")));
}

TEST(Handshake, SocketIoAnswersPreflightAndRefusesBadRequestsWithCors) {
  HandshakeRig rig;
  auto h = sio_head();
  h.origin = "https://dash.example";
  h.method = Method::Options;
  auto d = decide_socketio(h, rig.policy());
  ASSERT_EQ(d.cors.size(), 3u);
  EXPECT_EQ(d.cors[0], std::make_pair(std::string("Access-Control-Allow-Origin"), std::string("https://dash.example")));
  ASSERT_TRUE(std::holds_alternative<Response>(d.outcome));
  const auto& preflight = std::get<Response>(d.outcome);
  EXPECT_EQ(preflight.status, 204u);
  EXPECT_EQ(preflight.headers.size(), 6u);  // CORS and the three Access-Control-Allow/Max-Age
  h.method = Method::Put;
  EXPECT_EQ(refusal(decide_socketio(h, rig.policy()).outcome).first, 405u);
  h.method = Method::Get;
  h.query["EIO"] = "3";
  d = decide_socketio(h, rig.policy());
  EXPECT_EQ(refusal(d.outcome), std::make_pair(400u, std::string("unsupported_protocol")));
  EXPECT_EQ(std::get<Response>(d.outcome).headers.size(), 3u);  // an allowed page may read why
  h = sio_head("websocket");                                    // a polling request that names the WebSocket transport
  EXPECT_EQ(refusal(decide_socketio(h, rig.policy()).outcome).first, 400u);
  h = sio_head();
  h.query["period_ms"] = "soon";
  EXPECT_EQ(refusal(decide_socketio(h, rig.policy()).outcome).first, 400u);
}

TEST(Handshake, SocketIoTokenAtTheHandshakeOrLater) {
  HandshakeRig rig;
  auto h = sio_head();
  h.query["sid"] = "abc";
  h.query["period_ms"] = "500";
  auto d = decide_socketio(h, rig.policy(true));  // none offered: the CONNECT may carry it
  ASSERT_TRUE(std::holds_alternative<SioAccept>(d.outcome));
  EXPECT_FALSE(std::get<SioAccept>(d.outcome).authorized);
  EXPECT_EQ(std::get<SioAccept>(d.outcome).sid, "abc");
  EXPECT_EQ(std::get<SioAccept>(d.outcome).period, std::chrono::milliseconds(500));
  h.query["token"] = "reader";
  d = decide_socketio(h, rig.policy(true));
  ASSERT_TRUE(std::holds_alternative<SioAccept>(d.outcome));
  EXPECT_TRUE(std::get<SioAccept>(d.outcome).authorized);
  h.query["token"] = "wrong";  // offered and wrong: refused at once
  EXPECT_EQ(refusal(decide_socketio(h, rig.policy(true)).outcome).first, 401u);
  h.query.erase("token");
  h.authorization = "Bearer s3cret";
  h.upgrade = true;
  h.query["transport"] = "websocket";
  d = decide_socketio(h, rig.policy(true));
  ASSERT_TRUE(std::holds_alternative<SioAccept>(d.outcome));
  EXPECT_TRUE(std::get<SioAccept>(d.outcome).authorized);
  d = decide_socketio(h, rig.policy(false));  // reads need no token: every session is authorised
  EXPECT_TRUE(std::get<SioAccept>(d.outcome).authorized);
}

TEST(Handshake, ReadTokensAreTheAgentsAndTheReaders) {
  const ReadTokens both{"s3cret", "reader"};
  EXPECT_TRUE(both.token_reads("s3cret"));
  EXPECT_TRUE(both.token_reads("reader"));
  EXPECT_FALSE(both.token_reads("other"));
  EXPECT_FALSE(both.token_reads(""));
  const ReadTokens admin_only{"s3cret", ""};
  EXPECT_FALSE(admin_only.token_reads(""));  // an empty read token reads nothing
  EXPECT_TRUE(admin_only.token_reads("s3cret"));
}

}  // namespace
}  // namespace gf::server
