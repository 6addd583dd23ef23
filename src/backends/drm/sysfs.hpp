#pragma once
// Reading a DRM card's sysfs, for every backend that reads one (amdgpu, intel): finding the cards,
// and turning a file into a Reading with the reason it may be missing. The sysfs root is a parameter
// so tests run on a fixture tree. Thread-safety: stateless functions.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/drm/text_util.hpp"
#include "core/reading.hpp"
#include "core/text.hpp"

namespace gf::backends::drm {

// Sysfs attributes are at most a page.
inline constexpr std::size_t kMaxSysfsBytes = 4096;

// A file's text, or why there is none.
struct FileText {
  std::optional<std::string> text;
  core::Absent why = core::Absent::NotSupported;
};

// A missing file is NotSupported (DRM drivers hide attributes a board lacks); a file that is there
// but cannot be read is NoPermission when access is refused, else Error (the driver said no:
// EOPNOTSUPP from firmware without that sensor, EBUSY during a reset).
FileText read_sysfs(const std::string& path);

// Applies f (returning std::optional<U>) to a present reading; nullopt becomes Error.
template <class U, class T, class F>
core::Reading<U> transform(const core::Reading<T>& r, F f) {
  if (!r) return core::Reading<U>::absent(r.why());
  if (const std::optional<U> v = f(*r)) return *v;
  return core::Reading<U>::absent(core::Absent::Error);
}

// A file that holds one decimal integer of type T; unparsable text is an Error.
template <class T>
core::Reading<T> read_integer(const std::string& path) {
  const FileText f = read_sysfs(path);
  if (!f.text) return core::Reading<T>::absent(f.why);
  if (const auto v = text::parse_decimal<T>(core::trim(*f.text))) return *v;
  return core::Reading<T>::absent(core::Absent::Error);
}

// A file whose text a pure parser turns into a value; a parse failure is an Error.
template <class T, class Parse>
core::Reading<T> read_parsed(const std::string& path, Parse parse) {
  const FileText f = read_sysfs(path);
  if (!f.text) return core::Reading<T>::absent(f.why);
  if (const auto v = parse(*f.text)) return static_cast<T>(*v);
  return core::Reading<T>::absent(core::Absent::Error);
}

// The last component of a path ("../../bus/pci/drivers/xe" -> "xe").
std::string_view basename(std::string_view path) noexcept;

// One /sys/class/drm/cardN of a PCI GPU.
struct DrmCard {
  unsigned card_number = 0;  // N of cardN
  std::string card_dir;      // <root>/sys/class/drm/cardN
  std::string device_dir;    // card_dir + "/device" (the PCI device, through the link)
  std::string hwmon_dir;     // device/hwmon/hwmonM; empty when the card has none
  std::string pci_bus_id;    // "0000:03:00.0", from the device link's target
  std::string driver;        // the bound driver's name; empty when the tree has no driver link
  unsigned device_id = 0;    // PCI device id, 0 when unreadable
};

// The cards under <sysfs_root>/sys/class/drm whose PCI vendor is vendor_id and whose bound driver is
// one of drivers, ordered by card number. Skips connectors (card0-DP-1), render nodes (renderD128)
// and devices bound to another driver (vfio-pci, radeon); a tree without the driver link (a
// hand-made fixture) is taken on the vendor alone.
std::vector<DrmCard> list_cards(const std::string& sysfs_root, unsigned vendor_id,
                                const std::vector<std::string>& drivers);

}  // namespace gf::backends::drm
