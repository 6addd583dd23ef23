#include "backends/amdgpu/fdinfo.hpp"

#include <limits>

#include "backends/amdgpu/text_util.hpp"

namespace gf::backends::amdgpu {
namespace {

using text::trim;

// A real file has one key per engine (under ten); the cap keeps a hostile or corrupt input from
// growing the map without bound (the fuzzer feeds thousands of distinct keys).
constexpr std::size_t kMaxEngines = 64;
// Longest text value kept (driver name, PCI address, engine name). Real ones are under 20 bytes.
constexpr std::size_t kMaxTextValue = 64;

std::string lower_copy(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = text::lower_ascii(c);
  return out;
}

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
      if (out.pdev.empty() && value.size() <= kMaxTextValue) out.pdev = lower_copy(value);
    } else if (key == "drm-client-id") {
      set_once(out.client_id, text::parse_decimal<std::uint64_t>(value));
    } else if (key == "drm-memory-vram") {
      set_once(out.memory_vram_bytes, parse_drm_memory_bytes(value));
    } else if (key == "drm-memory-gtt") {
      set_once(out.memory_gtt_bytes, parse_drm_memory_bytes(value));
    } else if (key == "drm-memory-cpu") {
      set_once(out.memory_cpu_bytes, parse_drm_memory_bytes(value));
    } else if (key.starts_with("drm-engine-")) {
      const std::string_view engine = key.substr(11);
      // drm-engine-capacity-<name> counts engine instances; it is not a time.
      if (engine.empty() || engine.starts_with("capacity-") || engine.size() > kMaxTextValue) continue;
      const auto ns = parse_engine_ns(value);
      if (!ns || out.engine_busy_ns.size() >= kMaxEngines || out.engine_busy_ns.contains(engine)) continue;
      out.engine_busy_ns.emplace(std::string(engine), *ns);
    }
  }
  if (!have_driver) return std::nullopt;
  return out;
}

}  // namespace gf::backends::amdgpu
