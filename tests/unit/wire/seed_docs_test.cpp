// The seeds' documents in their own shapes (issue 23): the fleet manager's host metrics with memory and
// disk inside "system", and the home monitor's health keys, gpu_monitoring a string.
#include "wire/seed_docs.hpp"

#include <gtest/gtest.h>

namespace gf::wire {
namespace {

using nlohmann::json;

TEST(SeedDocs, HostMetricsKeepMemoryAndDiskInsideSystem) {
  HostMetrics h;
  h.cpu_percent = 12.5;
  h.cpu_count = 8;
  h.memory_total = 1000;
  h.memory_available = 250;
  h.memory_free = 100;
  h.disk_path = "/";
  h.disk_total = 400;
  h.disk_used = 100;
  h.disk_free = 300;
  const auto j = host_metrics_json(h, std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)));
  EXPECT_EQ(j.size(), 2u) << j;  // timestamp and system, nothing beside them
  EXPECT_EQ(j.at("timestamp"), "2023-11-14T22:13:20.000000");
  const auto& sys = j.at("system");
  EXPECT_EQ(sys.at("cpu_percent"), 12.5);
  EXPECT_EQ(sys.at("memory").at("total"), 1000);
  EXPECT_EQ(sys.at("memory").at("available"), 250);
  EXPECT_EQ(sys.at("memory").at("percent"), 75.0);
  EXPECT_EQ(sys.at("disk").at("total"), 400);
  EXPECT_EQ(sys.at("disk").at("used"), 100);
  EXPECT_EQ(sys.at("disk").at("free"), 300);
  EXPECT_EQ(sys.at("disk").at("percent"), 25.0);
  EXPECT_TRUE(sys.at("disk").at("error").is_null());
}

TEST(SeedDocs, UnreadableHostValuesAreNullInTheSameShape) {
  HostMetrics h;
  h.disk_path = "/gone";
  h.disk_error = "statvfs: no such file";
  const auto j = host_metrics_json(h, std::chrono::system_clock::time_point{});
  const auto& sys = j.at("system");
  EXPECT_TRUE(sys.at("cpu_percent").is_null());
  EXPECT_TRUE(sys.at("memory").at("percent").is_null());
  EXPECT_TRUE(sys.at("disk").at("total").is_null());
  EXPECT_EQ(sys.at("disk").at("error"), "statvfs: no such file");
}

TEST(SeedDocs, HealthGpuMonitoringIsTheSeedsStringAndTheDetailHasItsOwnKey) {
  GpuMonitoring g;
  g.available = true;
  g.gpu_count = 2;
  g.backend = "nvml";
  g.age_s = 0.25;
  json health = {{"status", "ok"}, {"version", "1.2.3"}};
  add_seed_health(health, g, true);
  EXPECT_EQ(health.at("gpu_monitoring"), "available");
  EXPECT_EQ(health.at("service"), "gpufleet");
  EXPECT_EQ(health.at("database"), "connected");
  EXPECT_EQ(health.at("status"), "ok");  // left as it was
  EXPECT_EQ(health.at("version"), "1.2.3");
  EXPECT_EQ(health.at("monitoring"), gpu_monitoring_json(g));
  EXPECT_EQ(health.at("monitoring").at("gpu_count"), 2);

  g.available = false;
  g.gpu_count = 0;
  g.last_error = "NVML_ERROR_GPU_IS_LOST";
  add_seed_health(health, g, false);
  EXPECT_EQ(health.at("gpu_monitoring"), "unavailable");
  EXPECT_EQ(health.at("database"), "unavailable");
  EXPECT_EQ(health.at("monitoring").at("available"), false);
  EXPECT_EQ(health.at("monitoring").at("last_error"), "NVML_ERROR_GPU_IS_LOST");
}

}  // namespace
}  // namespace gf::wire
