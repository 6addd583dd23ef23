#pragma once
// XIDs as the NVIDIA kernel module logs them, for backends that have no NVML event API (the
// nvidia-smi fallback). Pure: a line parser and a bounded per-GPU record; the reading of the kernel
// log itself is platform::KmsgReader's, and the time is passed in.
//
// The module writes one line per XID:
//   NVRM: Xid (PCI:0000:65:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
// (older drivers: "NVRM: Xid (0000:65:00): 13, …"; the part after the number is free text whose
// process name another user chose). Only the PCI address and the number are kept from it.
//
// Thread-safety: parse_* are pure; a KernelXids is not synchronised (one owner: the backend).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/snapshot.hpp"

namespace gf::core {

// A GPU's PCI address without the function: what the kernel log names it by.
struct PciAddress {
  std::uint32_t domain = 0;
  std::uint8_t bus = 0;
  std::uint8_t device = 0;
  friend bool operator==(const PciAddress&, const PciAddress&) = default;
};

// "00000000:65:00.0" (nvidia-smi, NVML), "0000:65:00.0" or "0000:65:00" (the kernel log): the
// address; nullopt for anything else. Hex digits in either case; the function, when given, is 0-7.
std::optional<PciAddress> parse_pci_address(std::string_view text) noexcept;

struct KernelXid {
  PciAddress gpu;
  unsigned xid = 0;
  std::string_view detail;  // what follows the number (", pid=…, GPU has fallen off the bus."): untrusted
};

// The XID a kernel log line reports; nullopt when the line is not an NVRM XID line (most lines).
// Accepts a line with any prefix (a /dev/kmsg record's "6,123,456,-;", dmesg's "[ 12.3] ").
// Linear in the line; looks at no more than the line.
std::optional<KernelXid> parse_kernel_xid(std::string_view line) noexcept;

// The XIDs seen per GPU address, each address's list bounded the way the NVML event thread bounds
// its own (critical XIDs evicted last), the number of addresses bounded too.
class KernelXids {
 public:
  static constexpr std::size_t kMaxGpus = 256;  // more addresses than this are not GPUs of ours

  explicit KernelXids(std::size_t recent_limit = 16) : recent_limit_(recent_limit == 0 ? 1 : recent_limit) {}

  // Records one XID at `time`. False when it was dropped (kMaxGpus addresses are already known).
  bool record(const KernelXid& x, std::chrono::system_clock::time_point time);
  // Sets g.last_xid (0 when none was seen for its address) and g.recent_xids (oldest first) from the
  // XIDs recorded for g.pci_bus_id. A GPU whose address cannot be read gets last_xid absent (Error).
  void fill(GpuReading& g) const;

 private:
  struct PerGpu {
    PciAddress address;
    unsigned last = 0;
    std::vector<XidEvent> recent;  // oldest first, at most recent_limit_
  };
  std::size_t recent_limit_;
  std::vector<PerGpu> gpus_;  // few: a linear search is the fastest lookup
};

}  // namespace gf::core
