#include "wire/engineio.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gf::wire {
namespace {

using nlohmann::json;

// ---- Engine.IO ---------------------------------------------------------------------------------

TEST(EngineIo, ParsesEveryTextPacketType) {
  const std::pair<const char*, eio::Type> cases[] = {
      {"0{}", eio::Type::Open},     {"1", eio::Type::Close},   {"2probe", eio::Type::Ping}, {"3", eio::Type::Pong},
      {"42[]", eio::Type::Message}, {"5", eio::Type::Upgrade}, {"6", eio::Type::Noop}};
  for (const auto& [text, type] : cases) {
    auto p = eio::parse_packet(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(p->type, type) << text;
    EXPECT_EQ(p->data, std::string_view(text).substr(1)) << text;
  }
}

TEST(EngineIo, RefusesEmptyUnknownAndBinaryPackets) {
  for (const char* text : {"", "7", "x", "/", " 4"}) {
    auto p = eio::parse_packet(text);
    ASSERT_FALSE(p) << text;
    EXPECT_EQ(p.error().kind, ErrorKind::Invalid) << text;
  }
  auto b = eio::parse_packet("bAQID");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().kind, ErrorKind::Unsupported);
}

TEST(EngineIo, SplitsAndJoinsPayloads) {
  auto parts = eio::split_payload(
      "42[\"a\"]\x1e"
      "3\x1e"
      "6",
      1000);
  ASSERT_TRUE(parts);
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0], "42[\"a\"]");
  EXPECT_EQ((*parts)[1], "3");
  EXPECT_EQ((*parts)[2], "6");
  EXPECT_EQ(eio::join_payload(*parts),
            "42[\"a\"]\x1e"
            "3\x1e"
            "6");
  EXPECT_EQ(eio::join_payload({"2"}), "2");
  EXPECT_EQ(eio::join_payload({}), "");
}

TEST(EngineIo, PayloadLimits) {
  EXPECT_FALSE(eio::split_payload("", 100));  // an empty body holds no packet
  EXPECT_FALSE(eio::split_payload("3\x1e", 100));
  EXPECT_FALSE(
      eio::split_payload("\x1e"
                         "3",
                         100));
  EXPECT_FALSE(eio::split_payload(std::string(101, '6'), 100));
  EXPECT_TRUE(eio::split_payload(std::string(100, '6'), 100));
  std::string many = "6";
  for (int i = 0; i < 10; ++i)
    many +=
        "\x1e"
        "6";
  EXPECT_TRUE(eio::split_payload(many, 1000, 11));
  EXPECT_FALSE(eio::split_payload(many, 1000, 10));
}

TEST(EngineIo, OpenPacketHasTheProtocolDefaults) {
  eio::OpenInfo o;
  o.sid = "abc";
  const std::string text = eio::encode_open(o);
  ASSERT_EQ(text.front(), '0');
  const auto j = json::parse(text.substr(1));
  EXPECT_EQ(j.at("sid"), "abc");
  EXPECT_EQ(j.at("upgrades"), json::array({"websocket"}));
  EXPECT_EQ(j.at("pingInterval"), 25000);
  EXPECT_EQ(j.at("pingTimeout"), 20000);
  EXPECT_EQ(j.at("maxPayload"), 1000000);
  o.upgrade_to_websocket = false;
  EXPECT_EQ(json::parse(eio::encode_open(o).substr(1)).at("upgrades"), json::array());
}

// ---- Socket.IO ---------------------------------------------------------------------------------

TEST(SocketIoPacket, ConnectWithAndWithoutAuth) {
  auto p = sio::parse_packet("0");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->type, sio::Type::Connect);
  EXPECT_EQ(p->nsp, "/");
  EXPECT_TRUE(p->data.is_null());
  p = sio::parse_packet(R"(0{"token":"t"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->data.at("token"), "t");
  p = sio::parse_packet(R"(0/admin,{"token":"t"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nsp, "/admin");
  p = sio::parse_packet("0/admin");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nsp, "/admin");
  EXPECT_TRUE(p->data.is_null());
  EXPECT_FALSE(sio::parse_packet("0[1]"));   // CONNECT data is an object
  EXPECT_FALSE(sio::parse_packet("012{}"));  // and takes no ack id
}

TEST(SocketIoPacket, EventsWithAckIds) {
  auto p = sio::parse_packet(R"(2["request_gpu_update"])");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->type, sio::Type::Event);
  EXPECT_EQ(p->event(), "request_gpu_update");
  EXPECT_FALSE(p->ack_id);
  p = sio::parse_packet(R"(217["request_gpu_update",{"x":1}])");
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->ack_id);
  EXPECT_EQ(*p->ack_id, 17u);
  EXPECT_EQ(p->data.at(1).at("x"), 1);
  p = sio::parse_packet(R"(2/admin,3["x"])");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->nsp, "/admin");
  EXPECT_EQ(*p->ack_id, 3u);
  p = sio::parse_packet(R"(35[1,2])");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->type, sio::Type::Ack);
  EXPECT_EQ(*p->ack_id, 5u);
  EXPECT_EQ(sio::parse_packet("1")->type, sio::Type::Disconnect);
  EXPECT_EQ(sio::parse_packet(R"(4{"message":"no"})")->type, sio::Type::ConnectError);
}

TEST(SocketIoPacket, RefusesWhatIsOutOfShapeOrBounds) {
  for (const char* text : {"", "7", "x", "2", "2{}", "2[]", "2[1]", R"(2[""])", "2[\"a\"", "3[]", "3x", "35{}", "1{}",
                           "4", "4[1]", R"(2["a"]junk)"})
    EXPECT_FALSE(sio::parse_packet(text)) << text;
  // Binary packets are not served: a clear "unsupported".
  auto b = sio::parse_packet(R"(51-["x",{"_placeholder":true,"num":0}])");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().kind, ErrorKind::Unsupported);
  EXPECT_EQ(sio::parse_packet("6").error().kind, ErrorKind::Unsupported);

  sio::Limits l;
  l.max_ack_digits = 3;
  EXPECT_TRUE(sio::parse_packet(R"(2999["a"])", l));
  EXPECT_FALSE(sio::parse_packet(R"(21000["a"])", l));
  EXPECT_FALSE(sio::parse_packet(R"(21234567890123456["a"])"));  // 16 digits: beyond the default 15
  l = {};
  l.max_namespace = 4;
  EXPECT_TRUE(sio::parse_packet("0/abc", l));
  EXPECT_FALSE(sio::parse_packet("0/abcd,{}", l));
  EXPECT_FALSE(sio::parse_packet("0/a\x01,{}"));
  l = {};
  l.max_depth = 3;
  EXPECT_TRUE(sio::parse_packet(R"(2["a",[[1]]])", l));
  EXPECT_FALSE(sio::parse_packet(R"(2["a",[[[1]]]])", l));
  EXPECT_TRUE(sio::parse_packet(R"(2["a","[[[[[[["])", l));  // brackets inside a string do not nest
  l = {};
  l.max_bytes = 10;
  EXPECT_FALSE(sio::parse_packet(R"(2["abcdefgh"])", l));
  l = {};
  l.max_event_name = 3;
  EXPECT_TRUE(sio::parse_packet(R"(2["abc"])", l));
  EXPECT_FALSE(sio::parse_packet(R"(2["abcd"])", l));
  // Deep nesting far beyond the limit is refused before parsing.
  EXPECT_FALSE(sio::parse_packet("2[\"a\"," + std::string(100000, '[') + std::string(100000, ']') + "]"));
}

TEST(SocketIoPacket, Encoders) {
  EXPECT_EQ(sio::encode_event("gpu_status", R"({"gpus":[]})"), R"(2["gpu_status",{"gpus":[]}])");
  EXPECT_EQ(sio::encode_event("x", ""), R"(2["x"])");
  EXPECT_EQ(sio::encode_ack(12, "null"), "312[null]");
  EXPECT_EQ(sio::encode_ack(0, ""), "30[]");
  EXPECT_EQ(sio::encode_connect("s1"), R"(0{"sid":"s1"})");
  EXPECT_EQ(sio::encode_connect_error("/", "no"), R"(4{"message":"no"})");
  EXPECT_EQ(sio::encode_connect_error("/admin", "Invalid namespace"), R"(4/admin,{"message":"Invalid namespace"})");
  // What we encode parses back.
  auto p = sio::parse_packet(sio::encode_event("system:metrics_update", "[1,2]"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->event(), "system:metrics_update");
  auto e = sio::parse_packet(sio::encode_connect_error("/x", "bad \xff name"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->nsp, "/x");
}

}  // namespace
}  // namespace gf::wire
