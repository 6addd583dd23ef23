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

namespace gf::platform {
namespace {

// Issue 12: names and command lines from processes and other users reach the terminal; every control
// character is shown escaped (C0, DEL, and the C1 range as UTF-8), other text is kept as it is.
TEST(Printable, ControlCharactersAreEscapedAndTheRestKept) {
  EXPECT_EQ(printable("x\x1b]0;pwned\x07y"), "x\\x1b]0;pwned\\x07y");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(printable("csi\xc2\x9b"
                      "31m"),
            "csi\\u009b31m");                                // U+009B, the one-byte CSI
  EXPECT_EQ(printable("nbsp\xc2\xa0ok"), "nbsp\xc2\xa0ok");  // U+00A0 is not a control
  EXPECT_EQ(printable("température 日本"), "température 日本");
  EXPECT_EQ(printable("a\\b"), "a\\b");  // backslashes stay single on a terminal
  EXPECT_EQ(escape_control("\xc2\x85"), "\\u0085");
}

TEST(Printable, BoundedTextIsCutAndMarked) {
  EXPECT_EQ(printable("abc", 10), "abc");
  EXPECT_EQ(printable("abcdef", 3), "abc…");
  EXPECT_EQ(printable(std::string_view("a\x1b[2Jb", 6), 4), "a\\x1b[2…");
}

}  // namespace
}  // namespace gf::platform
