#include "wire/json.hpp"

#include "core/fields.hpp"

#include <gtest/gtest.h>

#include <clocale>
#include <locale>

namespace gf::wire {
namespace {

core::Snapshot sample() {
  core::Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(std::chrono::microseconds(1741129370123456LL));
  s.backend = "nvml";
  s.driver_version = "550.54.15";
  s.cuda_driver_version = "12.4";
  core::GpuReading g;
  g.index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-05a9ed06-0ddb-1882-ccba-3e5f36943994";
  g.pci_bus_id = "00000000:1B:00.0";
  g.memory_total_mib = 81559;
  g.memory_used_mib = 8192;
  g.memory_free_mib = 73367;
  g.utilization_pct = 75;
  g.memory_utilization_pct = 40;
  g.temperature_c = 65;
  g.power_draw_w = 220.456;
  g.power_limit_w = 700.0;
  g.fan_pct = core::Reading<unsigned>::absent(core::Absent::NotSupported);
  g.clock_graphics_mhz = 1800;
  g.clock_memory_mhz = 2619;
  g.clock_event_reasons = std::uint64_t{0x4};
  g.performance_state = 0u;
  g.availability_score = 0.712345;
  core::GpuProcess p;
  p.pid = 4242;
  p.name = "python3";
  p.user = "alice";
  p.command = "python3 train.py";
  p.used_memory_mib = 8000;
  p.container = "3f4e5d6c7b8a";
  g.processes.push_back(p);
  core::GpuProcess unknown;
  unknown.pid = 99;
  unknown.kind = core::ProcessKind::Graphics;
  g.processes.push_back(unknown);
  s.gpus.push_back(g);
  return s;
}

TEST(Json, SeedShapeOfGpuMetrics) {
  auto j = snapshot_json(sample());
  EXPECT_EQ(j["timestamp"], "2025-03-04T23:02:50.123456Z");
  EXPECT_EQ(j["backend"], "nvml");
  EXPECT_EQ(j["driver_version"], "550.54.15");
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["id"], "gpu-0");
  EXPECT_EQ(g["index"], 0);
  EXPECT_EQ(g["utilization"], 75);
  EXPECT_EQ(g["memory"]["total"], 81559);
  EXPECT_EQ(g["memory"]["used"], 8192);
  EXPECT_EQ(g["memory"]["free"], 73367);
  EXPECT_EQ(g["temperature"], 65);
  EXPECT_DOUBLE_EQ(g["power_usage"].get<double>(), 220.46);
  EXPECT_EQ(g["clock_speeds"]["graphics"], 1800);
  EXPECT_EQ(g["clock_speeds"]["memory"], 2619);
  EXPECT_EQ(g["health"], "ok");
  EXPECT_DOUBLE_EQ(g["availability_score"].get<double>(), 0.7123);
  EXPECT_EQ(g["clock_event_reasons"], nlohmann::json::array({"sw_power_cap"}));
  EXPECT_EQ(g["performance_state"], "P0");
  for (const char* key : {"pci_bus_id", "memory_utilization", "power_limit", "fan_speed", "processes"})
    EXPECT_TRUE(g.contains(key)) << key;
}

TEST(Json, RoundToPlacesAsDocumentsWriteThem) {
  EXPECT_DOUBLE_EQ(round_to(1.23456, 2), 1.23);
  EXPECT_DOUBLE_EQ(round_to(1.2355, 3), 1.236);
  EXPECT_DOUBLE_EQ(round_to(-2.5, 0), -3.0);  // half away from zero, as std::round
  EXPECT_DOUBLE_EQ(round_to(698.1049, 1), 698.1);
  EXPECT_DOUBLE_EQ(round_to(0.1234567891234, 12), 0.123456789);  // more than 9 places: 9
}

TEST(Json, AbsentIsNullNeverZero) {
  auto j = snapshot_json(sample());
  EXPECT_TRUE(j["gpus"][0]["fan_speed"].is_null());
  EXPECT_TRUE(j["gpus"][0]["mig_mode"].is_null());
  EXPECT_TRUE(j["gpus"][0]["processes"][1]["used_memory_mb"].is_null());
  EXPECT_TRUE(j["gpus"][0]["processes"][1]["user"].is_null());
  EXPECT_EQ(j["gpus"][0]["processes"][1]["type"], "graphics");
}

TEST(Json, MissingReasonsNameEveryNullMetricAndNothingElse) {
  auto s = sample();
  s.gpus[0].power_limit_w = core::Reading<double>::absent(core::Absent::NoPermission);
  s.gpus[0].memory_unattributed_mib = core::Reading<std::uint64_t>::absent(core::Absent::Unavailable);
  const auto g = gpu_json(s.gpus[0]);
  ASSERT_TRUE(g["missing_reasons"].is_object());
  const auto& m = g["missing_reasons"];
  EXPECT_EQ(m["fan_speed"], "not_supported");
  EXPECT_EQ(m["power_limit"], "no_permission");
  EXPECT_EQ(m["memory.unattributed"], "unavailable");  // nested keys by their path
  // Never set by sample(): nobody asked.
  EXPECT_EQ(m["mig_mode"], "not_queried");
  EXPECT_EQ(m["energy_consumption_mj"], "not_queried");
  // Exactly the null metrics: every key in the map is null in the document, and each present one is absent.
  std::size_t nulls = 0;
  for (const auto& f : core::kFields) {
    nlohmann::json v = g;
    std::string key(f.json_key);
    for (auto dot = key.find('.'); dot != std::string::npos; dot = key.find('.')) {
      v = v[key.substr(0, dot)];
      key.erase(0, dot + 1);
    }
    v = v[key];
    EXPECT_EQ(v.is_null(), m.contains(std::string(f.json_key))) << f.json_key;
    nulls += v.is_null();
  }
  EXPECT_EQ(m.size(), nulls);
  EXPECT_FALSE(m.contains("utilization"));
  EXPECT_FALSE(m.contains("memory.used"));
}

TEST(Json, MissingReasonsEmptyWhenEverythingIsThere) {
  core::GpuReading g;
  g.utilization_pct = 1u;
  g.memory_utilization_pct = 1u;
  g.memory_total_mib = std::uint64_t{1};
  g.memory_used_mib = std::uint64_t{1};
  g.memory_free_mib = std::uint64_t{0};
  g.memory_unattributed_mib = std::uint64_t{0};
  g.temperature_c = 1;
  g.power_draw_w = 1.0;
  g.power_limit_w = 1.0;
  g.fan_pct = 1u;
  g.clock_graphics_mhz = 1u;
  g.clock_memory_mhz = 1u;
  g.clock_graphics_max_mhz = 1u;
  g.clock_event_reasons = std::uint64_t{0};
  g.performance_state = 0u;
  g.mig_enabled = false;
  g.ecc_uncorrected_volatile = std::uint64_t{0};
  g.persistence_mode = false;
  g.energy_mj = std::uint64_t{0};
  g.availability_score = 0.0;
  for (auto* r : {&g.ecc_corrected_volatile, &g.ecc_corrected_aggregate, &g.ecc_uncorrected_aggregate,
                  &g.retired_pages_sbe, &g.retired_pages_dbe, &g.remapped_rows_correctable,
                  &g.remapped_rows_uncorrectable, &g.pcie_replay_count, &g.power_violation_us, &g.thermal_violation_us})
    *r = std::uint64_t{0};
  g.retired_pages_pending = false;
  g.remapped_rows_pending = false;
  g.remapped_rows_failure = false;
  g.last_xid = 0u;
  for (auto* r : {&g.prof_graphics_active, &g.prof_sm_active, &g.prof_sm_occupancy, &g.prof_tensor_active,
                  &g.prof_dram_active, &g.prof_fp64_active, &g.prof_fp32_active, &g.prof_fp16_active,
                  &g.prof_pcie_tx_bytes, &g.prof_pcie_rx_bytes, &g.prof_nvlink_tx_bytes, &g.prof_nvlink_rx_bytes})
    *r = 0.0;
  const auto j = gpu_json(g);
  EXPECT_EQ(j["missing_reasons"], nlohmann::json::object());
  EXPECT_EQ(j["mig_mode"], "disabled");
  EXPECT_EQ(j["persistence_mode"], false);
  EXPECT_EQ(j["clock_event_reasons"], nlohmann::json::array());
}

TEST(Json, LostGpuSaysGpuLost) {
  core::GpuReading g;
  g.health = core::Health::Lost;
  g.temperature_c = core::Reading<int>::absent(core::Absent::GpuLost);
  const auto j = gpu_json(g);
  EXPECT_TRUE(j["temperature"].is_null());
  EXPECT_EQ(j["missing_reasons"]["temperature"], "gpu_lost");
}

TEST(Json, FieldsDocumentListsTheTable) {
  const auto j = fields_json();
  ASSERT_EQ(j["fields"].size(), core::kFieldCount);
  const auto& used = j["fields"][static_cast<std::size_t>(core::Field::MemoryUsed)];
  EXPECT_EQ(used["key"], "memory.used");
  EXPECT_EQ(used["unit"], "MiB");
  EXPECT_EQ(used["history_metric"], "memory_used");
  EXPECT_EQ(used["prometheus"]["name"], "DCGM_FI_DEV_FB_USED");
  EXPECT_EQ(used["prometheus"]["type"], "gauge");
  const auto& energy = j["fields"][static_cast<std::size_t>(core::Field::Energy)];
  EXPECT_EQ(energy["prometheus"]["type"], "counter");
  EXPECT_TRUE(energy["history_metric"].is_null());
  EXPECT_TRUE(j["fields"][static_cast<std::size_t>(core::Field::MigMode)]["unit"].is_null());
  EXPECT_EQ(j["missing_reasons"]["not_supported"], "not supported");
  EXPECT_EQ(j["missing_reasons"]["gpu_lost"], "GPU lost");
  EXPECT_EQ(j["missing_reasons"].size(), 7u);
  // Every reason core knows is listed, with its words (a new reason needs no edit here).
  ASSERT_EQ(j["missing_reasons"].size(), core::kAbsentReasonCount);
  for (const auto& r : core::kAbsentReasons)
    EXPECT_EQ(j["missing_reasons"].value(std::string(r.code), ""), r.words) << r.code;
}

TEST(Json, ProcessShape) {
  auto p = snapshot_json(sample())["gpus"][0]["processes"][0];
  EXPECT_EQ(p["pid"], 4242);
  EXPECT_EQ(p["name"], "python3");
  EXPECT_EQ(p["user"], "alice");
  EXPECT_EQ(p["command"], "python3 train.py");
  EXPECT_EQ(p["used_memory_mb"], 8000);
  EXPECT_EQ(p["type"], "compute");
  EXPECT_EQ(p["container"], "3f4e5d6c7b8a");
}

TEST(Json, MigInstancesSitUnderTheirGpuAndProcessesNameTheirs) {
  core::Snapshot s = sample();
  auto& g = s.gpus[0];
  core::MigInstance m;
  m.uuid = "MIG-feb88891-0321-5fef-9c87-d4af3b54259e";
  m.profile = "3g.40gb";
  m.name = "NVIDIA H100 80GB HBM3 MIG 3g.40gb";
  m.index = 1;
  m.gpu_instance_id = 2;
  m.compute_instance_id = 0;
  m.memory_total_mib = std::uint64_t{40192};
  m.memory_used_mib = std::uint64_t{8013};
  m.memory_free_mib = core::Reading<std::uint64_t>::absent(core::Absent::Error);
  g.mig_instances = {m};
  g.processes[0].gpu_instance_id = 2u;
  g.processes[0].compute_instance_id = 0u;
  const auto j = snapshot_json(s);
  const auto& gj = j["gpus"][0];
  ASSERT_EQ(gj["mig_instances"].size(), 1u);
  const auto& mj = gj["mig_instances"][0];
  EXPECT_EQ(mj["uuid"], "MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  EXPECT_EQ(mj["profile"], "3g.40gb");
  EXPECT_EQ(mj["index"], 1);
  EXPECT_EQ(mj["gpu_instance_id"], 2);
  EXPECT_EQ(mj["compute_instance_id"], 0);
  EXPECT_EQ(mj["memory"]["total"], 40192);
  EXPECT_EQ(mj["memory"]["used"], 8013);
  EXPECT_TRUE(mj["memory"]["free"].is_null());
  EXPECT_EQ(mj["missing_reasons"]["memory.free"], "error");
  EXPECT_FALSE(mj["missing_reasons"].contains("memory.used"));
  // No profiling read for it (a backend without per-instance GPM): null, and the reason named.
  EXPECT_TRUE(mj["profiling"]["sm_active"].is_null());
  EXPECT_EQ(mj["missing_reasons"]["profiling.sm_active"], "not_queried");
  // The GPU's own memory is not changed by its instances.
  EXPECT_EQ(gj["memory"]["used"], snapshot_json(sample())["gpus"][0]["memory"]["used"]);
  const auto& p = gj["processes"][0];
  EXPECT_EQ(p["gpu_instance_id"], 2);
  EXPECT_EQ(p["compute_instance_id"], 0);
  EXPECT_EQ(p["mig_uuid"], "MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  EXPECT_EQ(p["mig_profile"], "3g.40gb");
  const auto ps = processes_json(s)["processes"];
  ASSERT_FALSE(ps.empty());
  EXPECT_EQ(ps[0]["mig_uuid"], "MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  // MIG off: every MIG key is there, and null.
  const auto off = snapshot_json(sample())["gpus"][0];
  EXPECT_EQ(off["mig_instances"], nlohmann::json::array());
  EXPECT_TRUE(off["processes"][0]["gpu_instance_id"].is_null());
  EXPECT_TRUE(off["processes"][0]["mig_uuid"].is_null());
}

TEST(Json, PsListsBiggestFirstUnknownLast) {
  auto s = sample();
  core::GpuProcess small;
  small.pid = 5;
  small.used_memory_mib = 10;
  s.gpus[0].processes.insert(s.gpus[0].processes.begin(), small);
  auto j = processes_json(s);
  ASSERT_EQ(j["processes"].size(), 3u);
  EXPECT_EQ(j["processes"][0]["pid"], 4242);
  EXPECT_EQ(j["processes"][1]["pid"], 5);
  EXPECT_EQ(j["processes"][2]["pid"], 99);
  EXPECT_EQ(j["processes"][0]["gpu_index"], 0);
}

struct JsonCommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

TEST(Json, NumbersIgnoreTheLocale) {
  // A global locale with a decimal comma (as de_DE has) must not turn 220.46 into 220,46.
  const std::locale saved = std::locale::global(std::locale(std::locale::classic(), new JsonCommaDecimal));
  const std::string text = snapshot_json(sample()).dump();
  std::locale::global(saved);
  EXPECT_NE(text.find("220.46"), std::string::npos);
  EXPECT_EQ(text.find("220,46"), std::string::npos);
  EXPECT_NE(text.find("81559"), std::string::npos);  // no thousands separators either
}

TEST(Json, RunReportSeedShape) {
  core::RunAggregator agg;
  auto s = sample();
  agg.add(s, std::chrono::steady_clock::time_point{});
  s.gpus[0].utilization_pct = 85u;
  agg.add(s, std::chrono::steady_clock::time_point{} + std::chrono::seconds(2));
  auto j = run_report_json(agg.report());
  EXPECT_EQ(j["monitoring_duration_seconds"], 2.0);
  EXPECT_EQ(j["sample_count"], 2);
  const auto& g = j["gpu_stats"]["0"];
  EXPECT_EQ(g["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g["utilization"]["min"], 75.0);
  EXPECT_EQ(g["utilization"]["max"], 85.0);
  EXPECT_EQ(g["utilization"]["mean"], 80.0);
  EXPECT_EQ(g["utilization"]["samples"], 2);
  for (const char* k : {"memory_used_mb", "memory_usage_percent", "temperature_c", "power_draw_w"}) {
    ASSERT_TRUE(g[k].is_object()) << k;
    for (const char* f : {"min", "max", "mean", "p50", "p95"}) EXPECT_TRUE(g[k].contains(f)) << k << "." << f;
  }
  EXPECT_EQ(g["energy_source"], "integrated_power");
  EXPECT_EQ(j["series"]["0"]["utilization"], nlohmann::json::array({75.0, 85.0}));
  EXPECT_FALSE(run_report_json(agg.report(), false).contains("series"));
}

}  // namespace
}  // namespace gf::wire
