#include "wire/engineio.hpp"

namespace gf::wire::eio {

Result<Packet> parse_packet(std::string_view text) {
  if (text.empty()) return make_error(ErrorKind::Invalid, "empty Engine.IO packet");
  const char t = text.front();
  if (t == 'b') return make_error(ErrorKind::Unsupported, "binary Engine.IO packets are not supported");
  if (t < '0' || t > '6') return make_error(ErrorKind::Invalid, "unknown Engine.IO packet type");
  return Packet{static_cast<Type>(t), text.substr(1)};
}

Result<std::vector<std::string_view>> split_payload(std::string_view body, std::size_t max_bytes,
                                                    std::size_t max_packets) {
  if (body.size() > max_bytes)
    return make_error(ErrorKind::Invalid, "the payload is larger than " + std::to_string(max_bytes) + " bytes");
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (;;) {
    const auto sep = body.find('\x1e', pos);
    const auto piece = body.substr(pos, sep == std::string_view::npos ? std::string_view::npos : sep - pos);
    if (piece.empty()) return make_error(ErrorKind::Invalid, "empty packet in the payload");
    if (out.size() >= max_packets)
      return make_error(ErrorKind::Invalid, "more than " + std::to_string(max_packets) + " packets in one payload");
    out.push_back(piece);
    if (sep == std::string_view::npos) break;
    pos = sep + 1;
  }
  return out;
}

std::string join_payload(const std::vector<std::string_view>& packets) {
  std::size_t n = 0;
  for (auto p : packets) n += p.size() + 1;
  std::string out;
  out.reserve(n);
  for (std::size_t i = 0; i < packets.size(); ++i) {
    if (i > 0) out += '\x1e';
    out += packets[i];
  }
  return out;
}

std::string encode_open(const OpenInfo& o) {
  nlohmann::json j{
      {"sid", o.sid},
      {"upgrades", o.upgrade_to_websocket ? nlohmann::json::array({"websocket"}) : nlohmann::json::array()},
      {"pingInterval", o.ping_interval_ms},
      {"pingTimeout", o.ping_timeout_ms},
      {"maxPayload", o.max_payload}};
  return "0" + j.dump();
}

}  // namespace gf::wire::eio

namespace gf::wire::sio {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// JSON nesting outside strings; false when deeper than max. Run before the parser so that no input
// makes it (or the document's destructor) recurse deeply.
bool depth_ok(std::string_view s, std::size_t max) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace

std::string Packet::event() const {
  if (type != Type::Event || !data.is_array() || data.empty() || !data[0].is_string()) return {};
  return data[0].get<std::string>();
}

Result<Packet> parse_packet(std::string_view text, const Limits& limits) {
  auto bad = [](std::string m) { return make_error(ErrorKind::Invalid, "Socket.IO packet: " + std::move(m)); };
  if (text.size() > limits.max_bytes) return bad("larger than " + std::to_string(limits.max_bytes) + " bytes");
  if (text.empty()) return bad("empty");
  const char t = text.front();
  if (t == '5' || t == '6')
    return make_error(ErrorKind::Unsupported, "Socket.IO packet: binary events and acks are not supported");
  if (t < '0' || t > '4') return bad("unknown type");
  Packet p;
  p.type = static_cast<Type>(t);
  std::size_t i = 1;
  if (i < text.size() && text[i] == '/') {
    const auto comma = text.find(',', i);
    // A namespace alone ("1/admin") ends the packet; otherwise a comma ends it.
    const auto end = comma == std::string_view::npos ? text.size() : comma;
    if (end - i > limits.max_namespace) return bad("namespace longer than " + std::to_string(limits.max_namespace));
    p.nsp = std::string(text.substr(i, end - i));
    for (char c : p.nsp)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("control character in the namespace");
    i = comma == std::string_view::npos ? text.size() : comma + 1;
  }
  if (i < text.size() && is_digit(text[i])) {
    std::size_t j = i;
    while (j < text.size() && is_digit(text[j])) ++j;
    if (j - i > limits.max_ack_digits)
      return bad("ack id longer than " + std::to_string(limits.max_ack_digits) + " digits");
    std::uint64_t id = 0;
    for (std::size_t k = i; k < j; ++k) id = id * 10 + static_cast<std::uint64_t>(text[k] - '0');
    p.ack_id = id;
    i = j;
  }
  const auto json_text = text.substr(i);
  if (!json_text.empty()) {
    if (!depth_ok(json_text, limits.max_depth))
      return bad("JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
    p.data = nlohmann::json::parse(json_text, nullptr, false);
    if (p.data.is_discarded()) return bad("malformed JSON");
  }
  switch (p.type) {
    case Type::Connect:
      if (!p.data.is_null() && !p.data.is_object()) return bad("CONNECT data must be an object");
      if (p.ack_id) return bad("CONNECT takes no ack id");
      break;
    case Type::Disconnect:
      if (!p.data.is_null() || p.ack_id) return bad("DISCONNECT takes no data");
      break;
    case Type::Event: {
      if (!p.data.is_array() || p.data.empty() || !p.data[0].is_string())
        return bad("EVENT data must be an array starting with the event name");
      const auto& name = p.data[0].get_ref<const std::string&>();
      if (name.empty() || name.size() > limits.max_event_name)
        return bad("event name must be 1 to " + std::to_string(limits.max_event_name) + " characters");
      break;
    }
    case Type::Ack:
      if (!p.ack_id) return bad("ACK needs an ack id");
      if (!p.data.is_array()) return bad("ACK data must be an array");
      break;
    case Type::ConnectError:
      if (!p.data.is_object() && !p.data.is_string()) return bad("CONNECT_ERROR data must be an object or a string");
      break;
    default: break;
  }
  return p;
}

std::string encode_event(std::string_view name, std::string_view args_json) {
  std::string out;
  out.reserve(name.size() + args_json.size() + 8);
  out += "2[";
  out += nlohmann::json(std::string(name)).dump();
  if (!args_json.empty()) {
    out += ',';
    out += args_json;
  }
  out += ']';
  return out;
}

std::string encode_ack(std::uint64_t id, std::string_view args_json) {
  std::string out = "3" + std::to_string(id) + "[";
  out += args_json;
  out += ']';
  return out;
}

std::string encode_connect(std::string_view sid) { return "0" + nlohmann::json{{"sid", std::string(sid)}}.dump(); }

std::string encode_connect_error(std::string_view nsp, std::string_view message) {
  std::string out = "4";
  if (!nsp.empty() && nsp != "/") {
    out += nsp;
    out += ',';
  }
  // dump with replacement: a namespace echoed into the message may hold invalid UTF-8.
  out +=
      nlohmann::json{{"message", std::string(message)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out;
}

}  // namespace gf::wire::sio
