#include "wire/prometheus.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <clocale>
#include <cmath>
#include <limits>
#include <locale>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gf::wire {
namespace {

// ---------------------------------------------------------------------------------------------------------
// A small checker of the text exposition format, stricter than Prometheus where our encoder promises more:
// every line is "# HELP name text", "# TYPE name gauge|counter" right after its HELP, or a sample
// name{label="value",…} value of the family declared last; no blank lines, no other comments, no family
// declared twice, no series twice, and the text ends with a newline.

bool is_metric_name(std::string_view n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool is_label_name(std::string_view n) {
  return is_metric_name(n) && n.find(':') == std::string_view::npos && !n.starts_with("__");
}

bool is_value(std::string_view v) {
  if (v == "NaN" || v == "+Inf" || v == "-Inf") return true;
  if (v.empty()) return false;
  double d = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), d);
  // from_chars also takes "nan" and "inf"; the encoder promises the format's own spellings only.
  return r.ec == std::errc() && r.ptr == v.data() + v.size() && std::isfinite(d);
}

// Parses `{a="x",b="y"}` at the start of `s`; returns the bytes consumed, 0 on a syntax error.
std::size_t parse_labels(std::string_view s, std::string& why) {
  std::set<std::string, std::less<>> names;
  std::size_t i = 1;  // past '{'
  if (i < s.size() && s[i] == '}') return i + 1;
  while (true) {
    const std::size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return why = "label without '='", 0;
    const std::string_view name = s.substr(i, eq - i);
    if (!is_label_name(name)) return why = "bad label name '" + std::string(name) + "'", 0;
    if (!names.emplace(name).second) return why = "label '" + std::string(name) + "' twice", 0;
    i = eq + 1;
    if (i >= s.size() || s[i] != '"') return why = "label value not quoted", 0;
    ++i;
    while (true) {
      if (i >= s.size()) return why = "unterminated label value", 0;
      if (s[i] == '"') break;
      if (s[i] == '\\') {
        if (i + 1 >= s.size() || (s[i + 1] != '\\' && s[i + 1] != '"' && s[i + 1] != 'n'))
          return why = "bad escape in label value", 0;
        ++i;
      }
      ++i;
    }
    ++i;  // past the closing quote
    if (i >= s.size()) return why = "labels not closed", 0;
    if (s[i] == '}') return i + 1;
    if (s[i] != ',') return why = "expected ',' or '}' after a label", 0;
    ++i;
  }
}

std::vector<std::string> exposition_errors(std::string_view text) {
  std::vector<std::string> errors;
  if (text.empty() || text.back() != '\n') errors.push_back("text does not end with a newline");
  std::set<std::string, std::less<>> declared;
  std::set<std::string, std::less<>> series;
  std::string help_of;  // the family whose HELP was the previous line
  std::string family;   // the family whose TYPE was seen last
  std::size_t start = 0;
  int line_no = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    auto fail = [&](const std::string& why) {
      errors.push_back("line " + std::to_string(line_no) + ": " + why + ": " + std::string(line));
    };
    const std::string last_help = std::exchange(help_of, std::string());
    if (line.empty()) {
      fail("blank line");
    } else if (line.starts_with("# HELP ")) {
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      const std::string_view name = rest.substr(0, sp);
      if (sp == std::string_view::npos || !is_metric_name(name)) {
        fail("bad HELP");
        continue;
      }
      const std::string_view help = rest.substr(sp + 1);
      for (std::size_t i = 0; i < help.size(); ++i) {
        if (help[i] == '\\' && (i + 1 >= help.size() || (help[i + 1] != '\\' && help[i + 1] != 'n'))) {
          fail("bad escape in HELP");
          break;
        }
        if (help[i] == '\\') ++i;
      }
      if (!declared.emplace(name).second) fail("family declared twice");
      help_of = std::string(name);
    } else if (line.starts_with("# TYPE ")) {
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      const std::string_view name = rest.substr(0, sp);
      const std::string_view type = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
      if (!is_metric_name(name) || (type != "gauge" && type != "counter")) fail("bad TYPE");
      if (name != last_help) fail("TYPE does not follow its HELP");
      family = std::string(name);
    } else if (line.starts_with("#")) {
      fail("unexpected comment");
    } else {
      std::size_t i = 0;
      while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
      const std::string_view name = line.substr(0, i);
      if (!is_metric_name(name)) {
        fail("bad metric name");
        continue;
      }
      if (name != family) fail("sample outside its family");
      if (i < line.size() && line[i] == '{') {
        std::string why;
        const std::size_t used = parse_labels(line.substr(i), why);
        if (used == 0) {
          fail(why);
          continue;
        }
        i += used;
      }
      if (i >= line.size() || line[i] != ' ') {
        fail("no space before the value");
        continue;
      }
      if (!is_value(line.substr(i + 1))) fail("bad value");
      if (!series.emplace(line.substr(0, i)).second) fail("series twice");
    }
  }
  return errors;
}

::testing::AssertionResult valid_exposition(std::string_view text) {
  const auto errors = exposition_errors(text);
  if (errors.empty()) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure();
  for (const auto& e : errors) r << e << "\n";
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// Inputs.

core::GpuReading h100(unsigned index) {
  core::GpuReading g;
  g.index = index;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-0a1b2c3d";
  g.pci_bus_id = "00000000:1B:00.0";
  g.memory_total_mib = std::uint64_t{81559};
  g.memory_used_mib = std::uint64_t{8192};
  g.memory_free_mib = std::uint64_t{73367};
  g.utilization_pct = 75u;
  g.memory_utilization_pct = 40u;
  g.temperature_c = 65;
  g.power_draw_w = 220.456;
  g.power_limit_w = 700.0;
  g.fan_pct = core::Reading<unsigned>::absent(core::Absent::NotSupported);
  g.clock_graphics_mhz = 1980u;
  g.clock_memory_mhz = 2619u;
  g.clock_event_reasons = std::uint64_t{0x4};
  g.performance_state = 0u;
  g.mig_enabled = false;
  g.ecc_uncorrected_volatile = std::uint64_t{0};
  g.persistence_mode = true;
  g.energy_mj = std::uint64_t{123456789012};
  g.availability_score = 0.712345;
  g.processes.resize(2);
  g.memory_unattributed_mib = std::uint64_t{192};
  return g;
}

core::Snapshot one_gpu() {
  core::Snapshot s;
  s.backend = "nvml";
  s.gpus.push_back(h100(0));
  return s;
}

AgentStats agent() {
  AgentStats a;
  a.version = "0.1.0";
  a.backend = "nvml";
  a.uptime_seconds = 3600.5;
  a.collections_total = 7200;
  a.collection_errors_total = 3;
  a.last_collection_duration_seconds = 0.0125;
  a.active_leases = 2;
  a.waiting_jobs = 1;
  a.jobs_running = 1;
  a.jobs_finished_total = 42;
  a.alerts_firing = 0;
  a.websocket_clients = 3;
  return a;
}

// Replaces every `key` in `text` by `value`: the golden text below spells the GPU labels once as $L.
std::string expand(std::string text, std::string_view key, std::string_view value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

std::vector<std::string> lines_starting(std::string_view text, std::string_view prefix) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string_view line = text.substr(start, end - start);
    if (line.starts_with(prefix)) out.emplace_back(line);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// ---------------------------------------------------------------------------------------------------------

TEST(Prometheus, OneGpuGolden) {
  // Written by hand from dcgm-exporter's format: labels gpu, UUID, pci_bus_id, device, modelName, Hostname.
  const std::string labels = R"(gpu="0",UUID="GPU-0a1b2c3d",pci_bus_id="00000000:1B:00.0",device="nvidia0",)"
                             R"(modelName="NVIDIA H100 80GB HBM3",Hostname="node-1")";
  // No DCGM_FI_DEV_FAN_SPEED family at all: the only GPU has no fan reading.
  const std::string golden = expand(R"(# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{$L} 1980
# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).
# TYPE DCGM_FI_DEV_MEM_CLOCK gauge
DCGM_FI_DEV_MEM_CLOCK{$L} 2619
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{$L} 65
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{$L} 220.456
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since the driver was loaded (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{$L} 123456789012
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{$L} 75
# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).
# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge
DCGM_FI_DEV_MEM_COPY_UTIL{$L} 40
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{$L} 73367
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{$L} 8192
# HELP DCGM_FI_DEV_ECC_DBE_VOL_TOTAL Total number of double-bit volatile ECC errors.
# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{$L} 0
# HELP DCGM_FI_DEV_ENFORCED_POWER_LIMIT Effective power limit that the driver enforces after taking into account all limiters (in W).
# TYPE DCGM_FI_DEV_ENFORCED_POWER_LIMIT gauge
DCGM_FI_DEV_ENFORCED_POWER_LIMIT{$L} 700
# HELP DCGM_FI_DEV_PSTATE Performance state (P-State) 0-15. 0=highest.
# TYPE DCGM_FI_DEV_PSTATE gauge
DCGM_FI_DEV_PSTATE{$L} 0
# HELP DCGM_FI_DEV_CLOCKS_EVENT_REASONS Why the clocks are held down now (bit mask of NVML clock event reasons).
# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge
DCGM_FI_DEV_CLOCKS_EVENT_REASONS{$L} 4
# HELP DCGM_FI_DEV_PERSISTENCE_MODE Persistence mode for the device (1 = enabled, 0 = disabled).
# TYPE DCGM_FI_DEV_PERSISTENCE_MODE gauge
DCGM_FI_DEV_PERSISTENCE_MODE{$L} 1
# HELP DCGM_FI_DEV_MIG_MODE MIG mode for the device (1 = enabled, 0 = disabled).
# TYPE DCGM_FI_DEV_MIG_MODE gauge
DCGM_FI_DEV_MIG_MODE{$L} 0
# HELP DCGM_FI_DEV_CLOCK_THROTTLE_REASONS Why the clocks are held down now (old name of DCGM_FI_DEV_CLOCKS_EVENT_REASONS).
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{$L} 4
# HELP gpufleet_gpu_health GPU health as gpufleet sees it: 1 for the current state (ok, lost or error).
# TYPE gpufleet_gpu_health gauge
gpufleet_gpu_health{$L,state="ok"} 1
# HELP gpufleet_gpu_availability_score How free the GPU is for new work, 0..1 (free memory and idle time, weighted).
# TYPE gpufleet_gpu_availability_score gauge
gpufleet_gpu_availability_score{$L} 0.712345
# HELP gpufleet_gpu_memory_total_mib Framebuffer memory total (in MiB).
# TYPE gpufleet_gpu_memory_total_mib gauge
gpufleet_gpu_memory_total_mib{$L} 81559
# HELP gpufleet_gpu_processes Processes gpufleet sees on the GPU.
# TYPE gpufleet_gpu_processes gauge
gpufleet_gpu_processes{$L} 2
# HELP gpufleet_gpu_memory_unattributed_mib Used memory that no visible process accounts for (in MiB); a lower bound.
# TYPE gpufleet_gpu_memory_unattributed_mib gauge
gpufleet_gpu_memory_unattributed_mib{$L} 192
# HELP gpufleet_agent_info The gpufleet agent's version and GPU backend; always 1.
# TYPE gpufleet_agent_info gauge
gpufleet_agent_info{version="0.1.0",backend="nvml",Hostname="node-1"} 1
# HELP gpufleet_agent_uptime_seconds Seconds since the agent started.
# TYPE gpufleet_agent_uptime_seconds gauge
gpufleet_agent_uptime_seconds{Hostname="node-1"} 3600.5
# HELP gpufleet_collections_total Snapshots collected from the GPU backend.
# TYPE gpufleet_collections_total counter
gpufleet_collections_total{Hostname="node-1"} 7200
# HELP gpufleet_collection_errors_total Snapshot collections that failed.
# TYPE gpufleet_collection_errors_total counter
gpufleet_collection_errors_total{Hostname="node-1"} 3
# HELP gpufleet_collection_duration_seconds Duration of the last snapshot collection (in seconds).
# TYPE gpufleet_collection_duration_seconds gauge
gpufleet_collection_duration_seconds{Hostname="node-1"} 0.0125
# HELP gpufleet_leases_active GPU leases currently held.
# TYPE gpufleet_leases_active gauge
gpufleet_leases_active{Hostname="node-1"} 2
# HELP gpufleet_jobs_waiting Jobs waiting for GPUs.
# TYPE gpufleet_jobs_waiting gauge
gpufleet_jobs_waiting{Hostname="node-1"} 1
# HELP gpufleet_jobs_running Jobs running.
# TYPE gpufleet_jobs_running gauge
gpufleet_jobs_running{Hostname="node-1"} 1
# HELP gpufleet_jobs_finished_total Jobs that have finished, whatever their outcome.
# TYPE gpufleet_jobs_finished_total counter
gpufleet_jobs_finished_total{Hostname="node-1"} 42
# HELP gpufleet_alerts_firing Alerts currently firing.
# TYPE gpufleet_alerts_firing gauge
gpufleet_alerts_firing{Hostname="node-1"} 0
# HELP gpufleet_websocket_clients WebSocket clients connected.
# TYPE gpufleet_websocket_clients gauge
gpufleet_websocket_clients{Hostname="node-1"} 3
)",
                                    "$L", labels);
  const std::string text = prometheus_text(one_gpu(), "node-1", agent());
  EXPECT_EQ(text, golden);
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, WriteAppendsAndMatchesText) {
  std::string out = "# previous\n";
  write_prometheus(out, one_gpu(), "node-1", agent());
  EXPECT_EQ(out, "# previous\n" + prometheus_text(one_gpu(), "node-1", agent()));
}

// The agent renders the GPU half once per snapshot and the agent half per scrape: together they are
// the whole text, for a named and an unnamed host, and the GPU half holds no agent series.
TEST(Prometheus, GpuAndAgentHalvesMakeTheWholeText) {
  for (const std::string host : {"node-1", ""}) {
    std::string gpus, agent_part;
    write_prometheus_gpus(gpus, one_gpu(), host);
    write_prometheus_agent(agent_part, one_gpu().backend, host, agent());
    EXPECT_EQ(gpus + agent_part, prometheus_text(one_gpu(), host, agent())) << host;
    EXPECT_EQ(gpus.find("gpufleet_agent_info"), std::string::npos);
    EXPECT_EQ(agent_part.find("DCGM_FI_"), std::string::npos);
    EXPECT_TRUE(valid_exposition(gpus + agent_part));
  }
}

// MIG: each instance's framebuffer used/free as dcgm-exporter exports it (the parent's labels with
// GPU_I_PROFILE and GPU_I_ID before Hostname); the parent keeps its whole-GPU series, and no other family
// gains instance series.
TEST(Prometheus, MigInstancesGetTheirOwnFramebufferSeries) {
  core::Snapshot s = one_gpu();
  auto& g = s.gpus[0];
  g.mig_enabled = true;
  g.utilization_pct = core::Reading<unsigned>::absent(core::Absent::MigEnabled);
  core::MigInstance m;
  m.uuid = "MIG-feb88891-0321-5fef-9c87-d4af3b54259e";
  m.profile = "3g.40gb";
  m.gpu_instance_id = 2;
  m.memory_total_mib = std::uint64_t{40192};
  m.memory_used_mib = std::uint64_t{14013};
  m.memory_free_mib = std::uint64_t{26179};
  core::MigInstance n = m;
  n.profile = "1g.10gb";
  n.gpu_instance_id = 9;
  n.memory_used_mib = core::Reading<std::uint64_t>::absent(core::Absent::Error);
  n.memory_free_mib = std::uint64_t{9000};
  g.mig_instances = {m, n};
  const std::string text = prometheus_text(s, "node-1", agent());
  EXPECT_TRUE(valid_exposition(text));
  const std::string base =
      R"(gpu="0",UUID="GPU-0a1b2c3d",pci_bus_id="00000000:1B:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3")";
  EXPECT_TRUE(contains(text, "DCGM_FI_DEV_FB_USED{" + base +
                                 R"(,Hostname="node-1"} 8192)"
                                 "\n"));
  EXPECT_TRUE(contains(text, "DCGM_FI_DEV_FB_USED{" + base +
                                 R"(,GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-1"} 14013)"
                                 "\n"));
  EXPECT_TRUE(contains(text, "DCGM_FI_DEV_FB_FREE{" + base +
                                 R"(,GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",Hostname="node-1"} 9000)"
                                 "\n"));
  EXPECT_EQ(lines_starting(text, "DCGM_FI_DEV_FB_USED{").size(), 2u);  // an absent instance reading: no sample
  EXPECT_EQ(lines_starting(text, "DCGM_FI_DEV_FB_FREE{").size(), 3u);
  EXPECT_TRUE(lines_starting(text, "DCGM_FI_DEV_GPU_UTIL{").empty());  // null under MIG, never 0
  EXPECT_FALSE(contains(text, "DCGM_FI_DEV_GPU_TEMP{" + base + ",GPU_I_"));
  // Without a Hostname the instance labels end the set.
  std::string bare;
  write_prometheus_gpus(bare, s, "");
  EXPECT_TRUE(contains(bare, R"(GPU_I_PROFILE="3g.40gb",GPU_I_ID="2"} 14013)"));
}

TEST(Prometheus, AbsentReadingsHaveNoSample) {
  core::Snapshot s;
  s.backend = "nvml";
  s.gpus.push_back(h100(0));
  s.gpus.push_back(h100(1));
  s.gpus[1].uuid = "GPU-ffff";
  s.gpus[1].fan_pct = 55u;  // only GPU 1 has a fan reading
  s.gpus[0].temperature_c = core::Reading<int>::absent(core::Absent::Error);
  s.gpus[1].temperature_c = core::Reading<int>::absent(core::Absent::NoPermission);
  s.gpus[0].utilization_pct = core::Reading<unsigned>::absent(core::Absent::Unavailable);
  s.gpus[0].energy_mj = core::Reading<std::uint64_t>{};
  const std::string text = prometheus_text(s, "node-1", agent());

  const auto fan = lines_starting(text, "DCGM_FI_DEV_FAN_SPEED{");
  ASSERT_EQ(fan.size(), 1u);
  EXPECT_TRUE(fan[0].starts_with(R"(DCGM_FI_DEV_FAN_SPEED{gpu="1",)")) << fan[0];
  EXPECT_TRUE(fan[0].ends_with("} 55")) << fan[0];
  EXPECT_EQ(lines_starting(text, "# HELP DCGM_FI_DEV_FAN_SPEED ").size(), 1u);

  // Absent on every GPU: the whole family is left out, HELP and TYPE included.
  EXPECT_FALSE(contains(text, "DCGM_FI_DEV_GPU_TEMP"));

  const auto util = lines_starting(text, "DCGM_FI_DEV_GPU_UTIL{");
  ASSERT_EQ(util.size(), 1u);
  EXPECT_TRUE(util[0].starts_with(R"(DCGM_FI_DEV_GPU_UTIL{gpu="1",)")) << util[0];
  const auto energy = lines_starting(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{");
  ASSERT_EQ(energy.size(), 1u);
  EXPECT_TRUE(energy[0].starts_with(R"(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="1",)")) << energy[0];
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, LabelValuesAreEscaped) {
  core::Snapshot s = one_gpu();
  s.gpus[0].name = "Weird \"GPU\" C:\\dev\nline2";
  const std::string text = prometheus_text(s, "host\"x\\", agent());
  EXPECT_TRUE(contains(text, R"(modelName="Weird \"GPU\" C:\\dev\nline2")")) << text;
  EXPECT_TRUE(contains(text, R"(Hostname="host\"x\\")")) << text;
  EXPECT_FALSE(contains(text, "dev\nline2"));  // no raw newline inside a label value
  EXPECT_TRUE(valid_exposition(text));
}

struct PromCommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

class GlobalLocale {
 public:
  explicit GlobalLocale(const std::locale& l) : saved_(std::locale::global(l)) {}
  ~GlobalLocale() { std::locale::global(saved_); }
  GlobalLocale(const GlobalLocale&) = delete;
  GlobalLocale& operator=(const GlobalLocale&) = delete;

 private:
  std::locale saved_;
};

TEST(Prometheus, NumbersIgnoreTheGlobalLocale) {
  const std::string classic = prometheus_text(one_gpu(), "node-1", agent());
  std::string localized;
  {
    // A decimal comma and '.' thousands grouping, as de_DE has; iostreams made after this would print
    // 220.456 as "220,456" and 81559 as "81.559".
    GlobalLocale guard(std::locale(std::locale::classic(), new PromCommaDecimal));
    // Where the image has a decimal-comma C locale, printf-family code is tried too.
    const char* c_locale = nullptr;
    for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"})
      if ((c_locale = std::setlocale(LC_NUMERIC, name))) break;
    localized = prometheus_text(one_gpu(), "node-1", agent());
    std::setlocale(LC_NUMERIC, "C");
  }
  EXPECT_EQ(localized, classic);
  EXPECT_TRUE(contains(localized, "} 220.456\n"));
  EXPECT_TRUE(contains(localized, "} 81559\n"));
  EXPECT_TRUE(contains(localized, "} 0.0125\n"));
  EXPECT_FALSE(contains(localized, "220,456"));
}

TEST(Prometheus, LostGpuHasHealthAndNothingElse) {
  core::Snapshot s;
  s.backend = "nvml";
  s.gpus.push_back(h100(0));
  core::GpuReading lost;  // as the NVML backend builds it: identity and health only
  lost.index = 1;
  lost.uuid = "GPU-dead";
  lost.name = "NVIDIA H100 80GB HBM3";
  lost.pci_bus_id = "00000000:2B:00.0";
  lost.health = core::Health::Lost;
  lost.health_message = "GPU is lost";
  s.gpus.push_back(lost);
  core::GpuReading stale = h100(2);  // a backend that left old values on a lost GPU
  stale.uuid = "GPU-stale";
  stale.health = core::Health::Lost;
  s.gpus.push_back(stale);
  core::GpuReading broken = h100(3);  // Error is not Lost: what it did read is still exported
  broken.health = core::Health::Error;
  s.gpus.push_back(broken);
  const std::string text = prometheus_text(s, "node-1", agent());

  const auto health = lines_starting(text, "gpufleet_gpu_health{");
  ASSERT_EQ(health.size(), 4u);
  EXPECT_TRUE(health[0].starts_with(R"(gpufleet_gpu_health{gpu="0",)") && health[0].ends_with(R"(,state="ok"} 1)"))
      << health[0];
  EXPECT_TRUE(health[1].starts_with(R"(gpufleet_gpu_health{gpu="1",UUID="GPU-dead",)") &&
              health[1].ends_with(R"(,state="lost"} 1)"))
      << health[1];
  EXPECT_TRUE(health[2].ends_with(R"(,state="lost"} 1)")) << health[2];
  EXPECT_TRUE(health[3].ends_with(R"(,state="error"} 1)")) << health[3];

  const auto util = lines_starting(text, "DCGM_FI_DEV_GPU_UTIL{");
  ASSERT_EQ(util.size(), 2u);
  EXPECT_TRUE(util[0].starts_with(R"(DCGM_FI_DEV_GPU_UTIL{gpu="0",)")) << util[0];
  EXPECT_TRUE(util[1].starts_with(R"(DCGM_FI_DEV_GPU_UTIL{gpu="3",)")) << util[1];
  // The lost GPUs appear in the health family only.
  for (const std::string_view uuid : {"UUID=\"GPU-dead\"", "UUID=\"GPU-stale\""}) {
    std::size_t n = 0;
    for (std::size_t at = text.find(uuid); at != std::string::npos; at = text.find(uuid, at + 1)) ++n;
    EXPECT_EQ(n, 1u) << uuid;
  }
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, CountersEndInTotal) {
  const std::string text = prometheus_text(one_gpu(), "node-1", agent());
  std::set<std::string> counters;
  std::set<std::string> gauges;
  for (const auto& line : lines_starting(text, "# TYPE ")) {
    const std::string rest = line.substr(7);
    const auto sp = rest.find(' ');
    (rest.substr(sp + 1) == "counter" ? counters : gauges).insert(rest.substr(0, sp));
  }
  const std::set<std::string> expected_counters{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                                                "gpufleet_collections_total", "gpufleet_collection_errors_total",
                                                "gpufleet_jobs_finished_total"};
  EXPECT_EQ(counters, expected_counters);
  for (const auto& c : counters) {
    if (c.starts_with("gpufleet_")) {
      EXPECT_TRUE(c.ends_with("_total")) << c;
    }
  }
  for (const auto& g : gauges) EXPECT_FALSE(g.ends_with("_total")) << g << " is a gauge named like a counter";
}

TEST(Prometheus, SpecialAndLargeNumbers) {
  core::Snapshot s = one_gpu();
  s.gpus[0].power_draw_w = std::numeric_limits<double>::quiet_NaN();
  s.gpus[0].availability_score = 0.1;
  s.gpus[0].energy_mj = std::numeric_limits<std::uint64_t>::max();
  s.gpus[0].temperature_c = -12;
  AgentStats a = agent();
  a.uptime_seconds = std::numeric_limits<double>::infinity();
  a.last_collection_duration_seconds = -std::numeric_limits<double>::infinity();
  const std::string text = prometheus_text(s, "", a);
  EXPECT_TRUE(lines_starting(text, "DCGM_FI_DEV_POWER_USAGE{")[0].ends_with("} NaN"));
  EXPECT_TRUE(contains(text, "} 18446744073709551615\n"));  // exact, not 1.8446744073709552e+19
  EXPECT_TRUE(contains(text, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\","));
  EXPECT_TRUE(lines_starting(text, "DCGM_FI_DEV_GPU_TEMP{")[0].ends_with("} -12"));
  EXPECT_TRUE(lines_starting(text, "gpufleet_gpu_availability_score{")[0].ends_with("} 0.1"));
  EXPECT_EQ(lines_starting(text, "gpufleet_agent_uptime_seconds")[0], "gpufleet_agent_uptime_seconds +Inf");
  EXPECT_EQ(lines_starting(text, "gpufleet_collection_duration_seconds")[0],
            "gpufleet_collection_duration_seconds -Inf");
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, ShortestRoundTripDoubles) {
  for (const double v : {220.456, 0.1, 1e-7, 1e21, 123456789.125, 5e-324, 0.30000000000000004}) {
    core::Snapshot s = one_gpu();
    s.gpus[0].power_draw_w = v;
    const auto line = lines_starting(prometheus_text(s, "node-1", agent()), "DCGM_FI_DEV_POWER_USAGE{");
    ASSERT_EQ(line.size(), 1u);
    const std::string value = line[0].substr(line[0].rfind(' ') + 1);
    double back = 0;
    const auto r = std::from_chars(value.data(), value.data() + value.size(), back);
    EXPECT_TRUE(r.ec == std::errc() && r.ptr == value.data() + value.size()) << value;
    EXPECT_EQ(back, v) << value;
    EXPECT_LE(value.size(), 24u) << value;
  }
}

TEST(Prometheus, HostnameLeftOutWhenEmpty) {
  const std::string text = prometheus_text(one_gpu(), "", agent());
  EXPECT_FALSE(contains(text, "Hostname"));
  EXPECT_TRUE(contains(text, R"(modelName="NVIDIA H100 80GB HBM3"} 1980)")) << text;
  EXPECT_TRUE(contains(text, "\ngpufleet_leases_active 2\n"));
  EXPECT_TRUE(contains(text, "\ngpufleet_agent_info{version=\"0.1.0\",backend=\"nvml\"} 1\n"));
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, DeviceLabelFollowsTheBackend) {
  for (const auto& [backend, device] : std::vector<std::pair<std::string, std::string>>{
           {"nvml", "nvidia3"}, {"nvidia-smi", "nvidia3"}, {"sim", "nvidia3"}, {"amdgpu", "gpu3"}, {"none", "gpu3"}}) {
    core::Snapshot s;
    s.backend = backend;
    s.gpus.push_back(h100(3));
    const std::string text = prometheus_text(s, "node-1", agent());
    EXPECT_TRUE(
        contains(text, R"(gpu="3",UUID="GPU-0a1b2c3d",pci_bus_id="00000000:1B:00.0",device=")" + device + "\","))
        << backend;
  }
}

TEST(Prometheus, AgentBackendFallsBackToTheSnapshot) {
  AgentStats a = agent();
  a.backend.clear();
  core::Snapshot s = one_gpu();
  s.backend = "nvidia-smi";
  EXPECT_TRUE(contains(prometheus_text(s, "n", a), "gpufleet_agent_info{version=\"0.1.0\",backend=\"nvidia-smi\","));
}

TEST(Prometheus, NoGpusStillValid) {
  core::Snapshot s;
  s.backend = "none";
  const std::string text = prometheus_text(s, "node-1", agent());
  EXPECT_FALSE(contains(text, "DCGM_"));
  EXPECT_FALSE(contains(text, "gpufleet_gpu_"));
  EXPECT_TRUE(contains(text, "gpufleet_agent_info{"));
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, FamiliesInFixedOrderAcrossGpus) {
  core::Snapshot s;
  s.backend = "nvml";
  for (unsigned i = 0; i < 8; ++i) s.gpus.push_back(h100(i));
  s.gpus[5].uuid = "GPU-5";
  const std::string text = prometheus_text(s, "node-1", agent());
  EXPECT_EQ(text, prometheus_text(s, "node-1", agent()));
  // One HELP per family however many GPUs, each family's samples together, GPUs in snapshot order.
  EXPECT_EQ(lines_starting(text, "# HELP DCGM_FI_DEV_GPU_UTIL ").size(), 1u);
  const auto util = lines_starting(text, "DCGM_FI_DEV_GPU_UTIL{");
  ASSERT_EQ(util.size(), 8u);
  for (unsigned i = 0; i < 8; ++i)
    EXPECT_TRUE(util[i].starts_with("DCGM_FI_DEV_GPU_UTIL{gpu=\"" + std::to_string(i) + "\",")) << util[i];
  const std::vector<std::string_view> order{"# HELP DCGM_FI_DEV_SM_CLOCK ",
                                            "# HELP DCGM_FI_DEV_GPU_UTIL ",
                                            "# HELP DCGM_FI_DEV_MIG_MODE ",
                                            "# HELP gpufleet_gpu_health ",
                                            "# HELP gpufleet_gpu_memory_unattributed_mib ",
                                            "# HELP gpufleet_agent_info ",
                                            "# HELP gpufleet_websocket_clients "};
  std::size_t previous = 0;
  for (const auto& h : order) {
    const std::size_t at = text.find(h);
    ASSERT_NE(at, std::string::npos) << h;
    EXPECT_GE(at, previous) << h;
    previous = at;
  }
  EXPECT_TRUE(valid_exposition(text));
}

TEST(Prometheus, CheckerRejectsBadText) {
  // The checker above must be able to fail, or the valid_exposition assertions prove nothing.
  const std::string head = "# HELP x X.\n# TYPE x gauge\n";
  EXPECT_TRUE(valid_exposition(head + "x{a=\"b\"} 1\n"));
  EXPECT_FALSE(valid_exposition(head + "x 1"));                                // no final newline
  EXPECT_FALSE(valid_exposition(head + "x 1,5\n"));                            // decimal comma
  EXPECT_FALSE(valid_exposition(head + "x nan\n"));                            // NaN must be spelled NaN
  EXPECT_FALSE(valid_exposition(head + "x{a=\"b} 1\n"));                       // unterminated label value
  EXPECT_FALSE(valid_exposition(head + "x{a=\"b\\q\"} 1\n"));                  // bad escape
  EXPECT_FALSE(valid_exposition(head + "x{a=\"1\",a=\"2\"} 1\n"));             // label twice
  EXPECT_FALSE(valid_exposition(head + "x{1a=\"b\"} 1\n"));                    // bad label name
  EXPECT_FALSE(valid_exposition(head + "y 1\n"));                              // sample outside its family
  EXPECT_FALSE(valid_exposition(head + "x 1\nx 2\n"));                         // series twice
  EXPECT_FALSE(valid_exposition(head + "\nx 1\n"));                            // blank line
  EXPECT_FALSE(valid_exposition("# HELP x-y X.\n# TYPE x-y gauge\nx-y 1\n"));  // bad metric name
  EXPECT_FALSE(valid_exposition("# HELP x X.\n# TYPE x summary\nx 1\n"));
  EXPECT_FALSE(valid_exposition("# TYPE x gauge\nx 1\n"));  // TYPE without HELP
  EXPECT_FALSE(valid_exposition(head + head + "x 1\n"));    // family declared twice
}

}  // namespace
}  // namespace gf::wire
