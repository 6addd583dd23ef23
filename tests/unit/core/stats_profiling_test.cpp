// A run's profiling (GPM) statistics: what its "utilization" was made of, time-weighted like the rest,
// and why there are none on a GPU without GPM.
#include <gtest/gtest.h>

#include "core/stats.hpp"

namespace gf::core {
namespace {

using namespace std::chrono_literals;

std::size_t prof_index(Field f) {
  for (std::size_t i = 0; i < kProfilingFields.size(); ++i)
    if (kProfilingFields[i] == f) return i;
  return kProfilingFields.size();
}

Snapshot prof_run_snapshot(std::optional<double> tensor, std::optional<double> sm) {
  Snapshot s;
  GpuReading h100;
  h100.index = 0;
  h100.utilization_pct = 100u;
  h100.prof_tensor_active = tensor ? Reading<double>(*tensor) : Reading<double>::absent(Absent::Unavailable);
  h100.prof_sm_active = sm ? Reading<double>(*sm) : Reading<double>::absent(Absent::Unavailable);
  if (!tensor && !sm) h100.profiling_note = "first GPM sample taken";
  GpuReading a100;
  a100.index = 1;
  a100.utilization_pct = 100u;
  a100.prof_tensor_active = Reading<double>::absent(Absent::NotSupported);
  a100.profiling_note = "no GPM on this GPU";
  s.gpus = {h100, a100};
  return s;
}

TEST(RunProfilingStats, TensorShareOfAFullyUtilizedGpuIsReported) {
  RunAggregator agg;
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  agg.add(prof_run_snapshot(std::nullopt, std::nullopt), t0);  // the first collection: no GPM span yet
  agg.add(prof_run_snapshot(0.94, 0.97), t0 + 1s);
  agg.add(prof_run_snapshot(0.94, 0.97), t0 + 2s);
  agg.add(prof_run_snapshot(0.50, 0.60), t0 + 3s);
  const RunReport r = agg.report();
  const auto& h100 = r.gpus.at(0);
  EXPECT_DOUBLE_EQ(h100.utilization->mean, 100.0);
  const auto& tensor = h100.profiling[prof_index(Field::ProfTensorActive)];
  ASSERT_TRUE(tensor.has_value());
  EXPECT_EQ(tensor->samples, 3u);  // absent readings are not zeros
  EXPECT_DOUBLE_EQ(tensor->min, 0.50);
  EXPECT_DOUBLE_EQ(tensor->max, 0.94);
  // Trapezoids: (0.94 + 0.94) / 2 over 1 s, (0.94 + 0.5) / 2 over 1 s.
  EXPECT_NEAR(tensor->mean, (0.94 + 0.72) / 2, 1e-9);
  EXPECT_TRUE(h100.profiling_note.empty());
  EXPECT_FALSE(h100.profiling[prof_index(Field::ProfDramActive)].has_value());  // never reported

  const auto& a100 = r.gpus.at(1);
  for (const auto& m : a100.profiling) EXPECT_FALSE(m.has_value());
  EXPECT_EQ(a100.profiling_note, "no GPM on this GPU");
}

TEST(RunProfilingStats, TheFieldListIsTheTwelveProfilingRowsInTableOrder) {
  std::size_t n = 0;
  for (const auto& f : kFields)
    if (f.json_key.rfind("profiling.", 0) == 0) {
      ASSERT_LT(n, kProfilingFields.size());
      EXPECT_EQ(kProfilingFields[n++], f.id);
    }
  EXPECT_EQ(n, kProfilingFields.size());
}

}  // namespace
}  // namespace gf::core
