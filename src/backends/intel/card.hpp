#pragma once
// One Intel GPU in sysfs, on the i915 or the xe kernel driver: finding the cards (once, at open) and
// reading what sysfs says of one (every collection). What needs two collections (power from the
// energy counter, engine busy from fdinfo) is the backend's (intel_backend.cpp, engine_usage.hpp).
// Thread-safety: stateless functions; a CardInfo is plain data.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/drm/sysfs.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::intel {

enum class Driver : unsigned char { I915, Xe };

struct CardInfo {
  drm::DrmCard drm;
  Driver driver = Driver::I915;
  std::string name;
  std::string uuid;
  // Found once at discovery; empty when the card has none.
  std::string act_freq_file;            // MHz the GT runs at now
  std::string max_freq_file;            // MHz the GT may run at, at most (the limit in force)
  std::vector<std::string> vram_files;  // xe: tile*/physical_vram_size_bytes (discrete cards only)
  std::string energy_file;              // hwmon energy<N>_input, µJ
  std::string power_limit_file;         // hwmon power<N>_max, µW (the same channel as energy)
};

// The Intel (vendor 0x8086) cards bound to i915 or xe under <sysfs_root>/sys/class/drm, by card
// number. A tree without a driver link is read as xe when the device has tile directories.
std::vector<CardInfo> discover_cards(const std::string& sysfs_root);

// The energy counter as read now: µJ since the driver loaded, or why there is none.
core::Reading<std::uint64_t> read_energy_uj(const CardInfo& card);

// Reads identity, memory, clocks and the power limit of card into a reading. A metric whose file is
// missing is absent NotSupported; one whose file cannot be read or parsed is absent Error
// (NoPermission when access is refused). Utilization and power draw are left for the caller.
// Returns false (and marks the reading Error, with a message) when the card has gone from sysfs.
bool read_card(const CardInfo& card, unsigned index, core::GpuReading& g);

// Whether the card's device directory still exists (unplugged or unbound when not).
bool card_present(const CardInfo& card);

// Marks every metric this backend reads absent Error and the GPU in error: the card has gone.
void mark_gone(const CardInfo& card, core::GpuReading& g, const char* when);

}  // namespace gf::backends::intel
