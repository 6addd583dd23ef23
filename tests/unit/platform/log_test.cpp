#include "platform/log.hpp"

#include <gtest/gtest.h>

namespace gf::platform {
namespace {

TEST(Log, ControlCharactersAreWrittenAsHexEscapes) {
  EXPECT_EQ(escape_control("plain text: 42 %"), "plain text: 42 %");
  EXPECT_EQ(escape_control("a\nb"), "a\\x0ab");
  EXPECT_EQ(escape_control("\x1b[2Jcleared"), "\\x1b[2Jcleared");
  EXPECT_EQ(escape_control(std::string_view("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(escape_control("del\x7f"), "del\\x7f");
  // A backslash is doubled, so an escape in the output cannot be forged by the input.
  EXPECT_EQ(escape_control("\\x1b"), "\\\\x1b");
  EXPECT_EQ(escape_control("température"), "température");  // UTF-8 passes through
}

}  // namespace
}  // namespace gf::platform
