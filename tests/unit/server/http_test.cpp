#include "server/http.hpp"

#include <gtest/gtest.h>

namespace gf::server {
namespace {

std::string decoded(std::string_view in, bool form) {
  std::string out = "garbage";
  EXPECT_TRUE(url_decode(in, out, form)) << in;
  return out;
}

bool decodes(std::string_view in) {
  std::string out;
  return url_decode(in, out, false);
}

TEST(UrlDecode, PercentEscapesAnyCase) {
  EXPECT_EQ(decoded("a%20b", false), "a b");
  EXPECT_EQ(decoded("%2e%2E%2f", false), "../");
  EXPECT_EQ(decoded("%41%42%43", false), "ABC");
  EXPECT_EQ(decoded("x%25y", false), "x%y");  // an escaped '%' is not decoded twice
  EXPECT_EQ(decoded("%e2%82%ac", false), "\xe2\x82\xac");
  EXPECT_EQ(decoded("", false), "");
  EXPECT_EQ(decoded("plain/path", false), "plain/path");
}

TEST(UrlDecode, PlusIsASpaceOnlyInForms) {
  EXPECT_EQ(decoded("a+b", true), "a b");
  EXPECT_EQ(decoded("a+b", false), "a+b");
  EXPECT_EQ(decoded("a%2Bb", true), "a+b");  // an escaped plus stays a plus
}

TEST(UrlDecode, MalformedEscapesAreRefused) {
  EXPECT_FALSE(decodes("%"));
  EXPECT_FALSE(decodes("abc%"));
  EXPECT_FALSE(decodes("abc%4"));
  EXPECT_FALSE(decodes("%4g"));
  EXPECT_FALSE(decodes("%g4"));
  EXPECT_FALSE(decodes("%%41"));
  EXPECT_TRUE(decodes("abc%41"));  // an escape that ends the string exactly
}

TEST(UrlDecode, NulEscapeIsDecodedForTheCallerToRefuse) {
  std::string out;
  ASSERT_TRUE(url_decode("a%00b", out, false));
  EXPECT_EQ(out, std::string("a\0b", 3));
}

TEST(ParseQuery, DecodesKeysAndValues) {
  std::map<std::string, std::string> q;
  ASSERT_TRUE(parse_query("gpu=1&metric=memory_used&since=2026-01-01T00%3A00%3A00Z&name=a+b", q));
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(q.at("gpu"), "1");
  EXPECT_EQ(q.at("metric"), "memory_used");
  EXPECT_EQ(q.at("since"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(q.at("name"), "a b");
}

TEST(ParseQuery, FlagsEmptyPairsAndLastOneWins) {
  std::map<std::string, std::string> q;
  ASSERT_TRUE(parse_query("fresh&&a=1&a=2&b=&=x&", q));
  EXPECT_EQ(q.at("fresh"), "");
  EXPECT_EQ(q.at("a"), "2");
  EXPECT_EQ(q.at("b"), "");
  EXPECT_EQ(q.at(""), "x");
  EXPECT_EQ(q.size(), 4u);
}

TEST(ParseQuery, ValueMayContainEquals) {
  std::map<std::string, std::string> q;
  ASSERT_TRUE(parse_query("k=a=b", q));
  EXPECT_EQ(q.at("k"), "a=b");
}

TEST(ParseQuery, MalformedEscapeFailsTheWholeQuery) {
  std::map<std::string, std::string> q;
  EXPECT_FALSE(parse_query("a=1&b=%zz", q));
  std::map<std::string, std::string> q2;
  EXPECT_FALSE(parse_query("%4=1", q2));
  std::map<std::string, std::string> q3;
  EXPECT_TRUE(parse_query("", q3));
  EXPECT_TRUE(q3.empty());
}

TEST(Responses, ErrorResponseIsJsonWithCodeAndMessage) {
  const auto r = error_response(418, "teapot", "short and \"stout\"");
  EXPECT_EQ(r.status, 418u);
  EXPECT_EQ(r.content_type, "application/json");
  ASSERT_TRUE(r.body);
  const auto j = nlohmann::json::parse(*r.body);
  EXPECT_EQ(j.at("error"), "teapot");
  EXPECT_EQ(j.at("message"), "short and \"stout\"");
}

// The one mapping from an error's kind to a status: the statuses the README and OpenAPI document.
TEST(Responses, StatusComesFromTheErrorKind) {
  EXPECT_EQ(http_status(ErrorKind::Invalid), 400u);
  EXPECT_EQ(http_status(ErrorKind::Usage), 400u);
  EXPECT_EQ(http_status(ErrorKind::Permission), 403u);
  EXPECT_EQ(http_status(ErrorKind::NotFound), 404u);
  EXPECT_EQ(http_status(ErrorKind::Unavailable), 409u);
  EXPECT_EQ(http_status(ErrorKind::Unsupported), 415u);
  EXPECT_EQ(http_status(ErrorKind::Failed), 500u);
  EXPECT_EQ(http_status(ErrorKind::NotReady), 503u);

  auto r = error_response(make_error("disk I/O error"), "store_error");
  EXPECT_EQ(r.status, 500u);
  auto j = nlohmann::json::parse(*r.body);
  EXPECT_EQ(j.at("error"), "store_error");
  EXPECT_EQ(j.at("message"), "disk I/O error");

  r = error_response(ErrorKind::Invalid, "gpus must be an integer");  // no code: the kind's own
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(nlohmann::json::parse(*r.body).at("error"), "bad_request");
  r = error_response(make_error(ErrorKind::Unsupported, "the body must be application/json"));
  EXPECT_EQ(r.status, 415u);
  EXPECT_EQ(nlohmann::json::parse(*r.body).at("error"), "unsupported_media_type");
  r = error_response(ErrorKind::NotReady, "no reading yet");
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(nlohmann::json::parse(*r.body).at("error"), "unavailable");
}

TEST(Responses, JsonResponseReplacesInvalidUtf8InsteadOfThrowing) {
  Response r;
  ASSERT_NO_THROW(r = json_response(200, nlohmann::json{{"name", std::string("py\xff\xfethon")}}));
  ASSERT_TRUE(r.body);
  EXPECT_TRUE(nlohmann::json::accept(*r.body));
}

TEST(Methods, Names) {
  EXPECT_EQ(to_string(Method::Get), "GET");
  EXPECT_EQ(to_string(Method::Head), "HEAD");
  EXPECT_EQ(to_string(Method::Delete), "DELETE");
  EXPECT_EQ(to_string(Method::Other), "OTHER");
}

}  // namespace
}  // namespace gf::server
