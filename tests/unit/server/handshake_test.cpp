// The socket-free parts of the /ws and Socket.IO handshakes: ?period_ms=, offered subprotocols, and the
// token a browser offers as a subprotocol.
#include "server/handshake.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gf::server
