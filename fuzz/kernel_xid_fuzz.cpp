// libFuzzer target for the kernel log's XID lines (core/kernel_xid) and nvidia-smi's
// --query-remapped-rows answer: random bytes must give a value or nothing/an error, never a crash, an
// exception, UB or unbounded work. The first byte picks the parser; with 0 the rest is split into lines
// that are parsed and recorded as the nvidia-smi backend records them, then read back for a GPU.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backends/nvidia_smi/health_text.hpp"
#include "core/kernel_xid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    gf::core::KernelXids xids(4);
    gf::core::GpuReading g;
    while (!text.empty()) {
      const auto nl = text.find('\n');
      const std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      if (auto x = gf::core::parse_kernel_xid(line)) {
        (void)xids.record(*x, std::chrono::system_clock::time_point{});
        g.pci_bus_id = std::string(line.substr(0, 16));  // sometimes an address, mostly not
        xids.fill(g);
        volatile std::size_t sink = x->detail.size() + g.recent_xids.size();
        (void)sink;
      }
      (void)gf::core::parse_pci_address(line);
    }
  } else {
    auto rows = gf::backends::nvidia_smi::parse_remapped_rows(text);
    if (rows) {
      gf::core::GpuReading g;
      for (const auto& r : *rows) {
        g.uuid = r.uuid;
        gf::backends::nvidia_smi::apply_remapped_rows(*rows, g);
      }
    }
  }
  return 0;
}
