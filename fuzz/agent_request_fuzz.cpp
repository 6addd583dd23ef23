// libFuzzer target: the agent socket's request parser must answer any line with a request or an
// error, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/agent_protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = gf::wire::parse_agent_request(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.op) (void)gf::wire::error_line(r.id, r.op.error());
  return 0;
}
