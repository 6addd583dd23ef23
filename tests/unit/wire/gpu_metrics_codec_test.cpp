// The agent's gpu-metrics document read back as the fleet reads it (wire::node_metrics_from_gpu_metrics):
// what snapshot_json writes at the field table's keys comes back, and malformed documents are errors.
#include <gtest/gtest.h>

#include "wire/fleet_json.hpp"
#include "wire/json.hpp"

namespace gf::wire {
namespace {

core::Snapshot two_gpus() {
  core::Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(std::chrono::microseconds(1741129370123456LL));
  s.backend = "nvml";
  core::GpuReading a;
  a.index = 0;
  a.uuid = "GPU-a";
  a.name = "NVIDIA H100 80GB HBM3";
  a.utilization_pct = 75u;
  a.memory_used_mib = std::uint64_t{1024};
  a.memory_total_mib = std::uint64_t{81559};
  a.temperature_c = 61;
  a.power_draw_w = 312.5;
  core::GpuReading b;  // nothing read: every metric absent
  b.index = 1;
  b.uuid = "GPU-b";
  s.gpus = {a, b};
  return s;
}

TEST(GpuMetricsCodec, WhatTheAgentWritesComesBack) {
  const auto doc = node_metrics_from_gpu_metrics(snapshot_json(two_gpus()).dump());
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_EQ(doc->backend, "nvml");
  EXPECT_EQ(doc->metrics.observed, two_gpus().timestamp);
  ASSERT_EQ(doc->metrics.gpus.size(), 2u);
  const auto& a = doc->metrics.gpus[0];
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.uuid, "GPU-a");
  EXPECT_EQ(a.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a.utilization_pct, 75.0);
  EXPECT_EQ(a.memory_used_mib, 1024.0);
  EXPECT_EQ(a.memory_total_mib, 81559.0);
  EXPECT_EQ(a.temperature_c, 61.0);
  EXPECT_EQ(a.power_w, 312.5);
  const auto& b = doc->metrics.gpus[1];
  EXPECT_EQ(b.index, 1u);
  EXPECT_FALSE(b.utilization_pct);
  EXPECT_FALSE(b.memory_used_mib);
  EXPECT_FALSE(b.memory_total_mib);
  EXPECT_FALSE(b.temperature_c);
  EXPECT_FALSE(b.power_w);
}

TEST(GpuMetricsCodec, MalformedDocumentsAreErrors) {
  auto error_of = [](std::string_view body) {
    auto d = node_metrics_from_gpu_metrics(body);
    return d ? std::string("parsed") : d.error().message;
  };
  EXPECT_EQ(error_of("[]"), "the gpu-metrics answer is not a JSON object");
  EXPECT_EQ(error_of(R"({"gpus": {}})"), "the gpu-metrics answer has no \"gpus\" array");
  EXPECT_EQ(error_of(R"({"gpus": [7]})"), "a GPU entry is not an object");
  EXPECT_EQ(error_of(R"({"gpus": [{"index": -1}]})"), "a GPU entry has no valid \"index\"");
  EXPECT_EQ(error_of(R"({"timestamp": "2026-02-30T00:00:00Z", "gpus": []})"),
            "\"timestamp\": '2026-02-30T00:00:00Z' is not an ISO 8601 UTC time");
  // A metric of the wrong type is no metric, not an error.
  auto odd = node_metrics_from_gpu_metrics(R"({"gpus": [{"index": 2, "memory": 5, "utilization": "x"}]})");
  ASSERT_TRUE(odd);
  EXPECT_FALSE(odd->metrics.gpus[0].memory_used_mib);
  EXPECT_FALSE(odd->metrics.gpus[0].utilization_pct);
}

TEST(Iso8601, TheOneStrictParser) {
  using std::chrono::system_clock;
  const auto t = system_clock::time_point(std::chrono::microseconds(1741129370123456LL));
  EXPECT_EQ(parse_iso8601(iso8601(t)).value_or(system_clock::time_point{}), t);  // round trip
  EXPECT_TRUE(parse_iso8601("2025-03-04T23:02:50Z"));
  EXPECT_TRUE(parse_iso8601("2025-03-04T23:02:50.1+00:00"));
  EXPECT_TRUE(parse_iso8601("2025-03-04T23:02:50.123456789Z"));
  for (const char* bad :
       {"", "2025-03-04", "2025-03-04T23:02:50", "2025-03-04 23:02:50Z", "2025-03-04T23:02:50.Z",
        "2025-03-04T23:02:50.1234567890Z", "2025-03-04T24:00:00Z", "2025-02-29T00:00:00Z", "1969-12-31T23:59:59Z",
        "2200-01-01T00:00:00Z", "2025-03-04T23:02:50+01:00", "2025-03-04T23:02:50Zjunk", "+025-03-04T23:02:50Z"})
    EXPECT_FALSE(parse_iso8601(bad)) << bad;
  EXPECT_EQ(parse_iso8601("yesterday").error().message, "'yesterday' is not an ISO 8601 UTC time");
}

}  // namespace
}  // namespace gf::wire
