// What the agent client keeps of the protocol besides the decoders (those are wire/'s, tested in
// tests/unit/wire/agent_codec_test.cpp): error kinds by name.
#include "app/agent_client.hpp"

#include <gtest/gtest.h>

namespace {

TEST(AgentClientParse, ErrorKindsByName) {
  EXPECT_EQ(gf::app::error_kind_from_name("permission"), gf::ErrorKind::Permission);
  EXPECT_EQ(gf::app::error_kind_from_name("unavailable"), gf::ErrorKind::Unavailable);
  EXPECT_EQ(gf::app::error_kind_from_name("not_found"), gf::ErrorKind::NotFound);
  EXPECT_EQ(gf::app::error_kind_from_name("something new"), gf::ErrorKind::Failed);
}

}  // namespace
