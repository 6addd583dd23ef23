// The health verdict in the documents (issue 21): the GPU document's healthy/health_problems/recent_xids,
// /api/health's unhealthy GPUs and collection facts, and gpufleet_gpu_health's unhealthy state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "wire/agent_docs.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::wire {
namespace {

using ::testing::HasSubstr;

const std::chrono::system_clock::time_point kDocWall{std::chrono::seconds(1'764'000'000)};

core::Snapshot health_snapshot() {
  core::Snapshot s;
  s.timestamp = kDocWall;
  s.backend = "nvml";
  for (unsigned i = 0; i < 3; ++i) {
    core::GpuReading g;
    g.index = i;
    g.uuid = "GPU-doc-" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.last_xid = 0u;
    s.gpus.push_back(g);
  }
  s.gpus[1].last_xid = 79u;
  s.gpus[1].recent_xids = {{13, kDocWall}, {79, kDocWall}};
  s.gpus[2].last_xid = 31u;
  s.gpus[2].recent_xids = {{31, kDocWall}};
  return s;
}

TEST(HealthDocs, TheGpuDocumentCarriesTheVerdict) {
  const auto s = health_snapshot();
  const auto ok = gpu_json(s.gpus[0]);
  EXPECT_EQ(ok.at("healthy"), true);
  EXPECT_TRUE(ok.at("health_problems").empty());
  EXPECT_EQ(ok.at("last_xid"), 0);
  EXPECT_EQ(ok.at("health"), "ok");  // the existing key keeps its meaning

  const auto bad = gpu_json(s.gpus[1]);
  EXPECT_EQ(bad.at("healthy"), false);
  ASSERT_EQ(bad.at("health_problems").size(), 1u);
  EXPECT_EQ(bad.at("health_problems")[0].at("code"), "xid_79");
  EXPECT_EQ(bad.at("health_notes")[0].at("code"), "xid_13");
  ASSERT_EQ(bad.at("recent_xids").size(), 2u);
  EXPECT_EQ(bad.at("recent_xids")[1].at("xid"), 79);
  EXPECT_EQ(bad.at("recent_xids")[1].at("time"), iso8601(kDocWall));

  EXPECT_EQ(gpu_json(s.gpus[2]).at("healthy"), true);  // XID 31: an application fault
}

TEST(HealthDocs, ApiHealthNamesUnhealthyGpusAndCollection) {
  const auto s = health_snapshot();
  HealthFacts h;
  h.latest = &s;
  h.last_success = kDocWall;
  h.last_duration_s = 0.0123;
  h.last_failure = "nvml: cannot count GPUs: Unknown Error (NVML error 999)";
  h.last_failure_at = kDocWall - std::chrono::seconds(30);
  const auto j = health_json(h);
  EXPECT_EQ(j.at("status"), "ok");  // an unhealthy GPU does not make the agent degraded
  const auto& unhealthy = j.at("gpus").at("unhealthy");
  ASSERT_EQ(unhealthy.size(), 1u);
  EXPECT_EQ(unhealthy[0].at("index"), 1);
  EXPECT_EQ(unhealthy[0].at("uuid"), "GPU-doc-1");
  EXPECT_EQ(unhealthy[0].at("reason"), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(j.at("gpus").at("count"), 3);
  const auto& c = j.at("backend").at("collection");
  EXPECT_EQ(c.at("last_success"), iso8601(kDocWall));
  EXPECT_DOUBLE_EQ(c.at("last_duration_s").get<double>(), 0.0123);
  EXPECT_THAT(c.at("last_error").get<std::string>(), HasSubstr("cannot count GPUs"));
  EXPECT_EQ(c.at("last_error_at"), iso8601(kDocWall - std::chrono::seconds(30)));
}

TEST(HealthDocs, MetricsGiveTheUnhealthyState) {
  std::string out;
  write_prometheus_gpus(out, health_snapshot(), "host");
  EXPECT_THAT(out, HasSubstr("UUID=\"GPU-doc-1\""));
  std::size_t unhealthy = 0, ok = 0;
  for (std::size_t at = out.find("gpufleet_gpu_health{"); at != std::string::npos;
       at = out.find("gpufleet_gpu_health{", at + 1)) {
    const auto line = out.substr(at, out.find('\n', at) - at);
    if (line.find("state=\"unhealthy\"") != std::string::npos) {
      ++unhealthy;
      EXPECT_THAT(line, HasSubstr("GPU-doc-1"));
    }
    if (line.find("state=\"ok\"") != std::string::npos) ++ok;
  }
  EXPECT_EQ(unhealthy, 1u);
  EXPECT_EQ(ok, 2u);
  EXPECT_THAT(out, HasSubstr("DCGM_FI_DEV_XID_ERRORS{"));
}

}  // namespace
}  // namespace gf::wire
