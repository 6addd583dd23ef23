// What the Kubernetes client relies on in platform::http_perform(_all), checked against the stand-in
// API server: the bearer header as sent, the body size cap, and parallel requests where one peer hangs.
// Also URLs for display (platform/url.hpp): userinfo goes with the request and is shown nowhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fakes/kube_standin.hpp"
#include "platform/http_client.hpp"
#include "platform/url.hpp"

namespace gf::platform {
namespace {

using fakes::KubeStandin;
using fakes::KubeStandinConfig;
using json = nlohmann::json;

TEST(HttpClientForKube, BearerTokenAndContentTypeAreSentAsGiven) {
  KubeStandinConfig cfg;
  cfg.token = "tok-123";
  KubeStandin server(cfg);
  HttpRequest rq;
  rq.method = "POST";
  rq.url = server.url() + "/api/v1/namespaces/a/configmaps";
  rq.bearer_token = "tok-123";
  rq.body = R"({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})";
  auto out = http_perform(rq);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.response().status, 201);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].authorization, "Bearer tok-123");
  EXPECT_EQ(reqs[0].content_type, "application/json");
  EXPECT_EQ(reqs[0].body, *rq.body);

  rq.bearer_token.clear();  // no token: no Authorization header, and the stand-in answers 401
  auto anonymous = http_perform(rq);
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ(anonymous.response().status, 401);
  EXPECT_EQ(server.requests().back().authorization, "");
}

TEST(HttpClientForKube, BodiesBeyondTheCapFailAsTooLarge) {
  KubeStandin server;
  const std::string body = R"({"pad": ")" + std::string(10000, 'y') + "\"}";
  server.set_canned_answer(body);
  HttpRequest rq;
  rq.url = server.url() + "/api/v1/nodes";
  rq.max_body_bytes = 4096;
  auto capped = http_perform(rq);
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.error().kind, TransportFailure::TooLarge);
  rq.max_body_bytes = body.size();  // exactly the size fits
  auto fits = http_perform(rq);
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  EXPECT_EQ(fits.response().body, body);
}

TEST(HttpClientForKube, ParallelRequestsKeepTheirOrderAndAHungPeerCostsOnlyItself) {
  KubeStandin server;
  KubeStandinConfig hang_cfg;
  hang_cfg.never_answer = true;
  KubeStandin hung(hang_cfg);
  // Eight distinct objects, then nine requests at once: the eight reads and one to the silent server.
  std::vector<HttpRequest> creates;
  for (int i = 0; i < 8; ++i) {
    HttpRequest rq;
    rq.method = "POST";
    rq.url = server.url() + "/api/v1/namespaces/p/configmaps";
    rq.body =
        json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "cm-" + std::to_string(i)}}}}.dump();
    creates.push_back(rq);
  }
  for (const auto& out : http_perform_all(creates, 4)) {
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(out.response().status, 201);
  }
  std::vector<HttpRequest> reads;
  for (int i = 0; i < 8; ++i) {
    HttpRequest rq;
    rq.url = server.url() + "/api/v1/namespaces/p/configmaps/cm-" + std::to_string(i);
    rq.timeout = std::chrono::milliseconds(5000);
    reads.push_back(rq);
    if (i == 3) {
      HttpRequest silent;
      silent.url = hung.url() + "/api/v1/nodes";
      silent.timeout = std::chrono::milliseconds(300);
      reads.push_back(silent);
    }
  }
  const auto outs = http_perform_all(reads, 9);
  ASSERT_EQ(outs.size(), 9u);
  int read = 0;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (i == 4) {
      ASSERT_FALSE(outs[i].ok());
      EXPECT_EQ(outs[i].error().kind, TransportFailure::TimedOut);
      continue;
    }
    ASSERT_TRUE(outs[i].ok()) << outs[i].error().message;
    EXPECT_EQ(outs[i].response().status, 200);
    EXPECT_EQ(json::parse(outs[i].response().body)["metadata"]["name"], "cm-" + std::to_string(read++));
  }
  EXPECT_EQ(hung.count("GET", "/api/v1/nodes"), 1u);
}

TEST(UrlForDisplay, UserinfoIsDroppedUserNameIncluded) {
  EXPECT_EQ(url_for_display("http://promuser:PROM-SECRET@127.0.0.1:9090/"), "http://127.0.0.1:9090/");
  EXPECT_EQ(url_for_display("https://u@[::1]:9401"), "https://[::1]:9401");
  EXPECT_EQ(url_for_display("http://u:p%40ss@h/x?y=1#z"), "http://h/x?y=1#z");
  EXPECT_EQ(url_for_display("http://u:p@ss@h:1"), "http://h:1");  // the last '@' ends the userinfo
  EXPECT_EQ(url_for_display("http://127.0.0.1:9401"), "http://127.0.0.1:9401");
  EXPECT_EQ(url_for_display("not a url"), "not a url");
  // A '/', '?' or '#' inside the password: what is userinfo cannot be told, so nothing is shown.
  EXPECT_EQ(url_for_display("http://u:pa/ss@h:1/"), "http://(hidden)");
  EXPECT_EQ(url_for_display("http://u:pa?ss@h:1/"), "http://(hidden)");
  EXPECT_TRUE(url_has_userinfo("http://u:pa/ss@h:1/"));
  EXPECT_TRUE(url_has_userinfo("http://u@h"));
  EXPECT_FALSE(url_has_userinfo("http://h:1/path"));
  EXPECT_TRUE(url_is_plain_http("HTTP://h"));
  EXPECT_FALSE(url_is_plain_http("https://h"));
}

TEST(UrlForDisplay, UrlsInsideTextLoseTheirUserinfo) {
  EXPECT_EQ(redact_urls("agent http://u:AGENTPW2@127.0.0.1:1: cannot connect; see 'https://a:b@h/x' too"),
            "agent http://127.0.0.1:1: cannot connect; see 'https://h/x' too");
  EXPECT_EQ(redact_urls("no URL here"), "no URL here");
  EXPECT_EQ(redact_urls("two: http://a:b@h1 http://c:d@h2/"), "two: http://h1 http://h2/");
}

TEST(HttpClientForKube, UserinfoGoesWithTheRequestOnly) {
  KubeStandin server;
  HttpRequest rq;
  rq.url = "http://promuser:PROM-SECRET@127.0.0.1:" + std::to_string(server.port()) + "/api/v1/nodes";
  auto out = http_perform(rq);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].authorization, "Basic cHJvbXVzZXI6UFJPTS1TRUNSRVQ=");  // base64("promuser:PROM-SECRET")

  // curl's words about a failure never carry them either.
  for (const char* url : {"http://u:AGENTPW2@127.0.0.1:1/", "http://user:AGENTPW2@no-such-host.invalid/",
                          "http://user:AGENTPW2@127.0.0.1:99999/"}) {
    HttpRequest bad;
    bad.url = url;
    bad.connect_timeout = std::chrono::milliseconds(2000);
    auto failed = http_perform(bad);
    ASSERT_FALSE(failed.ok()) << url;
    EXPECT_EQ(failed.error().message.find("AGENTPW2"), std::string::npos) << failed.error().message;
  }
}

}  // namespace
}  // namespace gf::platform
