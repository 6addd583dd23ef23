// What the Kubernetes client relies on in platform::http_perform(_all), checked against the stand-in
// API server: the bearer header as sent, the body size cap, and parallel requests where one peer hangs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fakes/kube_standin.hpp"
#include "platform/http_client.hpp"

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

}  // namespace
}  // namespace gf::platform
