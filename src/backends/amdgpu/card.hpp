#pragma once
// One amdgpu card in sysfs: finding the cards (discovery, once at open) and reading one (every
// snapshot). The sysfs root is a parameter so tests run on a fixture tree.
// Thread-safety: stateless functions; a CardInfo is plain data.
#include <string>
#include <vector>

#include "core/snapshot.hpp"

namespace gf::backends::amdgpu {

struct CardInfo {
  unsigned card_number = 0;  // N of /sys/class/drm/cardN
  std::string device_dir;    // <root>/sys/class/drm/cardN/device (through the links, as the kernel names it)
  std::string hwmon_dir;     // device/hwmon/hwmonM; empty when the card has none
  std::string pci_bus_id;    // "0000:03:00.0"
  std::string name;
  std::string uuid;
};

// The amdgpu cards under <sysfs_root>/sys/class/drm, ordered by card number. Skips connectors
// (card0-DP-1), render nodes (renderD128), other vendors and AMD devices bound to another driver
// (radeon, vfio-pci).
std::vector<CardInfo> discover_cards(const std::string& sysfs_root);

// Reads every metric of card. A metric whose file is missing is absent NotSupported; one whose file
// exists but cannot be read or parsed is absent Error (NoPermission when access is refused).
// A card whose device directory has disappeared gets health Error and a message.
core::GpuReading read_card(const CardInfo& card, unsigned index);

}  // namespace gf::backends::amdgpu
