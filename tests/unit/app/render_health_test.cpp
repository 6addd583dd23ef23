// `gpufleet status` and unhealthy GPUs (issue 21): the GPU's line says UNHEALTHY with the XID, one line
// below the table gives each problem's sentence, and application faults leave the line alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/render.hpp"

namespace gf::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

core::GpuReading status_gpu(unsigned index) {
  core::GpuReading g;
  g.index = index;
  g.name = "NVIDIA H100 80GB HBM3";
  g.temperature_c = 40;
  g.utilization_pct = 0;
  g.memory_used_mib = 0;
  g.memory_total_mib = 81559;
  g.last_xid = 0u;
  return g;
}

TEST(RenderHealth, AnUnhealthyGpuSaysWhyAndAFaultDoesNot) {
  core::Snapshot s;
  s.backend = "nvml";
  s.gpus = {status_gpu(0), status_gpu(1), status_gpu(2)};
  s.gpus[1].last_xid = 79u;
  s.gpus[1].recent_xids = {{79, {}}};
  s.gpus[2].last_xid = 13u;
  s.gpus[2].recent_xids = {{13, {}}};
  const auto lines = render_status(s, "host", Style{false});
  std::string gpu1, gpu2;
  for (const auto& l : lines) {
    if (l.rfind("[1]", 0) == 0) gpu1 = l;
    if (l.rfind("[2]", 0) == 0) gpu2 = l;
  }
  EXPECT_THAT(gpu1, HasSubstr("UNHEALTHY: XID 79 (GPU has fallen off the bus) |"));
  EXPECT_THAT(gpu2, Not(HasSubstr("UNHEALTHY")));
  EXPECT_THAT(lines,
              ::testing::Contains(
                  "! GPU 1 had XID 79 (GPU has fallen off the bus): it needs a reset or an operator's attention"));
}

}  // namespace
}  // namespace gf::app
