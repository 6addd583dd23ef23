// libFuzzer target: a client's WebSocket frames (wire/ws_frame) must read to events or one error within
// the limits, never crash, loop or hold more than the limit; the first byte picks the limit and whether
// permessage-deflate was negotiated. The negotiation parses the same bytes as an extensions header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "wire/ws_frame.hpp"

namespace ws = gf::wire::ws;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  (void)ws::negotiate_deflate(all.substr(1));
  const std::size_t limit = 16u << (data[0] & 0x0f);  // 16 B .. 512 KiB
  const bool deflate = (data[0] & 0x10) != 0;
  ws::FrameReader reader(limit, deflate);
  // A second reader over the same bytes, consuming by offset (as a connection does): the same events.
  ws::FrameReader by_offset(limit, deflate);
  const std::string_view bytes = all.substr(1);
  std::size_t pos = 0;
  std::string in(bytes);
  for (int i = 0; i < 100000; ++i) {
    const std::size_t before = in.size();
    auto e = reader.next(in);
    const auto o = by_offset.next(bytes, pos);
    if (o.kind != e.kind || o.payload != e.payload || o.close_code != e.close_code || pos != bytes.size() - in.size())
      std::abort();
    if (e.kind == ws::FrameReader::Kind::NeedMore || e.kind == ws::FrameReader::Kind::Error) break;
    if (in.size() >= before) std::abort();  // every event consumes bytes
    if (e.kind == ws::FrameReader::Kind::Message) {
      if (e.payload.size() > limit) std::abort();
      if (!e.binary && !ws::valid_utf8(e.payload)) std::abort();
    } else if (e.payload.size() > 125) {
      std::abort();
    }
  }
  return 0;
}
