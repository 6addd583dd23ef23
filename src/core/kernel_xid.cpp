#include "core/kernel_xid.hpp"

#include <algorithm>

#include "core/gpu_health.hpp"

namespace gf::core {
namespace {

// A hex number of 1..max_digits digits that is the whole of `s`.
template <class T>
std::optional<T> hex(std::string_view s, std::size_t max_digits) noexcept {
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    unsigned d = 0;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    v = v * 16 + d;
  }
  return static_cast<T>(v);
}

// The largest XID number accepted: NVIDIA's catalog ends in the low hundreds.
constexpr unsigned kMaxXid = 65535;

}  // namespace

std::optional<PciAddress> parse_pci_address(std::string_view text) noexcept {
  // domain:bus:device[.function]
  const auto c1 = text.find(':');
  if (c1 == std::string_view::npos) return std::nullopt;
  const auto c2 = text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  std::string_view dev = text.substr(c2 + 1);
  if (const auto dot = dev.find('.'); dot != std::string_view::npos) {
    const std::string_view fn = dev.substr(dot + 1);
    if (fn.size() != 1 || fn[0] < '0' || fn[0] > '7') return std::nullopt;
    dev = dev.substr(0, dot);
  }
  auto domain = hex<std::uint32_t>(text.substr(0, c1), 8);
  auto bus = hex<std::uint8_t>(text.substr(c1 + 1, c2 - c1 - 1), 2);
  auto device = hex<std::uint8_t>(dev, 2);
  if (!domain || !bus || !device || *device > 0x1f) return std::nullopt;
  return PciAddress{*domain, *bus, *device};
}

std::optional<KernelXid> parse_kernel_xid(std::string_view line) noexcept {
  constexpr std::string_view kMarker = "NVRM: Xid (";
  const auto at = line.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + kMarker.size());
  if (rest.substr(0, 4) == "PCI:") rest.remove_prefix(4);
  const auto close = rest.find(')');
  if (close > 20) return std::nullopt;  // none (npos), or past "0000:65:00.0" and a little
  auto gpu = parse_pci_address(rest.substr(0, close));
  if (!gpu) return std::nullopt;
  rest.remove_prefix(close + 1);
  if (rest.empty() || rest.front() != ':') return std::nullopt;
  rest.remove_prefix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::size_t digits = 0;
  unsigned xid = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
    xid = xid * 10 + static_cast<unsigned>(rest[digits] - '0');
    if (++digits > 5) return std::nullopt;
  }
  if (digits == 0 || xid == 0 || xid > kMaxXid) return std::nullopt;
  return KernelXid{*gpu, xid, rest.substr(digits)};
}

bool KernelXids::record(const KernelXid& x, std::chrono::system_clock::time_point time) {
  auto it = std::find_if(gpus_.begin(), gpus_.end(), [&](const PerGpu& g) { return g.address == x.gpu; });
  if (it == gpus_.end()) {
    if (gpus_.size() >= kMaxGpus) return false;
    gpus_.push_back(PerGpu{x.gpu, 0, {}});
    it = gpus_.end() - 1;
  }
  it->last = x.xid;
  it->recent.push_back({x.xid, time});
  if (it->recent.size() > recent_limit_) {
    // The oldest application fault goes first; only when every entry is critical, the oldest one.
    auto victim =
        std::find_if(it->recent.begin(), it->recent.end(), [](const XidEvent& e) { return !xid_needs_reset(e.xid); });
    it->recent.erase(victim != it->recent.end() ? victim : it->recent.begin());
  }
  return true;
}

void KernelXids::fill(GpuReading& g) const {
  const auto address = parse_pci_address(g.pci_bus_id);
  if (!address) {
    g.last_xid = Reading<unsigned>::absent(Absent::Error);  // nothing to match the log's lines with
    return;
  }
  const auto it = std::find_if(gpus_.begin(), gpus_.end(), [&](const PerGpu& p) { return p.address == *address; });
  if (it == gpus_.end()) {
    g.last_xid = 0u;
    g.recent_xids.clear();
    return;
  }
  g.last_xid = it->last;
  g.recent_xids = it->recent;
}

}  // namespace gf::core
