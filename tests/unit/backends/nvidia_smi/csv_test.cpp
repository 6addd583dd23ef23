// The pure nvidia-smi CSV parsers, on canned text: the fixtures the fake nvidia-smi replays, and
// small inline lines for the edge cases.
#include "backends/nvidia_smi/csv.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gf_test_paths.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using core::Absent;
using core::Health;
using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GF_FIXTURES_DIR) + "/nvidia_smi/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A full current-list line whose fields are all valid, with some columns replaced.
std::string line_with(std::initializer_list<std::pair<std::size_t, std::string>> changes) {
  std::vector<std::string> f = {"0",
                                "GPU-00000000-0000-0000-0000-000000000000",
                                "00000000:01:00.0",
                                "1000",
                                "10",
                                "990",
                                "5",
                                "1",
                                "40",
                                "50.00",
                                "300.00",
                                "30",
                                "1000",
                                "2000",
                                "P2",
                                "0x0000000000000000",
                                "Disabled",
                                "0",
                                "Enabled",
                                "0",
                                "0",
                                "0",
                                "0",
                                "0",
                                "No",
                                "550.54.15",
                                "Some GPU"};
  for (const auto& [column, value] : changes) f.at(column) = value;
  std::string out;
  for (const auto& s : f) out += (out.empty() ? "" : ", ") + s;
  return out + "\n";
}
std::string line_with(std::size_t column, const std::string& value) { return line_with({{column, value}}); }

constexpr std::size_t kColMemoryUsed = 4;
constexpr std::size_t kColTemperature = 8;
constexpr std::size_t kColPowerDraw = 9;
constexpr std::size_t kColFan = 11;
constexpr std::size_t kColPState = 14;
constexpr std::size_t kColReasons = 15;
constexpr std::size_t kColPersistence = 18;
constexpr std::size_t kColEccCorrectedVolatile = 19;
constexpr std::size_t kColRetiredSbe = 22;
constexpr std::size_t kColRetiredPending = 24;
constexpr std::size_t kColName = 26;

TEST(NvidiaSmiFields, CurrentListIsTheDocumentedOneWithNameLast) {
  EXPECT_EQ(join_fields(current_fields()),
            "index,uuid,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,utilization.memory,"
            "temperature.gpu,power.draw,power.limit,fan.speed,clocks.gr,clocks.mem,pstate,"
            "clocks_event_reasons.active,mig.mode.current,ecc.errors.uncorrected.volatile.total,"
            "persistence_mode,ecc.errors.corrected.volatile.total,ecc.errors.corrected.aggregate.total,"
            "ecc.errors.uncorrected.aggregate.total,retired_pages.sbe,retired_pages.dbe,retired_pages.pending,"
            "driver_version,name");
  for (auto list : {current_fields(), throttle_fields(), basic_fields()}) {
    ASSERT_FALSE(list.empty());
    EXPECT_EQ(list.back(), Field::Name);
    for (Field f : list) EXPECT_EQ(field_from_name(field_name(f)), f);
  }
  EXPECT_THAT(join_fields(throttle_fields()), HasSubstr("clocks_throttle_reasons.active"));
  EXPECT_THAT(join_fields(throttle_fields()), ::testing::Not(HasSubstr("clocks_event_reasons")));
  EXPECT_THAT(join_fields(basic_fields()), ::testing::Not(HasSubstr("reasons")));
  EXPECT_THAT(join_fields(basic_fields()), ::testing::Not(HasSubstr("mig.")));
  EXPECT_FALSE(field_from_name("memory.bogus").has_value());
}

TEST(NvidiaSmiParseGpus, EightGpusFromTheNormalFixture) {
  auto t = parse_gpu_lines(fixture("query-gpu-normal.csv"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 8u);
  EXPECT_EQ(t->driver_version, "550.54.15");
  for (unsigned i = 0; i < 8; ++i) {
    EXPECT_EQ(t->gpus[i].index, i);
    EXPECT_EQ(t->gpus[i].health, Health::Ok);
    EXPECT_EQ(t->gpus[i].name, "NVIDIA H100 80GB HBM3");
  }
  const auto& g = t->gpus[0];
  EXPECT_EQ(g.uuid, "GPU-5b2c1a3e-7f4d-4e21-9c3a-0d1e2f3a4b50");
  EXPECT_EQ(g.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(g.memory_total_mib, core::Reading<std::uint64_t>(81559));
  EXPECT_EQ(g.memory_used_mib, core::Reading<std::uint64_t>(40961));
  EXPECT_EQ(g.memory_free_mib, core::Reading<std::uint64_t>(40118));
  EXPECT_EQ(g.utilization_pct, core::Reading<unsigned>(87));
  EXPECT_EQ(g.memory_utilization_pct, core::Reading<unsigned>(41));
  EXPECT_EQ(g.temperature_c, core::Reading<int>(61));
  ASSERT_TRUE(g.power_draw_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_draw_w, 512.34);
  ASSERT_TRUE(g.power_limit_w.has_value());
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 700.0);
  EXPECT_FALSE(g.fan_pct.has_value());  // SXM boards have no fan of their own
  EXPECT_EQ(g.fan_pct.why(), Absent::Unavailable);
  EXPECT_EQ(g.clock_graphics_mhz, core::Reading<unsigned>(1980));
  EXPECT_EQ(g.clock_memory_mhz, core::Reading<unsigned>(2619));
  EXPECT_EQ(g.performance_state, core::Reading<unsigned>(0));
  EXPECT_EQ(g.clock_event_reasons, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.mig_enabled, core::Reading<bool>(false));
  EXPECT_EQ(g.ecc_uncorrected_volatile, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.persistence_mode, core::Reading<bool>(true));
  EXPECT_FALSE(g.energy_mj.has_value());
  EXPECT_EQ(g.energy_mj.why(), Absent::NotQueried);
  EXPECT_TRUE(g.processes.empty());

  EXPECT_EQ(t->gpus[1].clock_event_reasons, core::Reading<std::uint64_t>(0x1));
  EXPECT_THAT(core::clock_event_names(*t->gpus[2].clock_event_reasons), ::testing::ElementsAre("sw_power_cap"));
  EXPECT_EQ(t->gpus[6].mig_enabled, core::Reading<bool>(true));
  EXPECT_EQ(t->gpus[7].ecc_uncorrected_volatile, core::Reading<std::uint64_t>(2));
  EXPECT_EQ(t->gpus[7].pci_bus_id, "00000000:DB:00.0");
}

TEST(NvidiaSmiParseGpus, ThrottleListReadsTheSameColumnsIntoTheSameMask) {
  auto t = parse_gpu_lines(fixture("query-gpu-normal.csv"), throttle_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 8u);
  EXPECT_EQ(t->gpus[2].clock_event_reasons, core::Reading<std::uint64_t>(0x4));
}

TEST(NvidiaSmiParseGpus, BasicListLeavesTheMissingFieldsNotQueried) {
  const std::string line =
      "3, GPU-x, 00000000:01:00.0, 1000, 10, 990, 5, 1, 40, 50.00, 300.00, 30, 1000, 2000, P2, Disabled, "
      "470.57.02, Tesla V100\n";
  auto t = parse_gpu_lines(line, basic_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 1u);
  const auto& g = t->gpus[0];
  EXPECT_EQ(g.index, 3u);
  EXPECT_EQ(g.name, "Tesla V100");
  EXPECT_EQ(g.persistence_mode, core::Reading<bool>(false));
  EXPECT_EQ(g.performance_state, core::Reading<unsigned>(2));
  EXPECT_EQ(t->driver_version, "470.57.02");
  EXPECT_EQ(g.clock_event_reasons.why(), Absent::NotQueried);
  EXPECT_EQ(g.mig_enabled.why(), Absent::NotQueried);
  EXPECT_EQ(g.ecc_uncorrected_volatile.why(), Absent::NotQueried);
}

TEST(NvidiaSmiParseGpus, BracketedValuesBecomeAbsentReadingsWithTheirReason) {
  auto t = parse_gpu_lines(fixture("query-gpu-na.csv"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 2u);
  const auto& a = t->gpus[0];
  EXPECT_EQ(a.health, Health::Ok);
  EXPECT_EQ(a.utilization_pct.why(), Absent::Unavailable);
  EXPECT_FALSE(a.utilization_pct.has_value());
  EXPECT_EQ(a.memory_utilization_pct.why(), Absent::Unavailable);
  EXPECT_EQ(a.power_draw_w.why(), Absent::Unavailable);
  EXPECT_EQ(a.power_limit_w.why(), Absent::NotSupported);
  EXPECT_FALSE(a.power_limit_w.has_value());
  EXPECT_EQ(a.clock_event_reasons.why(), Absent::NotSupported);
  EXPECT_EQ(a.mig_enabled.why(), Absent::Unavailable);
  EXPECT_EQ(a.ecc_uncorrected_volatile.why(), Absent::Unavailable);
  EXPECT_EQ(a.fan_pct, core::Reading<unsigned>(30));
  EXPECT_EQ(a.performance_state, core::Reading<unsigned>(8));
  EXPECT_EQ(a.persistence_mode, core::Reading<bool>(false));

  const auto& b = t->gpus[1];
  EXPECT_EQ(b.health, Health::Ok);
  EXPECT_FALSE(b.memory_used_mib.has_value());
  EXPECT_EQ(b.memory_used_mib.why(), Absent::NoPermission);
  EXPECT_EQ(b.fan_pct.why(), Absent::NotSupported);
  EXPECT_EQ(b.utilization_pct, core::Reading<unsigned>(0));  // a real zero stays a zero
  EXPECT_EQ(b.name, "NVIDIA RTX A5000, Rev. B");
}

TEST(NvidiaSmiParseGpus, GpuRequiringResetIsAnErrorGpuNotAFailedParse) {
  auto t = parse_gpu_lines(fixture("query-gpu-reset.csv"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 2u);
  EXPECT_EQ(t->gpus[0].health, Health::Ok);
  EXPECT_TRUE(t->gpus[0].health_message.empty());
  const auto& g = t->gpus[1];
  EXPECT_EQ(g.health, Health::Error);
  EXPECT_THAT(g.health_message, HasSubstr("GPU requires reset"));
  EXPECT_EQ(g.index, 1u);  // its index field is unreadable: taken from its place in the list
  EXPECT_TRUE(g.uuid.empty());
  EXPECT_TRUE(g.name.empty());
  EXPECT_EQ(g.memory_total_mib.why(), Absent::Error);
  EXPECT_EQ(g.persistence_mode.why(), Absent::Error);
  EXPECT_EQ(t->driver_version, "550.54.15");  // from the healthy GPU
}

TEST(NvidiaSmiParseGpus, UnknownErrorInOneFieldMarksTheGpuError) {
  auto t = parse_gpu_lines(line_with(kColPowerDraw, "[Unknown Error]"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 1u);
  EXPECT_EQ(t->gpus[0].health, Health::Error);
  EXPECT_THAT(t->gpus[0].health_message, HasSubstr("Unknown Error"));
  EXPECT_EQ(t->gpus[0].power_draw_w.why(), Absent::Error);
  EXPECT_EQ(t->gpus[0].memory_used_mib, core::Reading<std::uint64_t>(10));
}

TEST(NvidiaSmiParseGpus, LostGpuIsLostAndOutranksReset) {
  std::string text = line_with(kColMemoryUsed, "[GPU is lost]");
  text += line_with(kColFan, "[GPU requires reset]");
  auto t = parse_gpu_lines(text, current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 2u);
  EXPECT_EQ(t->gpus[0].health, Health::Lost);
  EXPECT_THAT(t->gpus[0].health_message, HasSubstr("lost"));
  EXPECT_EQ(t->gpus[1].health, Health::Error);

  auto both = parse_gpu_lines(line_with({{kColFan, "[GPU requires reset]"}, {kColMemoryUsed, "[GPU is lost]"}}),
                              current_fields());
  ASSERT_TRUE(both);
  ASSERT_EQ(both->gpus.size(), 1u);
  EXPECT_EQ(both->gpus[0].health, Health::Lost);
}

TEST(NvidiaSmiParseGpus, UnknownBracketedNoteIsAnAbsentReadingNotAnError) {
  auto t = parse_gpu_lines(line_with(kColPowerDraw, "[Requested functionality has been deprecated]"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpus[0].health, Health::Ok);
  EXPECT_EQ(t->gpus[0].power_draw_w.why(), Absent::Error);
}

TEST(NvidiaSmiParseGpus, CommaInTheNameStaysInTheName) {
  auto t = parse_gpu_lines(line_with(kColName, "Tesla, Custom, Edition (rev, 2)"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 1u);
  EXPECT_EQ(t->gpus[0].name, "Tesla, Custom, Edition (rev, 2)");
  EXPECT_EQ(t->driver_version, "550.54.15");
  EXPECT_EQ(t->gpus[0].persistence_mode, core::Reading<bool>(true));
}

TEST(NvidiaSmiParseGpus, WrongColumnCountIsAnErrorNamingTheLine) {
  std::string text = line_with(kColName, "ok");
  text += "0, GPU-x, 00000000:01:00.0, 1000\n";
  auto t = parse_gpu_lines(text, current_fields());
  ASSERT_FALSE(t);
  EXPECT_THAT(t.error().message, HasSubstr("line 2"));
  EXPECT_THAT(t.error().message, HasSubstr("expected 27"));
  EXPECT_THAT(t.error().message, HasSubstr("found 4"));

  // Without a free-text last column, extra commas are an error too.
  const Field two[] = {Field::Index, Field::MemoryUsed};
  auto extra = parse_gpu_lines("0, 1, 2\n", two);
  ASSERT_FALSE(extra);
  EXPECT_THAT(extra.error().message, HasSubstr("line 1"));
  EXPECT_THAT(extra.error().message, HasSubstr("more than 2"));
  auto exact = parse_gpu_lines("4, 12\n", two);
  ASSERT_TRUE(exact) << exact.error().message;
  EXPECT_EQ(exact->gpus.at(0).index, 4u);
  EXPECT_EQ(exact->gpus.at(0).memory_used_mib, core::Reading<std::uint64_t>(12));
}

TEST(NvidiaSmiParseGpus, NonNumericValueIsAnErrorNamingLineAndField) {
  std::string text = "\n" + line_with(kColMemoryUsed, "forty");
  auto t = parse_gpu_lines(text, current_fields());
  ASSERT_FALSE(t);
  EXPECT_THAT(t.error().message, HasSubstr("line 2"));
  EXPECT_THAT(t.error().message, HasSubstr("memory.used"));
  EXPECT_THAT(t.error().message, HasSubstr("'forty'"));

  for (const auto& [col, bad] : std::vector<std::pair<std::size_t, std::string>>{
           {kColMemoryUsed, "12abc"},
           {kColMemoryUsed, "-1"},
           {kColMemoryUsed, ""},
           {kColMemoryUsed, "99999999999999999999999"},
           {kColPowerDraw, "nan"},
           {kColPowerDraw, "inf"},
           {kColPowerDraw, "-5.00"},
           {kColPowerDraw, "12 W"},
           {kColPState, "Q1"},
           {kColPState, "P"},
           {kColReasons, "0x"},
           {kColReasons, "4"},
           {kColReasons, "0x00000000000000004"},
           {kColReasons, "0xZZ"},
           {kColPersistence, "enabled"},
           {0, "one"},
       }) {
    auto r = parse_gpu_lines(line_with(col, bad), current_fields());
    EXPECT_FALSE(r) << "column " << col << " accepted '" << bad << "'";
    if (!r) {
      EXPECT_THAT(r.error().message, HasSubstr("line 1")) << bad;
    }
  }
}

TEST(NvidiaSmiParseGpus, ValueEdgeCases) {
  auto high = parse_gpu_lines(line_with(kColPState, "P15") + line_with(kColPState, "P32"), current_fields());
  ASSERT_TRUE(high) << high.error().message;
  EXPECT_EQ(high->gpus[0].performance_state, core::Reading<unsigned>(15));
  EXPECT_EQ(high->gpus[1].performance_state.why(), Absent::Unavailable);

  auto mask = parse_gpu_lines(line_with(kColReasons, "0x00000000000001FF"), current_fields());
  ASSERT_TRUE(mask) << mask.error().message;
  EXPECT_EQ(mask->gpus[0].clock_event_reasons, core::Reading<std::uint64_t>(0x1ff));

  auto watts = parse_gpu_lines(line_with(kColPowerDraw, "0.5"), current_fields());
  ASSERT_TRUE(watts) << watts.error().message;
  EXPECT_DOUBLE_EQ(*watts->gpus[0].power_draw_w, 0.5);

  auto cold = parse_gpu_lines(line_with(kColTemperature, "-5"), current_fields());
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_EQ(cold->gpus[0].temperature_c, core::Reading<int>(-5));
}

TEST(NvidiaSmiParseGpus, CrlfAndBlankLinesAreTolerated) {
  std::string text = "\r\n" + line_with(kColName, "A");
  text.insert(text.size() - 1, "\r");
  text += "   \n" + line_with(kColName, "B");
  auto t = parse_gpu_lines(text, current_fields());
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->gpus.size(), 2u);
  EXPECT_EQ(t->gpus[0].name, "A");
  EXPECT_EQ(t->gpus[1].name, "B");
}

TEST(NvidiaSmiParseGpus, EmptyOutputAndNoDevicesGiveNoGpus) {
  for (const char* text : {"", "\n\n", "No devices were found\n"}) {
    auto t = parse_gpu_lines(text, current_fields());
    ASSERT_TRUE(t) << text;
    EXPECT_TRUE(t->gpus.empty()) << text;
    EXPECT_TRUE(t->driver_version.empty());
  }
  const std::span<const Field> none;
  EXPECT_FALSE(parse_gpu_lines("0\n", none));
}

TEST(NvidiaSmiParseGpus, ControlCharactersInTextAreReplaced) {
  auto t = parse_gpu_lines(line_with(kColName, std::string("Bad\x1b[31mName\x7f")), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->gpus[0].name, "Bad?[31mName?");
}

TEST(NvidiaSmiParseGpus, GarbageErrorMessageIsPrintableAndShort) {
  std::string junk(500, '\x01');
  auto t = parse_gpu_lines(junk, current_fields());
  ASSERT_FALSE(t);
  EXPECT_LT(t.error().message.size(), 200u);
  for (char c : t.error().message) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
}

TEST(NvidiaSmiParseGpus, RandomBytesNeverThrow) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 400);
  const std::string alphabet = "0123456789, []x.PNA/\n\r-EDabledGPU";
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) {
      const auto b = static_cast<std::size_t>(byte(rng));
      s.push_back(round % 2 ? static_cast<char>(b) : alphabet[b % alphabet.size()]);
    }
    EXPECT_NO_THROW({
      auto a = parse_gpu_lines(s, current_fields());
      auto b = parse_compute_apps(s);
      auto c = rejected_field(s);
      (void)a;
      (void)b;
      (void)c;
    }) << "round "
       << round;
  }
}

TEST(NvidiaSmiComputeApps, NormalFixtureGivesEveryProcessWithBasenames) {
  auto apps = parse_compute_apps(fixture("compute-apps-normal.csv"));
  ASSERT_TRUE(apps) << apps.error().message;
  ASSERT_EQ(apps->size(), 5u);
  const auto& a = (*apps)[0];
  EXPECT_EQ(a.gpu_uuid, "GPU-5b2c1a3e-7f4d-4e21-9c3a-0d1e2f3a4b50");
  EXPECT_EQ(a.process.pid, 41235u);
  EXPECT_EQ(a.process.used_memory_mib, std::optional<std::uint64_t>(40448));
  EXPECT_EQ(a.process.kind, core::ProcessKind::Compute);
  EXPECT_EQ(a.process.name, "python3");
  EXPECT_EQ((*apps)[1].process.name, "python");
  EXPECT_EQ((*apps)[3].process.used_memory_mib, std::nullopt);  // [N/A]
  EXPECT_EQ((*apps)[3].process.name, "a.out");
  EXPECT_EQ((*apps)[4].process.name, "worker");  // a comma in the path does not shift columns
  EXPECT_EQ((*apps)[4].process.pid, 8888u);
}

TEST(NvidiaSmiComputeApps, NoProcessesMessageAndEmptyOutputGiveNone) {
  for (const char* text : {"", "\n", "No running processes found\n", "No running processes found"}) {
    auto apps = parse_compute_apps(text);
    ASSERT_TRUE(apps) << text;
    EXPECT_TRUE(apps->empty()) << text;
  }
}

TEST(NvidiaSmiComputeApps, RowsWithoutPidOrGpuAreSkippedAndBracketedNamesLeftEmpty) {
  auto apps = parse_compute_apps(fixture("compute-apps-na.csv") +
                                 "GPU-1, 77, 100, [Insufficient Permissions]\nGPU-1, 78, 1, /\n");
  ASSERT_TRUE(apps) << apps.error().message;
  ASSERT_EQ(apps->size(), 3u);
  EXPECT_EQ((*apps)[0].process.pid, 4321u);
  EXPECT_EQ((*apps)[0].process.used_memory_mib, std::nullopt);
  EXPECT_EQ((*apps)[0].process.name, "python3");
  EXPECT_EQ((*apps)[1].process.pid, 77u);
  EXPECT_TRUE((*apps)[1].process.name.empty());
  EXPECT_EQ((*apps)[2].process.name, "/");
}

TEST(NvidiaSmiComputeApps, GarbageIsAnErrorNamingTheLine) {
  auto bad_pid = parse_compute_apps("GPU-1, 1, 2, a\nGPU-1, 12x, 2, b\n");
  ASSERT_FALSE(bad_pid);
  EXPECT_THAT(bad_pid.error().message, HasSubstr("line 2"));
  EXPECT_THAT(bad_pid.error().message, HasSubstr("pid"));

  auto bad_mem = parse_compute_apps("GPU-1, 1, lots, a\n");
  ASSERT_FALSE(bad_mem);
  EXPECT_THAT(bad_mem.error().message, HasSubstr("used_memory"));

  auto short_line = parse_compute_apps("GPU-1, 1\n");
  ASSERT_FALSE(short_line);
  EXPECT_THAT(short_line.error().message, HasSubstr("line 1"));
  EXPECT_THAT(short_line.error().message, HasSubstr("expected 4"));

  auto huge_pid = parse_compute_apps("GPU-1, 4294967296, 1, a\n");
  EXPECT_FALSE(huge_pid);
}

TEST(NvidiaSmiRejectedField, ReadsTheFieldFromNvidiaSmisComplaint) {
  EXPECT_EQ(rejected_field("Field \"clocks_event_reasons.active\" is not a valid field to query.\n\n"),
            std::optional<std::string>("clocks_event_reasons.active"));
  EXPECT_EQ(rejected_field("is not a valid field to query"), std::optional<std::string>(""));
  EXPECT_EQ(rejected_field("\"is not a valid field to query"), std::optional<std::string>(""));
  EXPECT_EQ(rejected_field(fixture("query-gpu-normal.csv")), std::nullopt);
  EXPECT_EQ(rejected_field(""), std::nullopt);
}

}  // namespace
}  // namespace gf::backends::nvidia_smi

namespace gf::backends::nvidia_smi {
namespace {

// Issue 21: the health columns of --query-gpu.
TEST(NvidiaSmiHealthColumns, EccAndRetiredPagesAreRead) {
  auto t =
      parse_gpu_lines(line_with({{kColEccCorrectedVolatile, "17"}, {kColRetiredSbe, "3"}, {kColRetiredPending, "Yes"}}),
                      current_fields());
  ASSERT_TRUE(t) << t.error().message;
  const auto& g = t->gpus.at(0);
  EXPECT_EQ(g.ecc_corrected_volatile, core::Reading<std::uint64_t>(17));
  EXPECT_EQ(g.ecc_corrected_aggregate, core::Reading<std::uint64_t>(0));
  EXPECT_EQ(g.retired_pages_sbe, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(g.retired_pages_pending, core::Reading<bool>(true));
  // Neither XIDs nor remapped rows come from --query-gpu: not queried, never 0.
  EXPECT_EQ(g.last_xid.why(), core::Absent::NotQueried);
  EXPECT_EQ(g.remapped_rows_failure.why(), core::Absent::NotQueried);
}

TEST(NvidiaSmiHealthColumns, HopperRetiredPagesAreAbsentAndBadPendingIsAnError) {
  auto t = parse_gpu_lines(fixture("query-gpu-normal.csv"), current_fields());
  ASSERT_TRUE(t) << t.error().message;
  for (const auto& g : t->gpus) {
    EXPECT_FALSE(g.retired_pages_sbe.has_value());
    EXPECT_FALSE(g.retired_pages_pending.has_value());
    EXPECT_EQ(g.ecc_uncorrected_aggregate, g.ecc_uncorrected_volatile);
  }
  auto bad = parse_gpu_lines(line_with(kColRetiredPending, "maybe"), current_fields());
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("retired_pages.pending: expected Yes or No, got 'maybe'"));
}

}  // namespace
}  // namespace gf::backends::nvidia_smi
