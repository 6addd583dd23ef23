#include "backends/drm/sysfs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "platform/fs.hpp"

namespace gf::backends::drm {
namespace {

// N of "cardN"; nullopt for connectors ("card0-DP-1"), render nodes and anything else.
std::optional<unsigned> card_number(std::string_view name) {
  if (!name.starts_with("card")) return std::nullopt;
  return text::parse_decimal<unsigned>(name.substr(4));
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
  // A DRM driver registers one hwmon device per GPU; its number depends on probe order.
  for (const auto& n : platform::list_dir(device_dir + "/hwmon"))
    if (n.starts_with("hwmon")) return device_dir + "/hwmon/" + n;
  return {};
}

}  // namespace

FileText read_sysfs(const std::string& path) {
  if (auto s = platform::read_file(path, kMaxSysfsBytes)) return {std::move(s), core::Absent::NotSupported};
  if (!platform::exists(path)) return {std::nullopt, core::Absent::NotSupported};
  if (::access(path.c_str(), R_OK) != 0 && errno == EACCES) return {std::nullopt, core::Absent::NoPermission};
  return {std::nullopt, core::Absent::Error};
}

std::string_view basename(std::string_view path) noexcept {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::vector<DrmCard> list_cards(const std::string& sysfs_root, unsigned vendor_id,
                                const std::vector<std::string>& drivers) {
  const std::string drm_dir = platform::under_root(sysfs_root, "/sys/class/drm");
  std::vector<DrmCard> cards;
  for (const auto& entry : platform::list_dir(drm_dir)) {
    const auto number = card_number(entry);
    if (!number) continue;
    DrmCard c;
    c.card_number = *number;
    c.card_dir = drm_dir + "/" + entry;
    c.device_dir = c.card_dir + "/device";
    if (platform::read_int(c.device_dir + "/vendor") != static_cast<long long>(vendor_id)) continue;
    if (const auto driver = platform::read_link(c.device_dir + "/driver")) {
      c.driver = std::string(basename(*driver));
      if (std::find(drivers.begin(), drivers.end(), c.driver) == drivers.end()) continue;
    }
    if (const auto id = platform::read_int(c.device_dir + "/device"); id && *id >= 0 && *id <= 0xFFFF)
      c.device_id = static_cast<unsigned>(*id);
    c.pci_bus_id = pci_bus_id(c.device_dir);
    c.hwmon_dir = find_hwmon(c.device_dir);
    cards.push_back(std::move(c));
  }
  // list_dir sorts by name, which puts card10 before card2.
  std::sort(cards.begin(), cards.end(),
            [](const DrmCard& a, const DrmCard& b) { return a.card_number < b.card_number; });
  return cards;
}

}  // namespace gf::backends::drm
