#pragma once
// Names of Intel GPUs by PCI device id. The kernel gives no marketing name in sysfs, so a small table
// of common ones stands in; any other device is "Intel GPU 0x<id>". Thread-safety: stateless.
#include <string>

namespace gf::backends::intel {

std::string device_name(unsigned pci_device_id);

}  // namespace gf::backends::intel
