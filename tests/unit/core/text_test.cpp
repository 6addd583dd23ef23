#include "core/text.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gf::core {
namespace {

TEST(CoreText, TrimRemovesOuterWhitespaceOnly) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim(" \t "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(CoreText, LowerAndIequalsTouchAsciiLettersOnly) {
  EXPECT_EQ(lower("Content-Type: ÄB"),
            "content-type: \xC3\x84"
            "b");
  EXPECT_TRUE(iequals("Upgrade", "uPGRADE"));
  EXPECT_FALSE(iequals("Upgrade", "Upgrades"));
  EXPECT_FALSE(iequals("a", "b"));
}

TEST(CoreText, ParseUintTakesDigitsWithinBounds) {
  EXPECT_EQ(*parse_uint("0"), 0U);
  EXPECT_EQ(*parse_uint("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(*parse_uint("42", 1, 42), 42U);
  for (const char* bad : {"", " 1", "1 ", "+1", "-1", "0x10", "1.5", "18446744073709551616", "abc"})
    EXPECT_FALSE(parse_uint(bad)) << bad;
  auto out = parse_uint("43", 1, 42);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().kind, ErrorKind::Invalid);
  EXPECT_NE(out.error().message.find("from 1 to 42"), std::string::npos);
}

TEST(CoreText, ParseDurationHasOneGrammar) {
  using std::chrono::seconds;
  EXPECT_EQ(*parse_duration("90s"), seconds(90));
  EXPECT_EQ(*parse_duration("15m"), seconds(900));
  EXPECT_EQ(*parse_duration("2h"), seconds(7200));
  EXPECT_EQ(*parse_duration("7d"), seconds(7 * 86400));
  EXPECT_FALSE(parse_duration("90"));  // bare numbers only where the caller allows them
  EXPECT_EQ(*parse_duration("90", BareNumber::Seconds), seconds(90));
  for (const char* bad : {"", "s", "0s", "0", "-5m", "5x", "5 m", "1.5h", "m5"})
    EXPECT_FALSE(parse_duration(bad, BareNumber::Seconds)) << bad;
  EXPECT_FALSE(parse_duration("2h", BareNumber::Refused, seconds(3600)));
  EXPECT_EQ(*parse_duration("1h", BareNumber::Refused, seconds(3600)), seconds(3600));
  EXPECT_FALSE(parse_duration("99999999999999999d"));  // no overflow
}

TEST(CoreText, CurrentExceptionMessageNamesWhatWasThrown) {
  try {
    throw std::runtime_error("disk on fire");
  } catch (...) {
    EXPECT_EQ(current_exception_message(), "disk on fire");
  }
  try {
    throw 7;
  } catch (...) {
    EXPECT_EQ(current_exception_message(), "an exception that is not a std::exception");
  }
}

}  // namespace
}  // namespace gf::core
