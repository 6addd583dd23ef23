#include "backends/amdgpu/card.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "backends/amdgpu/sysfs_text.hpp"
#include "backends/drm/sysfs.hpp"
#include "platform/fs.hpp"

namespace gf::backends::amdgpu {
namespace {

using core::Absent;
using core::Reading;

using drm::read_integer;
using drm::read_parsed;
using drm::transform;

constexpr unsigned kAmdVendorId = 0x1002;
// pwm1_max is 255 on every amdgpu board; the hwmon ABI makes 255 the default when it is absent.
constexpr std::uint64_t kDefaultPwmMax = 255;

// ---- the metrics --------------------------------------------------------------------------------

Reading<unsigned> read_percent(const std::string& path) {
  return transform<unsigned>(read_integer<unsigned>(path),
                             [](unsigned v) { return v <= 100 ? std::optional<unsigned>(v) : std::nullopt; });
}

std::optional<std::uint64_t> to_mib(std::uint64_t bytes) { return bytes >> 20; }

void read_memory(const CardInfo& card, core::GpuReading& g) {
  g.memory_total_mib =
      transform<std::uint64_t>(read_integer<std::uint64_t>(card.device_dir + "/mem_info_vram_total"), to_mib);
  g.memory_used_mib =
      transform<std::uint64_t>(read_integer<std::uint64_t>(card.device_dir + "/mem_info_vram_used"), to_mib);
  // Free is derived in MiB so that total = used + free holds exactly in every table we print.
  if (g.memory_total_mib && g.memory_used_mib) {
    if (*g.memory_used_mib <= *g.memory_total_mib) {
      g.memory_free_mib = *g.memory_total_mib - *g.memory_used_mib;
    } else {
      g.memory_free_mib = Reading<std::uint64_t>::absent(Absent::Error);
    }
  } else {
    g.memory_free_mib =
        Reading<std::uint64_t>::absent(!g.memory_total_mib ? g.memory_total_mib.why() : g.memory_used_mib.why());
  }
}

Reading<int> read_temperature(const CardInfo& card) {
  if (card.hwmon_dir.empty()) return Reading<int>::absent(Absent::NotSupported);
  // amdgpu's temp1 is always the "edge" sensor (temp2 junction and temp3 mem exist on newer boards);
  // edge is what every other tool shows as "the" GPU temperature.
  return transform<int>(read_integer<long long>(card.hwmon_dir + "/temp1_input"),
                        [](long long milli) -> std::optional<int> {
                          // Outside -273..1000 °C the sensor read is garbled; no int overflow past this check.
                          if (milli < -273'000 || milli > 1'000'000) return std::nullopt;
                          return static_cast<int>(std::lround(static_cast<double>(milli) / 1000.0));
                        });
}

std::optional<double> microwatts_to_watts(std::uint64_t uw) { return static_cast<double>(uw) / 1e6; }

Reading<double> read_power_draw(const CardInfo& card) {
  if (card.hwmon_dir.empty()) return Reading<double>::absent(Absent::NotSupported);
  // power1_average is the SMU's smoothed value on most boards; newer SMU firmware (RDNA3, some APUs)
  // only exposes an instantaneous power1_input. Prefer the average, as the driver's own tools do.
  const auto avg = read_integer<std::uint64_t>(card.hwmon_dir + "/power1_average");
  if (avg) return transform<double>(avg, microwatts_to_watts);
  const auto input = read_integer<std::uint64_t>(card.hwmon_dir + "/power1_input");
  if (input) return transform<double>(input, microwatts_to_watts);
  // Neither has a value: report the more telling reason (an error beats "not supported").
  return Reading<double>::absent(avg.why() != Absent::NotSupported ? avg.why() : input.why());
}

Reading<double> read_power_limit(const CardInfo& card) {
  if (card.hwmon_dir.empty()) return Reading<double>::absent(Absent::NotSupported);
  return transform<double>(read_integer<std::uint64_t>(card.hwmon_dir + "/power1_cap"), microwatts_to_watts);
}

Reading<unsigned> read_fan(const CardInfo& card) {
  if (card.hwmon_dir.empty()) return Reading<unsigned>::absent(Absent::NotSupported);
  // APUs and passively cooled boards (MI accelerators) have no pwm1 at all.
  const auto pwm = read_integer<std::uint64_t>(card.hwmon_dir + "/pwm1");
  if (!pwm && pwm.why() == Absent::NotSupported) return Reading<unsigned>::absent(Absent::NotSupported);
  // fan1_enable 0 means the driver has switched the fan sensor off: pwm1 then holds a stale value.
  const auto enabled = read_integer<unsigned>(card.hwmon_dir + "/fan1_enable");
  if (enabled && *enabled == 0) return Reading<unsigned>::absent(Absent::Unavailable);
  if (!pwm) return Reading<unsigned>::absent(pwm.why());
  auto max = read_integer<std::uint64_t>(card.hwmon_dir + "/pwm1_max");
  if (!max && max.why() == Absent::NotSupported) max = kDefaultPwmMax;
  if (!max) return Reading<unsigned>::absent(max.why());
  // pwm and max are at most a page of digits but may be near 2^64: bound them before multiplying.
  if (*max == 0 || *max > 0xFFFF'FFFF || *pwm > *max) return Reading<unsigned>::absent(Absent::Error);
  return static_cast<unsigned>((*pwm * 100 + *max / 2) / *max);
}

Reading<unsigned> read_dpm_clock(const std::string& path) { return read_parsed<unsigned>(path, parse_dpm_current_mhz); }

// Sets every metric to absent Error: the card's directory has gone, nothing was read.
void mark_all_failed(core::GpuReading& g) {
  const auto err = Absent::Error;
  g.memory_total_mib = g.memory_used_mib = g.memory_free_mib = Reading<std::uint64_t>::absent(err);
  g.utilization_pct = g.memory_utilization_pct = g.fan_pct = Reading<unsigned>::absent(err);
  g.clock_graphics_mhz = g.clock_memory_mhz = Reading<unsigned>::absent(err);
  g.temperature_c = Reading<int>::absent(err);
  g.power_draw_w = g.power_limit_w = Reading<double>::absent(err);
  g.ecc_uncorrected_volatile = Reading<std::uint64_t>::absent(err);
}

// ---- discovery ----------------------------------------------------------------------------------

std::string card_name(const std::string& device_dir) {
  // product_name comes from the board's FRU EEPROM; many consumer boards have none and the file
  // then reads empty.
  if (auto p = platform::read_line(device_dir + "/product_name"); p && !p->empty()) return *p;
  if (const auto id = platform::read_int(device_dir + "/device"); id && *id >= 0 && *id <= 0xFFFF)
    return fmt::format("AMD GPU [1002:{:04x}]", *id);
  return "AMD GPU";
}

std::string card_uuid(const std::string& device_dir, const std::string& bus_id) {
  // unique_id is the chip's serial (Vega10 and later with a new enough SMU).
  if (auto id = platform::read_line(device_dir + "/unique_id"); id && !id->empty()) return "AMD-" + *id;
  // Without it there is no hardware identity to be had: derive one from the PCI address. It is
  // stable across reboots but follows the slot, not the board (a moved card changes "uuid").
  return "AMD-PCI-" + bus_id;
}

}  // namespace

std::vector<CardInfo> discover_cards(const std::string& sysfs_root) {
  std::vector<CardInfo> cards;
  // An AMD GPU may be bound to radeon (pre-GCN boards) or vfio-pci (passed to a VM): not ours to read.
  for (drm::DrmCard& d : drm::list_cards(sysfs_root, kAmdVendorId, {"amdgpu"})) {
    CardInfo c;
    c.card_number = d.card_number;
    c.device_dir = std::move(d.device_dir);
    c.pci_bus_id = std::move(d.pci_bus_id);
    c.hwmon_dir = std::move(d.hwmon_dir);
    c.name = card_name(c.device_dir);
    c.uuid = card_uuid(c.device_dir, c.pci_bus_id);
    cards.push_back(std::move(c));
  }
  return cards;
}

core::GpuReading read_card(const CardInfo& card, unsigned index) {
  core::GpuReading g;
  g.index = index;
  g.uuid = card.uuid;
  g.name = card.name;
  g.pci_bus_id = card.pci_bus_id;

  // Every amdgpu device directory has vendor; when it is gone, the card was unplugged or the driver
  // unbound since discovery. Checked again after reading: a card that vanishes midway would
  // otherwise look like one that merely lacks some sensors.
  const std::string vendor = card.device_dir + "/vendor";
  const auto vanished = [&] { return !platform::exists(vendor); };
  if (vanished()) {
    mark_all_failed(g);
    g.health = core::Health::Error;
    g.health_message =
        fmt::format("amdgpu: card{} ({}) is gone from sysfs ({} not found)", card.card_number, card.pci_bus_id, vendor);
    return g;
  }

  g.utilization_pct = read_percent(card.device_dir + "/gpu_busy_percent");
  g.memory_utilization_pct = read_percent(card.device_dir + "/mem_busy_percent");
  read_memory(card, g);
  g.temperature_c = read_temperature(card);
  g.power_draw_w = read_power_draw(card);
  g.power_limit_w = read_power_limit(card);
  g.fan_pct = read_fan(card);
  g.clock_graphics_mhz = read_dpm_clock(card.device_dir + "/pp_dpm_sclk");
  g.clock_memory_mhz = read_dpm_clock(card.device_dir + "/pp_dpm_mclk");
  g.ecc_uncorrected_volatile =
      read_parsed<std::uint64_t>(card.device_dir + "/ras/umc_err_count", parse_ras_uncorrectable);
  // power_dpm_force_performance_level ("auto", "high", "manual") is a policy, not a P-state, so
  // performance_state stays absent, as do the NVIDIA-only fields (MIG, persistence, clock events).

  if (vanished()) {
    mark_all_failed(g);
    g.health = core::Health::Error;
    g.health_message =
        fmt::format("amdgpu: card{} ({}) disappeared from sysfs while being read", card.card_number, card.pci_bus_id);
  }
  return g;
}

}  // namespace gf::backends::amdgpu
