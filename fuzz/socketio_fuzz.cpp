// libFuzzer target: Engine.IO payloads and packets and the Socket.IO packets inside them must parse
// to a packet or an error within the limits, never crash, throw or recurse deeply; what parses
// encodes back to something that parses the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wire/engineio.hpp"

namespace eio = gf::wire::eio;
namespace sio = gf::wire::sio;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto packets = eio::split_payload(body, 1000000, 256);
  if (!packets) return 0;
  if (eio::join_payload(*packets) != body) std::abort();
  sio::Limits limits;
  for (auto text : *packets) {
    auto p = eio::parse_packet(text);
    if (!p || p->type != eio::Type::Message) continue;
    auto s = sio::parse_packet(p->data, limits);
    if (!s) continue;
    if (s->nsp.size() > limits.max_namespace) std::abort();
    if (s->type == sio::Type::Event) {
      const std::string name = s->event();
      if (name.empty() || name.size() > limits.max_event_name) std::abort();
      // Re-encoded (the default namespace, no ack id), the event parses to the same name and args.
      nlohmann::json args = s->data;
      args.erase(args.begin());
      std::string rest = args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      rest = rest.substr(1, rest.size() - 2);  // the array's items, without its brackets
      sio::Limits roomy = limits;
      roomy.max_bytes = static_cast<std::size_t>(-1);  // numbers may print longer than they were written
      auto again = sio::parse_packet(sio::encode_event(name, rest), roomy);
      if (!again || again->event() != name || again->data.size() != s->data.size()) std::abort();
    }
    if (s->type == sio::Type::ConnectError || s->type == sio::Type::Connect)
      if (!sio::parse_packet(sio::encode_connect_error(s->nsp, "x"), limits)) std::abort();
  }
  return 0;
}
