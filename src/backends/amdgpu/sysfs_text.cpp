#include "backends/amdgpu/sysfs_text.hpp"

#include "backends/drm/text_util.hpp"
#include "core/text.hpp"

namespace gf::backends::amdgpu {

namespace text = drm::text;
using core::trim;
using text::next_line;

std::optional<unsigned> parse_dpm_current_mhz(std::string_view content) {
  // Lines look like "1: 1800Mhz *" (current) or "0: 500Mhz " (not current); deep-sleep levels are
  // labelled "S:". Some SMU versions print "MHz", hence the case-blind unit. The first marked line
  // wins: the driver marks one, and stopping there bounds the work.
  while (!content.empty()) {
    std::string_view line = trim(next_line(content));
    if (line.empty() || line.back() != '*') continue;
    line = trim(line.substr(0, line.size() - 1));
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    const auto [digits, unit] = text::split_number(trim(line.substr(colon + 1)));
    if (!core::iequals(trim(unit), "mhz")) return std::nullopt;
    return text::parse_decimal<unsigned>(digits);
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_ras_uncorrectable(std::string_view content) {
  // The file holds "ue: N" and "ce: N" lines (uncorrectable, correctable).
  while (!content.empty()) {
    const std::string_view line = trim(next_line(content));
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || trim(line.substr(0, colon)) != "ue") continue;
    return text::parse_decimal<std::uint64_t>(trim(line.substr(colon + 1)));
  }
  return std::nullopt;
}

}  // namespace gf::backends::amdgpu
