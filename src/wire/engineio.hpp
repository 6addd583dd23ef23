#pragma once
// Engine.IO v4 and Socket.IO v5 packets as text: pure, bounded parsers and encoders (no sockets).
// Engine.IO packet: one digit type, then data ("4" + a Socket.IO packet, "2probe", …). A polling
// payload joins packets with the record separator 0x1e. A Socket.IO packet: one digit type, an
// optional "/namespace,", an optional ack id (digits), then JSON.
// Only text packets are understood: a binary packet ('b' + base64 in a payload, Socket.IO types 5
// and 6) is reported as an error so the caller can close the session.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace gf::wire::eio {

enum class Type : char { Open = '0', Close = '1', Ping = '2', Pong = '3', Message = '4', Upgrade = '5', Noop = '6' };

struct Packet {
  Type type = Type::Noop;
  std::string_view data;  // what follows the type digit (a view into the parsed text)
};

// One text packet. Errors: empty, an unknown type, a binary ('b…') packet.
Result<Packet> parse_packet(std::string_view text);

// A polling request body: the packets it joins (views into body). Errors: larger than max_bytes,
// more than max_packets packets, an empty packet.
Result<std::vector<std::string_view>> split_payload(std::string_view body, std::size_t max_bytes,
                                                    std::size_t max_packets = 256);
// The reverse: packets joined by 0x1e.
std::string join_payload(const std::vector<std::string_view>& packets);

struct OpenInfo {
  std::string sid;
  bool upgrade_to_websocket = true;
  std::int64_t ping_interval_ms = 25000;
  std::int64_t ping_timeout_ms = 20000;
  std::int64_t max_payload = 1000000;
};
// `0{"sid":…,"upgrades":["websocket"],"pingInterval":…,"pingTimeout":…,"maxPayload":…}`.
std::string encode_open(const OpenInfo& o);

}  // namespace gf::wire::eio

namespace gf::wire::sio {

enum class Type : char {
  Connect = '0',
  Disconnect = '1',
  Event = '2',
  Ack = '3',
  ConnectError = '4',
  BinaryEvent = '5',
  BinaryAck = '6'
};

struct Limits {
  std::size_t max_bytes = 1000000;
  std::size_t max_namespace = 128;
  std::size_t max_ack_digits = 15;  // below 2^53: an id the JavaScript client can hold exactly
  std::size_t max_depth = 32;       // JSON nesting
  std::size_t max_event_name = 128;
};

struct Packet {
  Type type = Type::Event;
  std::string nsp = "/";
  std::optional<std::uint64_t> ack_id;
  nlohmann::json data;  // null when absent; CONNECT: an object or null; EVENT: the array [name, args…]
  // EVENT: the event's name (data[0]); empty otherwise.
  std::string event() const;
};

// One Socket.IO packet (the data of an Engine.IO message). Errors: unknown type, binary types,
// namespace / ack id / nesting / size beyond limits, JSON that is malformed or has the wrong shape for
// the type (EVENT needs a non-empty array whose first item is a string).
Result<Packet> parse_packet(std::string_view text, const Limits& limits = {});

// Encoders. `args_json` is raw JSON text (trusted: the caller's own encodings), pasted as is.
// "2[\"name\",<args_json>]" (the default namespace).
std::string encode_event(std::string_view name, std::string_view args_json);
// "3<id>[<args_json>]"; an empty args_json gives "3<id>[]".
std::string encode_ack(std::uint64_t id, std::string_view args_json);
// "0{\"sid\":…}".
std::string encode_connect(std::string_view sid);
// "4{\"message\":…}", with "/nsp," before the JSON for another namespace than "/".
std::string encode_connect_error(std::string_view nsp, std::string_view message);

}  // namespace gf::wire::sio
