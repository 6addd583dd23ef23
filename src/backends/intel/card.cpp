#include "backends/intel/card.hpp"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/core.h>

#include "backends/drm/drm_clients.hpp"
#include "backends/intel/device_names.hpp"
#include "core/fields.hpp"
#include "platform/fs.hpp"

namespace gf::backends::intel {
namespace {

using core::Absent;
using core::Reading;
using drm::read_integer;
using drm::transform;

constexpr unsigned kIntelVendorId = 0x8086;

// Numbered subdirectories "<prefix>N" of dir, by N: tile0, tile1 / gt0, gt1.
std::vector<std::string> numbered(const std::string& dir, std::string_view prefix) {
  std::vector<std::pair<unsigned, std::string>> found;
  for (const auto& n : platform::list_dir(dir)) {
    if (!n.starts_with(prefix)) continue;
    if (const auto i = drm::text::parse_decimal<unsigned>(std::string_view(n).substr(prefix.size())))
      found.emplace_back(*i, dir + "/" + n);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void find_frequency_files(CardInfo& c) {
  if (c.driver == Driver::Xe) {
    // xe (Documentation/ABI/testing/sysfs-driver-intel-xe-gt, xe_gt_freq.c): device/tile<T>/gt<G>/freq0/
    // {act_freq,cur_freq,max_freq,min_freq,rp0_freq}. tile0/gt0 is the graphics GT; a media GT (gt1 on
    // Meteor Lake and later) has its own, which is not "the" GPU clock.
    for (const auto& tile : numbered(c.drm.device_dir, "tile"))
      for (const auto& gt : numbered(tile, "gt"))
        if (platform::exists(gt + "/freq0/act_freq")) {
          c.act_freq_file = gt + "/freq0/act_freq";
          c.max_freq_file = gt + "/freq0/max_freq";
          return;
        }
    return;
  }
  // i915 (intel_gt_sysfs_pm.c): cardN/gt_act_freq_mhz and gt_max_freq_mhz for the first GT, and
  // cardN/gt/gt<G>/rps_act_freq_mhz, rps_max_freq_mhz per GT since 5.17. The card-level files are the older and more
  // common.
  if (platform::exists(c.drm.card_dir + "/gt_act_freq_mhz")) {
    c.act_freq_file = c.drm.card_dir + "/gt_act_freq_mhz";
    c.max_freq_file = c.drm.card_dir + "/gt_max_freq_mhz";
    return;
  }
  for (const auto& gt : numbered(c.drm.card_dir + "/gt", "gt"))
    if (platform::exists(gt + "/rps_act_freq_mhz")) {
      c.act_freq_file = gt + "/rps_act_freq_mhz";
      c.max_freq_file = gt + "/rps_max_freq_mhz";
      return;
    }
}

void find_power_files(CardInfo& c) {
  if (c.drm.hwmon_dir.empty()) return;  // integrated GPUs have no hwmon of their own
  // Channel 1 is the card (i915 discrete; xe), channel 2 the package (xe on Battlemage and later);
  // take the card where it exists, and the limit of the same channel as the energy.
  for (const char* ch : {"1", "2"}) {
    const std::string energy = fmt::format("{}/energy{}_input", c.drm.hwmon_dir, ch);
    if (!platform::exists(energy)) continue;
    c.energy_file = energy;
    c.power_limit_file = fmt::format("{}/power{}_max", c.drm.hwmon_dir, ch);
    return;
  }
  c.power_limit_file = c.drm.hwmon_dir + "/power1_max";
}

Reading<unsigned> read_mhz(const std::string& path) {
  if (path.empty()) return Reading<unsigned>::absent(Absent::NotSupported);
  return read_integer<unsigned>(path);
}

void read_memory(const CardInfo& card, core::GpuReading& g) {
  // An integrated GPU has no memory of its own: it allocates from system RAM (its processes' use is in
  // their drm-total-* keys). Neither driver publishes the VRAM in use in sysfs (xe has it only through
  // an ioctl), so used and free stay absent even where the total is known.
  if (card.vram_files.empty()) {
    g.memory_total_mib = g.memory_used_mib = g.memory_free_mib = Reading<std::uint64_t>::absent(Absent::NotSupported);
    return;
  }
  std::uint64_t bytes = 0;
  for (const auto& f : card.vram_files) {
    const auto tile = read_integer<std::uint64_t>(f);
    if (!tile) {
      g.memory_total_mib =
          Reading<std::uint64_t>::absent(tile.why() == Absent::NotSupported ? Absent::Error : tile.why());
      break;
    }
    bytes = drm::saturating_add(bytes, *tile);
    g.memory_total_mib = bytes >> 20;
  }
  g.memory_used_mib = g.memory_free_mib = Reading<std::uint64_t>::absent(Absent::NotSupported);
}

Reading<double> read_power_limit(const CardInfo& card) {
  if (card.power_limit_file.empty()) return Reading<double>::absent(Absent::NotSupported);
  const auto uw = read_integer<std::uint64_t>(card.power_limit_file);
  // 0 is how the hwmon ABI shows a limit that is switched off: there is no limit to report.
  if (uw && *uw == 0) return Reading<double>::absent(Absent::NotSupported);
  return transform<double>(uw, [](std::uint64_t v) { return std::optional<double>(static_cast<double>(v) / 1e6); });
}

}  // namespace

std::vector<CardInfo> discover_cards(const std::string& sysfs_root) {
  std::vector<CardInfo> cards;
  for (drm::DrmCard& d : drm::list_cards(sysfs_root, kIntelVendorId, {"i915", "xe"})) {
    CardInfo c;
    c.drm = std::move(d);
    c.driver = c.drm.driver == "xe" || (c.drm.driver.empty() && platform::exists(c.drm.device_dir + "/tile0"))
                   ? Driver::Xe
                   : Driver::I915;
    c.name = device_name(c.drm.device_id);
    // Intel GPUs publish no serial or UUID in sysfs: the PCI address stands in. It is stable across
    // reboots but follows the slot, not the board.
    c.uuid = "INTEL-PCI-" + c.drm.pci_bus_id;
    find_frequency_files(c);
    find_power_files(c);
    if (c.driver == Driver::Xe)
      for (const auto& tile : numbered(c.drm.device_dir, "tile"))
        if (platform::exists(tile + "/physical_vram_size_bytes"))
          c.vram_files.push_back(tile + "/physical_vram_size_bytes");
    cards.push_back(std::move(c));
  }
  return cards;
}

core::Reading<std::uint64_t> read_energy_uj(const CardInfo& card) {
  if (card.energy_file.empty()) return Reading<std::uint64_t>::absent(Absent::NotSupported);
  return read_integer<std::uint64_t>(card.energy_file);
}

bool card_present(const CardInfo& card) { return platform::exists(card.drm.device_dir + "/vendor"); }

void mark_gone(const CardInfo& card, core::GpuReading& g, const char* when) {
  using core::Field;
  for (const Field f : {Field::MemoryTotal, Field::MemoryUsed, Field::MemoryFree, Field::Utilization,
                        Field::MemoryUtilization, Field::Temperature, Field::PowerDraw, Field::PowerLimit, Field::Fan,
                        Field::SmClock, Field::MemClock, Field::SmClockMax, Field::Energy})
    core::info(f).mark_absent(g, Absent::Error);
  g.health = core::Health::Error;
  g.health_message = fmt::format("intel: card{} ({}) {} sysfs", card.drm.card_number, card.drm.pci_bus_id, when);
}

bool read_card(const CardInfo& card, unsigned index, core::GpuReading& g) {
  g.index = index;
  g.uuid = card.uuid;
  g.name = card.name;
  g.pci_bus_id = card.drm.pci_bus_id;
  if (!card_present(card)) {
    mark_gone(card, g, "is gone from");
    return false;
  }
  read_memory(card, g);
  g.clock_graphics_mhz = read_mhz(card.act_freq_file);
  g.clock_graphics_max_mhz = read_mhz(card.max_freq_file);
  g.power_limit_w = read_power_limit(card);
  // Neither driver has a memory-bandwidth busy figure, a fan percentage or (before xe on Battlemage)
  // a GPU temperature in sysfs.
  g.memory_utilization_pct = g.fan_pct = Reading<unsigned>::absent(Absent::NotSupported);
  g.clock_memory_mhz = Reading<unsigned>::absent(Absent::NotSupported);
  g.temperature_c = Reading<int>::absent(Absent::NotSupported);
  return true;
}

}  // namespace gf::backends::intel
