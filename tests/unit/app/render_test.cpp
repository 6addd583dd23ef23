// The terminal status view (app/render.hpp), byte for byte: the columns, their widths and colours, the
// n/a cells and the legend that explains them, lost GPUs on their own line.
#include "app/render.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gf::app {
namespace {

core::GpuReading gpu(unsigned index, std::string name) {
  core::GpuReading g;
  g.index = index;
  g.name = std::move(name);
  g.temperature_c = 45;
  g.utilization_pct = 50;
  g.memory_used_mib = 1000;
  g.memory_total_mib = 81559;
  g.power_draw_w = 100.4;
  g.power_limit_w = 300.0;
  g.fan_pct = 30;
  return g;
}

core::Snapshot snapshot() {
  core::Snapshot s;
  s.backend = "test";
  auto g0 = gpu(0, "Test GPU");
  core::GpuProcess p;
  p.pid = 4242;
  p.name = "python3";
  p.user = "alice";
  p.used_memory_mib = 12000;
  g0.processes = {p};
  auto g1 = gpu(1, "Another GPU, long");
  g1.temperature_c = 85;    // hot
  g1.utilization_pct = 51;  // busy: above the ceiling
  g1.power_draw_w = 250.6;
  g1.power_limit_w = core::Reading<double>::absent(core::Absent::NoPermission);
  g1.fan_pct = core::Reading<unsigned>::absent(core::Absent::NotSupported);
  auto g2 = gpu(2, "Test GPU");
  g2.health = core::Health::Lost;
  g2.health_message = "GPU is lost";
  g2.temperature_c = core::Reading<int>::absent(core::Absent::GpuLost);
  auto g3 = gpu(3, "");
  g3.temperature_c = core::Reading<int>::absent(core::Absent::Error);
  g3.utilization_pct = core::Reading<unsigned>::absent(core::Absent::NotSupported);
  g3.memory_used_mib = core::Reading<std::uint64_t>::absent(core::Absent::Unavailable);
  g3.fan_pct = core::Reading<unsigned>::absent(core::Absent::NotSupported);
  s.gpus = {g0, g1, g2, g3};
  return s;
}

// The lines after the header (its first line carries the local time).
std::vector<std::string> body(const std::vector<std::string>& lines) { return {lines.begin() + 1, lines.end()}; }

TEST(RenderStatus, ColumnsWidthsAndTheLegend) {
  const auto lines = render_status(snapshot(), "host", Style{false});
  ASSERT_GE(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("host  ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("  backend test"), std::string::npos) << lines[0];
  const std::vector<std::string> want = {
      "[0] Test GPU          | 45°C,  50 % |   1000 /  81559 MiB |  100 /  300 W | fan  30 % | "
      "alice:python3/4242(11.7G)",
      "[1] Another GPU, long | 85°C,  51 % |   1000 /  81559 MiB |  251 /  n/a W |",
      "[2] Test GPU          | LOST: GPU is lost",
      "[3] (unknown)         |   n/a,   n/a |    n/a /  81559 MiB |  100 /  300 W |",
      "n/a: temperature error on GPU 3; utilization not supported on GPU 3; memory used unavailable on GPU 3; "
      "power limit no permission on GPU 1; fan not supported on GPU 1,3",
  };
  EXPECT_EQ(body(lines), want);
}

TEST(RenderStatus, ColoursMarkHotAndBusyGpus) {
  const auto lines = render_status(snapshot(), "host", Style{true});
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[1],
            "\x1b[36m[0]\x1b[0m \x1b[34mTest GPU         \x1b[0m | \x1b[31m45°C\x1b[0m, \x1b[32m 50 %\x1b[0m | "
            "\x1b[33m  1000\x1b[0m /  81559 MiB | \x1b[35m 100\x1b[0m /  300 W | fan  30 % | "
            "\x1b[90malice:python3/4242(11.7G)\x1b[0m");
  EXPECT_EQ(lines[2],
            "\x1b[36m[1]\x1b[0m \x1b[34mAnother GPU, long\x1b[0m | \x1b[1;31m85°C\x1b[0m, \x1b[1;32m 51 %\x1b[0m | "
            "\x1b[33m  1000\x1b[0m /  81559 MiB | \x1b[35m 251\x1b[0m /  n/a W |");
}

TEST(RenderStatus, NoGpusAndNothingMissing) {
  core::Snapshot s;
  s.backend = "none";
  auto lines = render_status(s, "h", Style{false});
  EXPECT_EQ(body(lines), std::vector<std::string>{"No GPU found."});
  s.gpus = {gpu(0, "Test GPU")};
  EXPECT_EQ(missing_legend(s), "");
}

TEST(RenderMig, InstancesUnderTheirGpuAndProcessesInTheirs) {
  core::Snapshot s = snapshot();
  auto& g = s.gpus[0];
  core::MigInstance m;
  m.uuid = "MIG-feb88891-0321-5fef-9c87-d4af3b54259e";
  m.profile = "3g.40gb";
  m.gpu_instance_id = 2;
  m.memory_total_mib = std::uint64_t{40192};
  m.memory_used_mib = std::uint64_t{12013};
  g.mig_instances = {m};
  g.processes[0].gpu_instance_id = 2u;
  g.processes[0].compute_instance_id = 0u;
  const auto lines = body(render_status(s, "host", Style{false}));
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1],
            "    MIG 3g.40gb    |  12013 /  40192 MiB | GI 2 CI 0 | MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  // With its GPU instance's profiling (GPM), the SM and tensor activity before the UUID.
  g.mig_instances[0].prof_sm_active = 0.75;
  g.mig_instances[0].prof_tensor_active = 0.6;
  EXPECT_EQ(body(render_status(s, "host", Style{false}))[1],
            "    MIG 3g.40gb    |  12013 /  40192 MiB | GI 2 CI 0 | SM active 75 % | tensor 60 % | "
            "MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  const auto ps = render_processes(s, Style{false});
  ASSERT_GE(ps.size(), 2u);
  EXPECT_EQ(ps[0].substr(0, 14), "      GPU     ");
  EXPECT_EQ(ps[1].substr(0, 19), "0 3g.40gb      4242");
  // An instance id with no listed instance still says which one.
  s.gpus[0].mig_instances.clear();
  EXPECT_EQ(render_processes(s, Style{false})[1].substr(0, 16), "0 GI 2      4242");
}

}  // namespace
}  // namespace gf::app
