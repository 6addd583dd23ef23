#include "server/router.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gf::server {
namespace {

Request request(Method m, std::string path, std::string authorization = {}) {
  Request r;
  r.method = m;
  r.target = path;
  r.path = std::move(path);
  r.authorization = std::move(authorization);
  return r;
}

Response text(std::string s) {
  Response r;
  r.content_type = "text/plain";
  r.body = std::make_shared<const std::string>(std::move(s));
  return r;
}

nlohmann::json body_json(const Response& r) {
  EXPECT_TRUE(r.body);
  return r.body ? nlohmann::json::parse(*r.body, nullptr, false) : nlohmann::json();
}

std::string header(const Response& r, std::string_view name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "<none>";
}

struct RouterTest : ::testing::Test {
  Router router;
  void SetUp() override {
    router.add(Method::Get, "/api/v1/gpus/{index}", Access::Read, Exec::BlockingWhenFresh,
               [](const Request& req) { return text("gpu " + req.params.at("index")); });
    // Added after the parameter route on purpose: literals must win whatever the order.
    router.add(Method::Get, "/api/v1/gpus/summary", Access::Read, Exec::Inline,
               [](const Request&) { return text("summary"); });
    router.add(Method::Post, "/api/v1/allocations", Access::Write, Exec::Blocking,
               [](const Request&) { return text("created"); });
    router.add(Method::Delete, "/api/v1/allocations/{id}", Access::Write, Exec::Blocking,
               [](const Request& req) { return text("released " + req.params.at("id")); });
    router.add(Method::Get, "/api/v1/leases", Access::Read, Exec::Blocking,
               [](const Request&) { return text("leases"); });
    router.add(Method::Get, "/a/{x}/b/{y}", Access::Read, Exec::Inline,
               [](const Request& req) { return text(req.params.at("x") + "," + req.params.at("y")); });
    router.add(Method::Get, "/boom", Access::Read, Exec::Inline,
               [](const Request&) -> Response { throw std::runtime_error("kaput"); });
    router.add(Method::Get, "/boom-int", Access::Read, Exec::Inline, [](const Request&) -> Response { throw 42; });
  }
  std::string run(Method m, const std::string& path) {
    auto req = request(m, path);
    const auto d = decide(router, req, "secret", false);
    if (d.answer) return "status " + std::to_string(d.answer->status);
    return *invoke(*d.route, req).body;
  }
};

TEST_F(RouterTest, LiteralBeatsParameterWhateverTheOrder) {
  EXPECT_EQ(run(Method::Get, "/api/v1/gpus/summary"), "summary");
  EXPECT_EQ(run(Method::Get, "/api/v1/gpus/3"), "gpu 3");
}

TEST_F(RouterTest, ParametersAreFilledAndStaleOnesCleared) {
  auto req = request(Method::Get, "/a/one/b/two");
  req.params["stale"] = "x";
  const auto m = router.match(req);
  ASSERT_TRUE(m.route);
  EXPECT_EQ(m.route->pattern, "/a/{x}/b/{y}");
  EXPECT_EQ(req.params.size(), 2u);
  EXPECT_EQ(req.params.at("x"), "one");
  EXPECT_EQ(req.params.at("y"), "two");
  EXPECT_EQ(run(Method::Get, "/a/one/b/two"), "one,two");
}

TEST_F(RouterTest, EmptySegmentNeverFillsAParameter) {
  auto req = request(Method::Get, "/api/v1/gpus/");
  EXPECT_EQ(router.match(req).status, 404u);
  auto req2 = request(Method::Get, "/a//b/y");
  EXPECT_EQ(router.match(req2).status, 404u);
}

TEST_F(RouterTest, UnknownPathIs404) {
  auto req = request(Method::Get, "/api/v1/nothing");
  const auto m = router.match(req);
  EXPECT_FALSE(m.route);
  EXPECT_EQ(m.status, 404u);
  // Different segment counts never match.
  auto req2 = request(Method::Get, "/api/v1/gpus/1/extra");
  EXPECT_EQ(router.match(req2).status, 404u);
  auto req3 = request(Method::Get, "/api/v1/leases/");
  EXPECT_EQ(router.match(req3).status, 404u);

  auto d = decide(router, req, "secret", false);
  ASSERT_TRUE(d.answer);
  EXPECT_EQ(d.answer->status, 404u);
  EXPECT_EQ(body_json(*d.answer).at("error"), "not_found");
}

TEST_F(RouterTest, KnownPathWithOtherMethodIs405WithAllow) {
  auto req = request(Method::Get, "/api/v1/allocations");
  const auto m = router.match(req);
  EXPECT_FALSE(m.route);
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.allow, "POST");

  auto req2 = request(Method::Post, "/api/v1/leases");
  const auto d = decide(router, req2, "secret", false);
  ASSERT_TRUE(d.answer);
  EXPECT_EQ(d.answer->status, 405u);
  EXPECT_EQ(header(*d.answer, "Allow"), "GET, HEAD");
  const auto j = body_json(*d.answer);
  EXPECT_EQ(j.at("error"), "method_not_allowed");
  EXPECT_NE(j.at("message").get<std::string>().find("POST"), std::string::npos);

  auto req3 = request(Method::Get, "/api/v1/allocations/abc");
  const auto m3 = router.match(req3);
  EXPECT_EQ(m3.status, 405u);
  EXPECT_EQ(m3.allow, "DELETE");
}

TEST_F(RouterTest, HeadIsAllowedOnGetRoutes) {
  auto req = request(Method::Head, "/api/v1/leases");
  const auto m = router.match(req);
  ASSERT_TRUE(m.route);
  EXPECT_EQ(m.route->method, Method::Get);
  // But not on a route that has no GET.
  auto req2 = request(Method::Head, "/api/v1/allocations");
  EXPECT_EQ(router.match(req2).status, 405u);
}

TEST_F(RouterTest, WriteRoutesNeedTheExactBearerToken) {
  for (const std::string auth : {"", "Bearer", "Bearer ", "Bearer secre", "Bearer secret2", "Bearer SECRET",
                                 "Basic secret", "Token secret", "Bearer  secret"}) {
    auto req = request(Method::Post, "/api/v1/allocations", auth);
    const auto d = decide(router, req, "secret", false);
    ASSERT_TRUE(d.answer) << "'" << auth << "'";
    EXPECT_FALSE(d.route);
    EXPECT_EQ(d.answer->status, 401u) << "'" << auth << "'";
    EXPECT_EQ(header(*d.answer, "WWW-Authenticate"), "Bearer");
    EXPECT_EQ(body_json(*d.answer).at("error"), "unauthorized");
  }
  auto ok = request(Method::Delete, "/api/v1/allocations/l-1", "Bearer secret");
  const auto d = decide(router, ok, "secret", false);
  ASSERT_FALSE(d.answer);
  ASSERT_TRUE(d.route);
  EXPECT_EQ(*invoke(*d.route, ok).body, "released l-1");
  auto lower = request(Method::Post, "/api/v1/allocations", "bearer secret");
  EXPECT_FALSE(decide(router, lower, "secret", false).answer);
}

TEST_F(RouterTest, EmptyAgentTokenNeverAuthorises) {
  auto req = request(Method::Post, "/api/v1/allocations", "Bearer ");
  const auto d = decide(router, req, "", false);
  ASSERT_TRUE(d.answer);
  EXPECT_EQ(d.answer->status, 401u);
}

TEST_F(RouterTest, ReadRoutesNeedTheTokenOnlyWithAuthRead) {
  auto open = request(Method::Get, "/api/v1/leases");
  EXPECT_FALSE(decide(router, open, "secret", false).answer);
  auto closed = request(Method::Get, "/api/v1/leases");
  const auto d = decide(router, closed, "secret", true);
  ASSERT_TRUE(d.answer);
  EXPECT_EQ(d.answer->status, 401u);
  auto with = request(Method::Get, "/api/v1/leases", "Bearer secret");
  EXPECT_FALSE(decide(router, with, "secret", true).answer);
  // 404 and 405 come before authentication: they say nothing about the token.
  auto missing = request(Method::Get, "/nope");
  EXPECT_EQ(decide(router, missing, "secret", true).answer->status, 404u);
}

// Security review, finding 11: the readers' token reads under auth_read and changes nothing.
TEST_F(RouterTest, TheReadTokenReadsAndNeverWrites) {
  auto read = request(Method::Get, "/api/v1/leases", "Bearer reader");
  EXPECT_FALSE(decide(router, read, "secret", true, "reader").answer);
  auto write = request(Method::Post, "/api/v1/allocations", "Bearer reader");
  const auto d = decide(router, write, "secret", true, "reader");
  ASSERT_TRUE(d.answer);
  EXPECT_EQ(d.answer->status, 401u);
  auto write_open = request(Method::Delete, "/api/v1/allocations/l-1", "Bearer reader");
  EXPECT_EQ(decide(router, write_open, "secret", false, "reader").answer->status, 401u);
  // The admin's token still does both; no read token configured means none is accepted.
  auto admin = request(Method::Post, "/api/v1/allocations", "Bearer secret");
  EXPECT_FALSE(decide(router, admin, "secret", true, "reader").answer);
  auto empty = request(Method::Get, "/api/v1/leases", "Bearer ");
  EXPECT_EQ(decide(router, empty, "secret", true, "").answer->status, 401u);
}

TEST_F(RouterTest, InvokeTurnsAnExceptionInto500Json) {
  auto req = request(Method::Get, "/boom");
  const auto d = decide(router, req, "secret", false);
  ASSERT_TRUE(d.route);
  const auto r = invoke(*d.route, req);
  EXPECT_EQ(r.status, 500u);
  EXPECT_EQ(r.content_type, "application/json");
  const auto j = body_json(r);
  EXPECT_EQ(j.at("error"), "internal_error");
  EXPECT_EQ(j.at("message"), "kaput");

  auto req2 = request(Method::Get, "/boom-int");
  const auto d2 = decide(router, req2, "secret", false);
  ASSERT_TRUE(d2.route);
  EXPECT_EQ(invoke(*d2.route, req2).status, 500u);
}

TEST(WantsFresh, Values) {
  Request r;
  EXPECT_FALSE(wants_fresh(r));
  for (const std::string v : {"1", "true", "yes", ""}) {
    r.query["fresh"] = v;
    EXPECT_TRUE(wants_fresh(r)) << v;
  }
  for (const std::string v : {"0", "false", "no"}) {
    r.query["fresh"] = v;
    EXPECT_FALSE(wants_fresh(r)) << v;
  }
}

TEST(RunsBlocking, ByExecAndFresh) {
  Request r;
  EXPECT_TRUE(runs_blocking(Exec::Blocking, r));
  EXPECT_FALSE(runs_blocking(Exec::Inline, r));
  EXPECT_FALSE(runs_blocking(Exec::BlockingWhenFresh, r));
  r.query["fresh"] = "1";
  EXPECT_TRUE(runs_blocking(Exec::BlockingWhenFresh, r));
  EXPECT_FALSE(runs_blocking(Exec::Inline, r));
}

}  // namespace
}  // namespace gf::server
