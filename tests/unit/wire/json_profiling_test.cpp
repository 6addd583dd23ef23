// Profiling (GPM) in the JSON documents: the GPU document's readings and note, and a job's statistics.
#include <gtest/gtest.h>

#include "core/stats.hpp"
#include "wire/json.hpp"

namespace gf::wire {
namespace {

TEST(JsonProfiling, GpuDocumentHasRatiosOrNullsAndSaysWhy) {
  core::GpuReading h100;
  h100.prof_tensor_active = 0.93694;
  h100.prof_pcie_tx_bytes = 6.044 * 1048576;
  auto j = gpu_json(h100);
  EXPECT_DOUBLE_EQ(j["profiling"]["tensor_active"].get<double>(), 0.9369);  // 4 decimals, ratio
  EXPECT_EQ(j["profiling"]["pcie_tx_bytes"].get<double>(), 6.044 * 1048576);
  EXPECT_TRUE(j["profiling_note"].is_null());

  core::GpuReading a100;
  core::mark_all_absent(a100, core::Absent::NotSupported);
  a100.profiling_note = "no GPM on this GPU: NVML's profiling metrics need a Hopper or later GPU";
  auto k = gpu_json(a100);
  EXPECT_TRUE(k["profiling"]["sm_active"].is_null());
  EXPECT_EQ(k["missing_reasons"]["profiling.sm_active"], "not_supported");
  EXPECT_EQ(k["profiling_note"], a100.profiling_note);
}

TEST(JsonProfiling, JobStatisticsSayHowMuchOfTheUtilizationWasTensorWork) {
  core::RunAggregator agg;
  core::Snapshot s;
  core::GpuReading g;
  g.utilization_pct = 100u;
  g.prof_tensor_active = 0.94;
  g.prof_sm_occupancy = 0.14;
  s.gpus = {g};
  const auto t0 = std::chrono::steady_clock::time_point{};
  agg.add(s, t0);
  agg.add(s, t0 + std::chrono::seconds(1));
  auto j = run_report_json(agg.report(), false);
  const auto& p = j["gpu_stats"]["0"]["profiling"];
  EXPECT_DOUBLE_EQ(p["tensor_active"]["mean"].get<double>(), 0.94);
  EXPECT_EQ(p["tensor_active"]["samples"], 2);
  EXPECT_DOUBLE_EQ(p["sm_occupancy"]["p95"].get<double>(), 0.14);
  EXPECT_FALSE(p.contains("fp16_active"));  // no sample had it
  EXPECT_FALSE(p.contains("note"));
  EXPECT_EQ(j["gpu_stats"]["0"]["utilization"]["mean"], 100.0);
}

}  // namespace
}  // namespace gf::wire
