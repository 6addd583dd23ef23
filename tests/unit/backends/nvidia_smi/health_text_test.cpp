// The health answers nvidia-smi's --query-gpu lacks: --query-remapped-rows (CSV) and the PCIe replay
// and clock-event counters of -q -x, read from the real H100 capture (driver 580) and the real A100
// capture (driver 510, which prints no clock-event counters). See the fixtures' README.
#include "backends/nvidia_smi/health_text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "backends/nvidia_smi/mig_text.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using core::Absent;
using ::testing::HasSubstr;

std::string health_fixture(const std::string& name) {
  std::ifstream in(std::string(GF_FIXTURES_DIR) + "/nvidia_smi/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RemappedRows, CountsAndFlagsOfEveryGpu) {
  auto rows = parse_remapped_rows(health_fixture("remapped-rows-reset.csv"));
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  const auto& r = (*rows)[0];
  EXPECT_EQ(r.bus_id, "00000000:07:00.0");
  EXPECT_EQ(r.uuid, "GPU-c0ffee00-1111-2222-3333-444455556666");
  EXPECT_EQ(r.correctable, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(r.uncorrectable, core::Reading<std::uint64_t>(1));
  EXPECT_EQ(r.pending, core::Reading<bool>(true));
  EXPECT_EQ(r.failure, core::Reading<bool>(true));
  // "[GPU requires reset]" everywhere: no UUID to join on, every value absent with an error.
  const auto& lost = (*rows)[1];
  EXPECT_TRUE(lost.uuid.empty());
  EXPECT_FALSE(lost.correctable);
  EXPECT_EQ(lost.failure.why(), Absent::Error);
}

TEST(RemappedRows, NotAvailableAndNotSupportedAreAbsentNeverZero) {
  auto rows = parse_remapped_rows(health_fixture("remapped-rows-na.csv"));
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_FALSE((*rows)[0].correctable);
  EXPECT_EQ((*rows)[0].correctable.why(), Absent::Unavailable);
  EXPECT_EQ((*rows)[0].pending.why(), Absent::Unavailable);
  EXPECT_EQ((*rows)[1].uncorrectable.why(), Absent::NotSupported);
  EXPECT_EQ((*rows)[1].failure.why(), Absent::NotSupported);
}

TEST(RemappedRows, YesAndNoAsMinusQPrintsThem) {
  auto rows = parse_remapped_rows("00000000:65:00.0, GPU-x, 0, 2, No, Yes\n");
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ((*rows)[0].pending, core::Reading<bool>(false));
  EXPECT_EQ((*rows)[0].failure, core::Reading<bool>(true));
  EXPECT_EQ((*rows)[0].uncorrectable, core::Reading<std::uint64_t>(2));
}

TEST(RemappedRows, TheRecordedH100PrintsNoAndNo) {
  // Recorded on a real H100 80GB HBM3, driver 580.159.04 (scripts/gpu-validate.sh, 2026-11-27): this
  // driver prints pending and failure as No/Yes, the -q form, not 0/1.
  auto rows = parse_remapped_rows(health_fixture("remapped-rows-h100-580.csv"));
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  const auto& r = (*rows)[0];
  EXPECT_EQ(r.bus_id, "00000000:00:06.0");
  EXPECT_EQ(r.uuid, "GPU-d2e3189b-e80e-daf0-0285-50200cf85357");
  EXPECT_EQ(r.correctable, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(r.uncorrectable, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(r.pending, core::Reading<bool>(false));
  EXPECT_EQ(r.failure, core::Reading<bool>(false));
}

TEST(RemappedRows, GarbageIsOneClearError) {
  for (const char* bad : {"00000000:65:00.0, GPU-x, 0, 0, 0\n", "00000000:65:00.0, GPU-x, 0, 0, 0, 0, 7\n",
                          "00000000:65:00.0, GPU-x, -1, 0, 0, 0\n", "00000000:65:00.0, GPU-x, 0, 0, maybe, 0\n",
                          "\x01\x02\xff binary, junk\n"}) {
    auto rows = parse_remapped_rows(bad);
    ASSERT_FALSE(rows) << bad;
    EXPECT_THAT(rows.error().message, HasSubstr("--query-remapped-rows: line 1"));
    EXPECT_EQ(rows.error().message.find('\x01'), std::string::npos);  // shown printable
  }
  auto empty = parse_remapped_rows("\nNo devices were found\n");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(RemappedRows, JoinByUuidAndAGpuNotListedIsNotSupported) {
  auto rows = parse_remapped_rows(health_fixture("remapped-rows-normal.csv"));
  ASSERT_TRUE(rows);
  core::GpuReading listed;
  listed.uuid = "GPU-5b2c1a3e-7f4d-4e21-9c3a-0d1e2f3a4b53";
  apply_remapped_rows(*rows, listed);
  EXPECT_EQ(listed.remapped_rows_correctable, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(listed.remapped_rows_failure, core::Reading<bool>(false));
  core::GpuReading other;
  other.uuid = "GPU-somewhere-else";
  apply_remapped_rows(*rows, other);
  EXPECT_EQ(other.remapped_rows_uncorrectable.why(), Absent::NotSupported);
  EXPECT_EQ(other.remapped_rows_failure.why(), Absent::NotSupported);
}

TEST(HealthXml, TheRecordedH100HasReplaysAndClockEventTimes) {
  auto xml = parse_query_xml(health_fixture("q-x-h100-80gb-hbm3-580.xml"));
  ASSERT_TRUE(xml) << xml.error().message;
  ASSERT_EQ(xml->size(), 1u);
  const auto& g = (*xml)[0];
  EXPECT_EQ(g.uuid, "GPU-a7c70913-7752-3821-b707-c7ff1a4a3ce5");
  EXPECT_EQ(g.pcie_replay_count, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.power_violation_us, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.thermal_violation_us, core::Reading<std::uint64_t>(0));
}

TEST(HealthXml, ValuesUnitsAndNotes) {
  const std::string xml = R"(<?xml version="1.0" ?>
<nvidia_smi_log><gpu id="00000000:65:00.0"><uuid>GPU-1</uuid>
<pci><replay_counter>17</replay_counter></pci>
<clocks_event_reasons><clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap></clocks_event_reasons>
<clocks_event_reasons_counters>
<clocks_event_reasons_counters_sw_power_cap>123456 us</clocks_event_reasons_counters_sw_power_cap>
<clocks_event_reasons_counters_sw_therm_slowdown>N/A</clocks_event_reasons_counters_sw_therm_slowdown>
</clocks_event_reasons_counters></gpu>
<gpu id="00000000:66:00.0"><uuid>GPU-2</uuid><pci><replay_counter>lots</replay_counter></pci></gpu></nvidia_smi_log>)";
  auto parsed = parse_query_xml(xml);
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].pcie_replay_count, core::Reading<std::uint64_t>(17));
  EXPECT_EQ((*parsed)[0].power_violation_us, core::Reading<std::uint64_t>(123456));
  EXPECT_EQ((*parsed)[0].thermal_violation_us.why(), Absent::Unavailable);
  EXPECT_EQ((*parsed)[1].pcie_replay_count.why(), Absent::Error);
  EXPECT_EQ((*parsed)[1].power_violation_us.why(), Absent::NotSupported);  // not printed at all
}

TEST(HealthXml, Driver510PrintsReplaysButNoClockEventTimes) {
  auto xml = parse_query_xml(health_fixture("q-x-a100-sxm4-40gb-mig-510.xml"));
  ASSERT_TRUE(xml) << xml.error().message;
  ASSERT_EQ(xml->size(), 1u);
  EXPECT_EQ((*xml)[0].pcie_replay_count, core::Reading<std::uint64_t>(0));
  EXPECT_EQ((*xml)[0].power_violation_us.why(), Absent::NotSupported);
  EXPECT_EQ((*xml)[0].thermal_violation_us.why(), Absent::NotSupported);
}

TEST(HealthRate, FirstAtOnceThenOncePerInterval) {
  using namespace std::chrono_literals;
  Every every(30s);
  const std::chrono::steady_clock::time_point t0{100s};
  EXPECT_TRUE(every.due(t0));
  every.ran(t0);
  EXPECT_FALSE(every.due(t0 + 29s));
  EXPECT_TRUE(every.due(t0 + 30s));
}

}  // namespace
}  // namespace gf::backends::nvidia_smi
