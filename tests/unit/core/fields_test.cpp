#include "core/fields.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gf::core {
namespace {

TEST(Fields, EveryRowIsCompleteAndNamesAreUnique) {
  std::set<std::string_view> json_keys, prom_names, columns, metrics;
  for (const auto& f : kFields) {
    SCOPED_TRACE(std::string(f.json_key));
    EXPECT_FALSE(f.json_key.empty());
    EXPECT_FALSE(f.label.empty());
    EXPECT_FALSE(f.description.empty());
    EXPECT_FALSE(f.prometheus_name.empty());
    EXPECT_FALSE(f.prometheus_help.empty());
    EXPECT_NE(f.read, nullptr);
    EXPECT_TRUE(json_keys.insert(f.json_key).second);
    EXPECT_TRUE(prom_names.insert(f.prometheus_name).second);
    const bool dcgm =
        f.prometheus_name.rfind("DCGM_FI_DEV_", 0) == 0 || f.prometheus_name.rfind("DCGM_FI_PROF_", 0) == 0;
    const bool ours = f.prometheus_name.rfind("gpufleet_gpu_", 0) == 0;
    EXPECT_TRUE(dcgm || ours);
    if (!f.history_column.empty()) {
      EXPECT_TRUE(columns.insert(f.history_column).second);
    }
    if (!f.history_metric.empty()) {
      EXPECT_TRUE(metrics.insert(f.history_metric).second);
      EXPECT_FALSE(f.history_column.empty()) << "a queryable metric must be stored";
    }
  }
  EXPECT_EQ(json_keys.size(), kFieldCount);
}

TEST(Fields, HistoryNamesAreTheStoredOnes) {
  // Stored data and URLs depend on these: the table must never rename them.
  EXPECT_EQ(history_metric_list(),
            "utilization, memory_utilization, memory_used, temperature, power, fan, sm_clock, mem_clock, "
            "graphics_active, sm_active, sm_occupancy, tensor_active, dram_active, fp64_active, fp32_active, "
            "fp16_active, pcie_tx_bytes, pcie_rx_bytes, nvlink_tx_bytes, nvlink_rx_bytes");
  EXPECT_EQ(info(Field::ProfTensorActive).history_column, "prof_tensor");
  EXPECT_EQ(info(Field::ProfNvlinkRxBytes).history_column, "prof_nvlink_rx");
  EXPECT_EQ(info(Field::Utilization).history_column, "util");
  EXPECT_EQ(info(Field::MemoryUtilization).history_column, "mem_util");
  EXPECT_EQ(info(Field::MemoryUsed).history_column, "mem_used");
  EXPECT_EQ(info(Field::MemoryTotal).history_column, "mem_total");
  EXPECT_EQ(info(Field::Temperature).history_column, "temp");
  EXPECT_EQ(info(Field::PowerDraw).history_column, "power");
  EXPECT_EQ(info(Field::Fan).history_column, "fan");
  EXPECT_EQ(info(Field::SmClock).history_column, "sm_clock");
  EXPECT_EQ(info(Field::MemClock).history_column, "mem_clock");
  EXPECT_TRUE(info(Field::MemoryTotal).history_metric.empty());
}

TEST(Fields, LookupsByJsonKeyAndHistoryMetric) {
  EXPECT_EQ(field_by_json_key("memory.used"), Field::MemoryUsed);
  EXPECT_EQ(field_by_json_key("clock_speeds.graphics"), Field::SmClock);
  EXPECT_EQ(field_by_json_key("power_usage"), Field::PowerDraw);
  EXPECT_FALSE(field_by_json_key("memory"));
  EXPECT_FALSE(field_by_json_key(""));
  EXPECT_EQ(field_by_history_metric("power"), Field::PowerDraw);
  EXPECT_EQ(field_by_history_metric("sm_clock"), Field::SmClock);
  EXPECT_FALSE(field_by_history_metric("util"));  // a column, not a metric name
  EXPECT_FALSE(field_by_history_metric(""));
  EXPECT_FALSE(field_by_history_metric("memory_total"));
}

TEST(Fields, UnitsAndPrometheusTypes) {
  EXPECT_EQ(info(Field::Utilization).unit, "%");
  EXPECT_EQ(info(Field::MemoryUsed).unit, "MiB");
  EXPECT_EQ(info(Field::Temperature).unit, "°C");
  EXPECT_EQ(info(Field::PowerDraw).unit, "W");
  EXPECT_EQ(info(Field::SmClock).unit, "MHz");
  EXPECT_EQ(info(Field::Energy).unit, "mJ");
  EXPECT_EQ(info(Field::Energy).prometheus_type, MetricType::Counter);
  EXPECT_EQ(info(Field::EccUncorrectedVolatile).prometheus_type, MetricType::Counter);
  EXPECT_EQ(info(Field::Utilization).prometheus_type, MetricType::Gauge);
  EXPECT_EQ(info(Field::Utilization).prometheus_name, "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ(to_string(MetricType::Counter), "counter");
}

TEST(Fields, ReadersKeepIntegersExactAndCarryTheReason) {
  GpuReading g;
  g.energy_mj = std::uint64_t{18'446'744'073'709'551'615ULL};
  g.temperature_c = -5;
  g.power_draw_w = 123.456;
  g.persistence_mode = true;
  g.fan_pct = Reading<unsigned>::absent(Absent::NotSupported);
  g.utilization_pct = Reading<unsigned>::absent(Absent::MigEnabled);

  const auto energy = read(Field::Energy, g);
  ASSERT_EQ(energy.kind, FieldValue::Kind::Unsigned);
  EXPECT_EQ(energy.u, 18'446'744'073'709'551'615ULL);
  const auto temp = read(Field::Temperature, g);
  ASSERT_EQ(temp.kind, FieldValue::Kind::Signed);
  EXPECT_EQ(temp.i, -5);
  const auto power = read(Field::PowerDraw, g);
  ASSERT_EQ(power.kind, FieldValue::Kind::Double);
  EXPECT_DOUBLE_EQ(power.as_double(), 123.456);
  EXPECT_EQ(read(Field::PersistenceMode, g).u, 1u);

  const auto fan = read(Field::Fan, g);
  EXPECT_FALSE(fan.has_value());
  EXPECT_EQ(fan.why, Absent::NotSupported);
  EXPECT_EQ(read(Field::Utilization, g).why, Absent::MigEnabled);
  EXPECT_EQ(read(Field::MemoryUsed, g).why, Absent::NotQueried);  // never set
}

TEST(Fields, EveryReaderReadsItsOwnMember) {
  // Each field gets a distinct value; each reader must return its own.
  GpuReading g;
  g.utilization_pct = 1u;
  g.memory_utilization_pct = 2u;
  g.memory_total_mib = std::uint64_t{3};
  g.memory_used_mib = std::uint64_t{4};
  g.memory_free_mib = std::uint64_t{5};
  g.memory_unattributed_mib = std::uint64_t{6};
  g.temperature_c = 7;
  g.power_draw_w = 8.0;
  g.power_limit_w = 9.0;
  g.fan_pct = 10u;
  g.clock_graphics_mhz = 11u;
  g.clock_memory_mhz = 12u;
  g.clock_event_reasons = std::uint64_t{13};
  g.performance_state = 14u;
  g.mig_enabled = false;
  g.ecc_uncorrected_volatile = std::uint64_t{16};
  g.persistence_mode = true;
  g.energy_mj = std::uint64_t{18};
  g.ecc_corrected_volatile = std::uint64_t{19};
  g.ecc_corrected_aggregate = std::uint64_t{20};
  g.ecc_uncorrected_aggregate = std::uint64_t{21};
  g.retired_pages_sbe = std::uint64_t{22};
  g.retired_pages_dbe = std::uint64_t{23};
  g.retired_pages_pending = true;
  g.remapped_rows_correctable = std::uint64_t{25};
  g.remapped_rows_uncorrectable = std::uint64_t{26};
  g.remapped_rows_pending = false;
  g.remapped_rows_failure = true;
  g.pcie_replay_count = std::uint64_t{29};
  g.power_violation_us = std::uint64_t{30};
  g.thermal_violation_us = std::uint64_t{31};
  g.last_xid = 32u;
  g.prof_graphics_active = 33.0;
  g.prof_sm_active = 34.0;
  g.prof_sm_occupancy = 35.0;
  g.prof_tensor_active = 36.0;
  g.prof_dram_active = 37.0;
  g.prof_fp64_active = 38.0;
  g.prof_fp32_active = 39.0;
  g.prof_fp16_active = 40.0;
  g.prof_pcie_tx_bytes = 41.0;
  g.prof_pcie_rx_bytes = 42.0;
  g.prof_nvlink_tx_bytes = 43.0;
  g.prof_nvlink_rx_bytes = 44.0;
  g.clock_graphics_max_mhz = 45u;
  g.availability_score = 46.0;
  static_assert(kFieldCount == 46, "give the new field a value above");
  for (const auto& f : kFields) {
    SCOPED_TRACE(std::string(f.json_key));
    // Booleans read as 0/1; every other field reads the value its position gave it.
    double want = static_cast<double>(f.id) + 1;
    if (f.id == Field::MigMode || f.id == Field::RemappedRowsPending) want = 0;
    if (f.id == Field::PersistenceMode || f.id == Field::RetiredPagesPending || f.id == Field::RemappedRowsFailure)
      want = 1;
    EXPECT_EQ(f.read(g).as_double(), want);
  }
}

TEST(Fields, EachMarkerClearsItsOwnFieldOnly) {
  for (const auto& target : kFields) {
    SCOPED_TRACE(std::string(target.json_key));
    GpuReading g;
    for (const auto& f : kFields) f.mark_absent(g, Absent::NoPermission);
    target.mark_absent(g, Absent::GpuLost);
    for (const auto& f : kFields)
      EXPECT_EQ(f.read(g).why, f.id == target.id ? Absent::GpuLost : Absent::NoPermission) << f.json_key;
  }
  GpuReading all;
  all.fan_pct = 50u;
  mark_all_absent(all, Absent::Error);
  for (const auto& f : kFields) EXPECT_EQ(f.read(all).why, Absent::Error) << f.json_key;
}

TEST(Absent, CodesAreStableSnakeCase) {
  EXPECT_EQ(code(Absent::NotSupported), "not_supported");
  EXPECT_EQ(code(Absent::NoPermission), "no_permission");
  EXPECT_EQ(code(Absent::GpuLost), "gpu_lost");
  EXPECT_EQ(code(Absent::MigEnabled), "mig_enabled");
  EXPECT_EQ(code(Absent::NotQueried), "not_queried");
  EXPECT_EQ(to_string(Absent::GpuLost), "GPU lost");
}

}  // namespace
}  // namespace gf::core
