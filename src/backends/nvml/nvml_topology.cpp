#include "backends/nvml/nvml_topology.hpp"

#include <algorithm>
#include <optional>

namespace gf::backends::nvml {
namespace {

// A PCI function's address without the function number: every NVIDIA GPU is function 0, and the
// remote-PCI structs give numbers, so GPUs are matched on numbers rather than on bus-id strings
// (which differ in case and domain width between the struct layouts).
struct PciAddress {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  friend bool operator==(const PciAddress&, const PciAddress&) = default;
};

std::optional<PciAddress> own_address(const Api& api, Device device) {
  if (api.pci_info) {
    PciInfo info{};
    if (api.pci_info(device, &info) == kSuccess) return PciAddress{info.domain, info.bus, info.device};
  }
  if (api.pci_info_legacy) {
    PciInfoLegacy info{};
    if (api.pci_info_legacy(device, &info) == kSuccess) return PciAddress{info.domain, info.bus, info.device};
  }
  return std::nullopt;
}

// The PCI address at the far end of an active link (a GPU, or an NVSwitch / CPU we do not index).
std::optional<PciAddress> remote_address(const Api& api, Device device, unsigned link) {
  if (api.nvlink_remote_pci) {
    PciInfo info{};
    if (api.nvlink_remote_pci(device, link, &info) == kSuccess) return PciAddress{info.domain, info.bus, info.device};
    return std::nullopt;
  }
  if (api.nvlink_remote_pci_legacy) {
    PciInfoLegacy info{};
    if (api.nvlink_remote_pci_legacy(device, link, &info) == kSuccess)
      return PciAddress{info.domain, info.bus, info.device};
  }
  return std::nullopt;
}

void read_levels(const Api& api, const std::vector<Device>& devices, core::Topology& topo) {
  if (!api.topology_common_ancestor) return;
  const auto n = static_cast<unsigned>(devices.size());
  for (unsigned a = 0; a < n; ++a) {
    if (!devices[a]) continue;
    for (unsigned b = a + 1; b < n; ++b) {
      if (!devices[b]) continue;
      // Any failure (NOT_SUPPORTED, a GPU lost since its handle was taken, …) leaves the pair
      // Unknown; NVML does not say which of the two failed, so the other pairs are still asked.
      int level = -1;
      if (api.topology_common_ancestor(devices[a], devices[b], &level) == kSuccess)
        topo.set_level(a, b, link_level_from_nvml(level));
    }
  }
}

void read_nvlinks(const Api& api, const std::vector<Device>& devices, core::Topology& topo) {
  if (!api.nvlink_state || (!api.nvlink_remote_pci && !api.nvlink_remote_pci_legacy)) return;
  const auto n = static_cast<unsigned>(devices.size());
  std::vector<std::optional<PciAddress>> addresses(n);
  for (unsigned i = 0; i < n; ++i)
    if (devices[i]) addresses[i] = own_address(api, devices[i]);

  // links[i * n + j]: active links GPU i reports towards GPU j.
  std::vector<unsigned> links(static_cast<std::size_t>(n) * n, 0);
  for (unsigned i = 0; i < n; ++i) {
    if (!devices[i]) continue;
    for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
      int active = 0;
      const Return r = api.nvlink_state(devices[i], link, &active);
      // NOT_SUPPORTED: no NvLink on this GPU (asked at link 0) or on this link; INVALID_ARGUMENT:
      // past the GPU's last link (an A100 has 12, an H100 18); a lost GPU has nothing more to say.
      if (r == kErrorGpuIsLost || r == kErrorResetRequired || r == kErrorInvalidArgument) break;
      if (r == kErrorNotSupported && link == 0) break;
      if (r != kSuccess || active != kFeatureEnabled) continue;
      const auto remote = remote_address(api, devices[i], link);
      if (!remote) continue;
      // A link to an NVSwitch or a CPU matches no GPU and is not counted (see the report: switch
      // fabrics make every pair equal, which "no NvLink" also expresses).
      for (unsigned j = 0; j < n; ++j) {
        if (j != i && addresses[j] && *addresses[j] == *remote) {
          ++links[static_cast<std::size_t>(i) * n + j];
          break;
        }
      }
    }
  }
  // Each link is seen from both ends; when one end could not be read, trust the other.
  auto seen = [&](unsigned from, unsigned to) { return links[static_cast<std::size_t>(from) * n + to]; };
  for (unsigned a = 0; a < n; ++a)
    for (unsigned b = a + 1; b < n; ++b)
      if (const unsigned count = std::max(seen(a, b), seen(b, a)); count > 0) topo.set_nvlinks(a, b, count);
}

}  // namespace

core::LinkLevel link_level_from_nvml(int level) noexcept {
  switch (level) {
    case kTopologyInternal: return core::LinkLevel::SameBoard;
    case kTopologySingle: return core::LinkLevel::SingleSwitch;
    case kTopologyMultiple: return core::LinkLevel::MultiSwitch;
    case kTopologyHostBridge: return core::LinkLevel::HostBridge;
    case kTopologyNode: return core::LinkLevel::NumaNode;
    case kTopologySystem: return core::LinkLevel::CrossSocket;
    default: return core::LinkLevel::Unknown;
  }
}

core::Topology read_topology(const Api& api, const std::vector<Device>& devices) {
  core::Topology topo(static_cast<unsigned>(devices.size()));
  read_levels(api, devices, topo);
  read_nvlinks(api, devices, topo);
  return topo;
}

}  // namespace gf::backends::nvml
