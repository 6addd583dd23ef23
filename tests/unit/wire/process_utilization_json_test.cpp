// A process's engine-busy share (intel backend, from DRM fdinfo) in the GPU's JSON: a number where
// measured, null with its reason where the backend measures it but has no figure yet, and no key
// where the backend never measures it (NVIDIA, amdgpu).
#include <gtest/gtest.h>

#include "wire/json.hpp"

namespace gf::wire {
namespace {

TEST(ProcessUtilizationJson, NumberNullOrLeftOut) {
  core::GpuReading g;
  core::GpuProcess measured;
  measured.pid = 1;
  measured.utilization_pct = 70u;
  core::GpuProcess first_sight;
  first_sight.pid = 2;
  first_sight.utilization_pct = core::Reading<unsigned>::absent(core::Absent::Unavailable);
  core::GpuProcess never;
  never.pid = 3;
  g.processes = {measured, first_sight, never};
  const auto j = gpu_json(g);
  ASSERT_EQ(j["processes"].size(), 3u);
  EXPECT_EQ(j["processes"][0]["utilization"], 70);
  ASSERT_TRUE(j["processes"][1].contains("utilization"));
  EXPECT_TRUE(j["processes"][1]["utilization"].is_null());
  EXPECT_EQ(j["processes"][1]["missing_reasons"]["utilization"], "unavailable");
  EXPECT_FALSE(j["processes"][0].contains("missing_reasons"));
  EXPECT_FALSE(j["processes"][2].contains("utilization"));
  EXPECT_FALSE(j["processes"][2].contains("missing_reasons"));
}

}  // namespace
}  // namespace gf::wire
