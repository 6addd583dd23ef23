// libFuzzer target for nvidia-smi's MIG answers (`-L` and `-q -x`) and their join: random bytes must give
// a value or an error, never a crash, an exception, UB or unbounded work. The first byte picks the
// parser; with 2, the rest is split at the first NUL into a listing and an XML document and joined.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/nvidia_smi/mig_text.hpp"

namespace smi = gf::backends::nvidia_smi;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto l = smi::parse_list(text);
      if (l)
        for (const auto& g : *l) {
          volatile std::size_t sink = g.uuid.size() + g.migs.size();
          (void)sink;
        }
      break;
    }
    case 1: {
      auto x = smi::parse_query_xml(text);
      if (x)
        for (const auto& g : *x) {
          volatile std::size_t sink = g.uuid.size() + g.migs.size() + g.processes.size();
          (void)sink;
        }
      break;
    }
    default: {
      const auto nul = text.find('\0');
      auto l = smi::parse_list(text.substr(0, nul));
      auto x = smi::parse_query_xml(nul == std::string_view::npos ? std::string_view{} : text.substr(nul + 1));
      if (!l) break;
      std::vector<gf::core::GpuReading> gpus(l->size());
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        gpus[i].uuid = (*l)[i].uuid;
        gpus[i].mig_enabled = true;
      }
      auto problems = smi::add_mig_instances(gpus, *l, x ? *x : std::vector<smi::XmlGpu>{});
      volatile std::size_t sink = problems.size();
      (void)sink;
    }
  }
  return 0;
}
