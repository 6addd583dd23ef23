#include "backends/intel/device_names.hpp"

#include <string_view>

#include <fmt/core.h>

namespace gf::backends::intel {
namespace {

struct Row {
  unsigned id;
  std::string_view name;
};

// Ids from the kernel's and Mesa's PCI id lists; a few per family, the ones found in servers and
// workstations. Integrated GPUs share one name across many ids; only the common ones are here.
constexpr Row kNames[] = {
    // Data center (Ponte Vecchio, Arctic Sound-M)
    {0x0bd5, "Intel Data Center GPU Max 1550"},
    {0x0bda, "Intel Data Center GPU Max 1100"},
    {0x56c0, "Intel Data Center GPU Flex 170"},
    {0x56c1, "Intel Data Center GPU Flex 140"},
    // Arc discrete (Alchemist, Battlemage)
    {0x56a0, "Intel Arc A770"},
    {0x56a1, "Intel Arc A750"},
    {0x56a5, "Intel Arc A380"},
    {0x5690, "Intel Arc A770M"},
    {0xe20b, "Intel Arc B580"},
    {0xe20c, "Intel Arc B570"},
    // Integrated
    {0x3e92, "Intel UHD Graphics 630"},
    {0x3e9b, "Intel UHD Graphics 630"},
    {0x9bc5, "Intel UHD Graphics 630"},
    {0x9a49, "Intel Iris Xe Graphics"},
    {0x46a6, "Intel Iris Xe Graphics"},
    {0x4680, "Intel UHD Graphics 770"},
    {0xa780, "Intel UHD Graphics 770"},
    {0x7d55, "Intel Arc Graphics"},
    {0x64a0, "Intel Arc Graphics 140V"},
};

}  // namespace

std::string device_name(unsigned pci_device_id) {
  for (const Row& r : kNames)
    if (r.id == pci_device_id) return std::string(r.name);
  return fmt::format("Intel GPU 0x{:04x}", pci_device_id);
}

}  // namespace gf::backends::intel
