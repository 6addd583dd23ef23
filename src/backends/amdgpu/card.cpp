#include "backends/amdgpu/card.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/core.h>

#include "backends/amdgpu/sysfs_text.hpp"
#include "backends/amdgpu/text_util.hpp"
#include "platform/fs.hpp"

namespace gf::backends::amdgpu {
namespace {

using core::Absent;
using core::Reading;

constexpr long long kAmdVendorId = 0x1002;
// pwm1_max is 255 on every amdgpu board; the hwmon ABI makes 255 the default when it is absent.
constexpr std::uint64_t kDefaultPwmMax = 255;
// Sysfs attributes are at most a page; the pp_dpm tables are a few hundred bytes.
constexpr std::size_t kMaxSysfsBytes = 4096;

// ---- reading files ------------------------------------------------------------------------------

// A file's text, or why there is none.
struct FileText {
  std::optional<std::string> text;
  Absent why = Absent::NotSupported;
};

FileText read_sysfs(const std::string& path) {
  if (auto s = platform::read_file(path, kMaxSysfsBytes)) return {std::move(s), Absent::NotSupported};
  // amdgpu hides attributes a board lacks, so a missing file means "not supported". A file that is
  // there but fails to read is either refused to us or the driver said no (EOPNOTSUPP from firmware
  // without that sensor, EBUSY during a reset): an error, not a fact about the board.
  if (!platform::exists(path)) return {std::nullopt, Absent::NotSupported};
  if (::access(path.c_str(), R_OK) != 0 && errno == EACCES) return {std::nullopt, Absent::NoPermission};
  return {std::nullopt, Absent::Error};
}

// A file that holds one decimal integer of type T.
template <class T>
Reading<T> read_integer(const std::string& path) {
  const FileText f = read_sysfs(path);
  if (!f.text) return Reading<T>::absent(f.why);
  if (const auto v = text::parse_decimal<T>(text::trim(*f.text))) return *v;
  return Reading<T>::absent(Absent::Error);
}

// A file whose text a pure parser turns into a value; a parse failure is an Error.
template <class T, class Parse>
Reading<T> read_parsed(const std::string& path, Parse parse) {
  const FileText f = read_sysfs(path);
  if (!f.text) return Reading<T>::absent(f.why);
  if (const auto v = parse(*f.text)) return static_cast<T>(*v);
  return Reading<T>::absent(Absent::Error);
}

// Applies f (returning std::optional<U>) to a present reading; nullopt becomes Error.
template <class U, class T, class F>
Reading<U> transform(const Reading<T>& r, F f) {
  if (!r) return Reading<U>::absent(r.why());
  if (const std::optional<U> v = f(*r)) return *v;
  return Reading<U>::absent(Absent::Error);
}

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

// N of "cardN"; nullopt for connectors ("card0-DP-1"), render nodes and anything else.
std::optional<unsigned> card_number(std::string_view name) {
  if (!name.starts_with("card")) return std::nullopt;
  return text::parse_decimal<unsigned>(name.substr(4));
}

std::string_view basename(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The PCI address is the name of the directory the device link points to
// (device -> ../../../0000:03:00.0). canonical() also resolves the class link in front of it.
std::string pci_bus_id(const std::string& device_dir) {
  std::error_code ec;
  const auto real = std::filesystem::canonical(device_dir, ec);
  if (!ec) return real.filename().string();
  if (const auto link = platform::read_link(device_dir)) return std::string(basename(*link));
  return {};
}

std::string find_hwmon(const std::string& device_dir) {
  // amdgpu registers exactly one hwmon device per GPU; its number depends on probe order.
  for (const auto& n : platform::list_dir(device_dir + "/hwmon"))
    if (n.starts_with("hwmon")) return device_dir + "/hwmon/" + n;
  return {};
}

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
  const std::string drm_dir = platform::under_root(sysfs_root, "/sys/class/drm");
  std::vector<CardInfo> cards;
  for (const auto& entry : platform::list_dir(drm_dir)) {
    const auto number = card_number(entry);
    if (!number) continue;
    CardInfo c;
    c.card_number = *number;
    c.device_dir = drm_dir + "/" + entry + "/device";
    if (platform::read_int(c.device_dir + "/vendor") != kAmdVendorId) continue;
    // An AMD GPU may be bound to radeon (pre-GCN boards) or vfio-pci (passed to a VM): not ours
    // to read. A tree without the driver link (a hand-made fixture) is taken on the vendor alone.
    if (const auto driver = platform::read_link(c.device_dir + "/driver"); driver && basename(*driver) != "amdgpu")
      continue;
    c.pci_bus_id = pci_bus_id(c.device_dir);
    c.hwmon_dir = find_hwmon(c.device_dir);
    c.name = card_name(c.device_dir);
    c.uuid = card_uuid(c.device_dir, c.pci_bus_id);
    cards.push_back(std::move(c));
  }
  // list_dir sorts by name, which puts card10 before card2.
  std::sort(cards.begin(), cards.end(),
            [](const CardInfo& a, const CardInfo& b) { return a.card_number < b.card_number; });
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
