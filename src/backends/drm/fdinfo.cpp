#include "backends/drm/fdinfo.hpp"

#include <limits>

#include "backends/drm/text_util.hpp"
#include "core/text.hpp"

namespace gf::backends::drm {
namespace {

using core::trim;

// A real file has one key per engine or region (under ten of each); kMaxKeysPerMap keeps a hostile
// or corrupt input from growing a map without bound (the fuzzer feeds thousands of distinct keys).
// kMaxTextValue: the longest text kept (driver name, PCI address, engine or region name); real
// ones are under 20 bytes.

// "123456 ns". The spec makes the unit mandatory; a bare number is accepted as ns as well since an
// engine key cannot mean anything else.
std::optional<std::uint64_t> parse_engine_ns(std::string_view value) noexcept {
  const auto [digits, rest] = text::split_number(value);
  const std::string_view unit = trim(rest);
  if (!unit.empty() && unit != "ns") return std::nullopt;
  return text::parse_decimal<std::uint64_t>(digits);
}

// The first occurrence of a key wins: the kernel prints each key once, and first-wins keeps the
// result independent of whatever junk follows.
void set_once(std::optional<std::uint64_t>& slot, std::optional<std::uint64_t> v) noexcept {
  if (!slot && v) slot = v;
}

// One <name>: <value> entry of a per-engine or per-region family, first occurrence winning.
void put_once(CounterMap& map, std::string_view name, std::optional<std::uint64_t> v) {
  if (name.empty() || name.size() > kMaxTextValue || !v || map.size() >= kMaxKeysPerMap || map.contains(name)) return;
  map.emplace(std::string(name), *v);
}

}  // namespace

std::optional<std::uint64_t> parse_drm_memory_bytes(std::string_view value) {
  const auto [digits, rest] = text::split_number(trim(value));
  const auto n = text::parse_decimal<std::uint64_t>(digits);
  if (!n) return std::nullopt;
  const std::string_view unit = trim(rest);
  unsigned shift = 0;
  if (unit.empty()) {
    shift = 0;  // bytes: the kernel drops the unit for amounts below 1 KiB
  } else if (unit == "KiB") {
    shift = 10;
  } else if (unit == "MiB") {
    shift = 20;
  } else if (unit == "GiB") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  // Refuse rather than wrap: a wrapped size would be a plausible-looking lie.
  if (*n > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  return *n << shift;
}

std::optional<DrmFdinfo> parse_drm_fdinfo(std::string_view content) {
  DrmFdinfo out;
  bool have_driver = false;
  while (!content.empty()) {
    const std::string_view line = text::next_line(content);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    // Skips pos:, flags:, mnt_id:, ino:, and the pre-5.19 amdgpu format ("pdev:", "vram mem:"),
    // which has no client id to tell duplicated fds apart.
    if (!key.starts_with("drm-")) continue;

    if (key == "drm-driver") {
      if (!have_driver && !value.empty() && value.size() <= kMaxTextValue) {
        out.driver = std::string(value);
        have_driver = true;
      }
    } else if (key == "drm-pdev") {
      // Lower-cased to compare equal to the sysfs device name, which is always lower case.
      if (out.pdev.empty() && value.size() <= kMaxTextValue) out.pdev = core::lower(value);
    } else if (key == "drm-client-id") {
      set_once(out.client_id, text::parse_decimal<std::uint64_t>(value));
    } else if (key == "drm-memory-vram") {
      set_once(out.memory_vram_bytes, parse_drm_memory_bytes(value));
    } else if (key == "drm-memory-gtt") {
      set_once(out.memory_gtt_bytes, parse_drm_memory_bytes(value));
    } else if (key == "drm-memory-cpu") {
      set_once(out.memory_cpu_bytes, parse_drm_memory_bytes(value));
    } else if (key.starts_with("drm-engine-capacity-")) {
      // How many engines of the class there are; the spec says a missing key means one, so zero
      // (which would divide a share by nothing) is refused.
      const auto n = text::parse_decimal<std::uint64_t>(value);
      put_once(out.engine_capacity, key.substr(20), n && *n > 0 ? n : std::nullopt);
    } else if (key.starts_with("drm-engine-")) {
      put_once(out.engine_busy_ns, key.substr(11), parse_engine_ns(value));
    } else if (key.starts_with("drm-total-cycles-")) {
      put_once(out.engine_total_cycles, key.substr(17), text::parse_decimal<std::uint64_t>(value));
    } else if (key.starts_with("drm-cycles-")) {
      put_once(out.engine_cycles, key.substr(11), text::parse_decimal<std::uint64_t>(value));
    } else if (key.starts_with("drm-total-")) {
      put_once(out.total_bytes, key.substr(10), parse_drm_memory_bytes(value));
    }
  }
  if (!have_driver) return std::nullopt;
  return out;
}

}  // namespace gf::backends::drm
