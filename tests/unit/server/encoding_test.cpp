// Content negotiation: Accept-Encoding parsing, and the routes that serve gzip (/metrics, gpu-metrics)
// against their plain answers.
#include <gtest/gtest.h>

#include <sstream>

#include "api_rig.hpp"
#include "server/http.hpp"
#include "wire/gzip.hpp"

namespace gf::server {
namespace {

using namespace api_test;

TEST(AcceptsGzip, Codings) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("GZIP"));
  EXPECT_TRUE(accepts_gzip("x-gzip"));
  EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
  EXPECT_TRUE(accepts_gzip("br;q=1.0, gzip;q=0.8, *;q=0.1"));  // Prometheus' own header
  EXPECT_TRUE(accepts_gzip("deflate ,  gzip ; q=0.5"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("identity, *;q=0.5"));
  EXPECT_FALSE(accepts_gzip(""));  // absent
  EXPECT_FALSE(accepts_gzip("identity"));
  EXPECT_FALSE(accepts_gzip("deflate, br"));
  EXPECT_FALSE(accepts_gzip("gzipx"));
}

TEST(AcceptsGzip, QValues) {
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
  EXPECT_TRUE(accepts_gzip("gzip;q=0.001"));
  EXPECT_TRUE(accepts_gzip("gzip;Q=1"));
  EXPECT_TRUE(accepts_gzip("gzip;q=1.000"));
  EXPECT_FALSE(accepts_gzip("*;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, *"));  // named with q=0: the wildcard does not bring it back
  EXPECT_TRUE(accepts_gzip("*;q=0, gzip"));   // named with a weight: the wildcard's 0 does not count
  EXPECT_TRUE(accepts_gzip("gzip;level=1"));  // other parameters are ignored
}

TEST(AcceptsGzip, GarbageIsPlain) {
  for (const char* bad : {"gzip;q=", "gzip;q=2", "gzip;q=1.5", "gzip;q=0.5x", "gzip;q=.5", "gzip;q=0.1234", "gzip;q=-1",
                          "gzip;q=1.001", ",,,;;;", ";q=1", "gzip, br;q=abc"})
    EXPECT_FALSE(accepts_gzip(bad)) << bad;
  EXPECT_TRUE(accepts_gzip(",, gzip ,,")) << "empty list elements are allowed";
}

// The lines of a /metrics text that are the same in two scrapes (the agent's uptime moves).
std::string steady_lines(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("gpufleet_agent_uptime_seconds", 0) != 0) out += line + "\n";
  return out;
}

TEST_F(ApiTest, MetricsGzipIsThePlainText) {
  const auto plain = get("/metrics");
  ASSERT_EQ(plain.status, 200u) << plain;
  EXPECT_FALSE(plain.gzip);
  EXPECT_TRUE(plain.negotiated);  // Vary: Accept-Encoding on both
  accept_gzip = true;
  const auto gz = get("/metrics");
  ASSERT_EQ(gz.status, 200u);
  EXPECT_TRUE(gz.gzip);
  EXPECT_TRUE(gz.negotiated);
  EXPECT_EQ(gz.content_type, plain.content_type);
  const auto text = wire::gunzip(gz.body);
  ASSERT_FALSE(text.empty()) << "not a readable gzip member";
  EXPECT_LT(gz.body.size(), text.size() / 2);  // the agent series (a third of 3 GPUs' text) go stored
  EXPECT_EQ(steady_lines(text), steady_lines(plain.body));
  EXPECT_NE(text.find("\ngpufleet_agent_uptime_seconds"), std::string::npos);  // the per-scrape tail is there
  // A second scrape of the same reading: the same GPU part, a tail of its own; still one member.
  const auto again = wire::gunzip(get("/metrics").body);
  EXPECT_EQ(steady_lines(again), steady_lines(plain.body));
}

TEST_F(ApiTest, GpuMetricsGzipIsThePlainDocument) {
  const auto plain = get("/api/v1/monitoring/gpu-metrics");
  ASSERT_EQ(plain.status, 200u) << plain;
  EXPECT_FALSE(plain.gzip);
  EXPECT_TRUE(plain.negotiated);
  accept_gzip = true;
  const auto gz = get("/api/v1/monitoring/gpu-metrics");
  ASSERT_EQ(gz.status, 200u);
  EXPECT_TRUE(gz.gzip);
  EXPECT_EQ(wire::gunzip(gz.body), plain.body);
}

TEST(EncodedResponse, FallsBackToPlainWithoutAGzipBody) {
  Request req;
  req.accepts_gzip = true;
  const auto r = encoded_response(req, 200, "text/plain", std::make_shared<const std::string>("x"), nullptr);
  EXPECT_FALSE(r.gzip);
  EXPECT_TRUE(r.negotiated);
  EXPECT_EQ(body_text(r), "x");
}

}  // namespace
}  // namespace gf::server
