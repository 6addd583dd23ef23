// libFuzzer target for the host readers' pure parsers: /proc/stat and /proc/meminfo text. The agent
// reads them from a /proc it does not control (a container's, or a future kernel's); crashes, sanitizer
// reports and the invariant traps below are findings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "platform/host_stats.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace pf = gf::platform;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto t = pf::parse_proc_stat(text)) {
    check(t->busy <= t->total());  // the sum did not wrap
    if (const auto p = pf::cpu_percent({0, 0}, *t)) check(*p >= 0 && *p <= 100);
  }
  (void)pf::parse_cpu_count(text);
  if (const auto m = pf::parse_meminfo(text)) check(m->free <= m->total && m->available <= m->total);
  return 0;
}
