#include "backends/nvidia_smi/health_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "backends/nvidia_smi/mig_text.hpp"
#include "core/text.hpp"
#include "platform/log.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using core::Absent;
using core::Reading;

constexpr std::size_t kColumns = 6;

// Why a bracketed note has no value; nullopt for a plain value.
std::optional<Absent> note(std::string_view t) noexcept {
  if (t == "[N/A]" || t == "N/A") return Absent::Unavailable;
  if (t == "[Not Supported]") return Absent::NotSupported;
  if (t == "[Insufficient Permissions]") return Absent::NoPermission;
  if (t == "[GPU is lost]") return Absent::GpuLost;
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') return Absent::Error;
  return std::nullopt;
}

bool read_count(std::string_view t, Reading<std::uint64_t>& r) {
  if (auto why = note(t)) {
    r = Reading<std::uint64_t>::absent(*why);
    return true;
  }
  auto v = core::parse_uint(t);
  if (!v) return false;
  r = *v;
  return true;
}

bool read_flag(std::string_view t, Reading<bool>& r) {
  if (auto why = note(t)) {
    r = Reading<bool>::absent(*why);
    return true;
  }
  if (t == "1" || t == "Yes") {
    r = true;
  } else if (t == "0" || t == "No") {
    r = false;
  } else {
    return false;
  }
  return true;
}

// A UUID or bus id: printable ASCII without blanks, of a sane length; empty otherwise.
std::string token(std::string_view t) {
  if (t.empty() || t.size() > 96 || note(t)) return {};
  if (!std::all_of(t.begin(), t.end(), [](char c) { return c > 0x20 && c < 0x7f; })) return {};
  return std::string(t);
}

}  // namespace

Result<std::vector<RemappedRows>> parse_remapped_rows(std::string_view text) {
  std::vector<RemappedRows> rows;
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const auto nl = text.find('\n');
    const std::string_view line = core::trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line == "No devices were found") continue;
    std::array<std::string_view, kColumns> f{};
    std::size_t n = 0;
    std::string_view rest = line;
    while (n < kColumns) {
      const auto comma = rest.find(',');
      f[n++] = core::trim(rest.substr(0, comma));
      if (comma == std::string_view::npos) {
        rest = {};
        break;
      }
      rest.remove_prefix(comma + 1);
      if (n == kColumns)
        return make_error(fmt::format("nvidia-smi --query-remapped-rows: line {}: more than {} columns: '{}'", number,
                                      kColumns, platform::printable(line, 120)));
    }
    if (n != kColumns)
      return make_error(fmt::format("nvidia-smi --query-remapped-rows: line {}: expected {} columns, found {}: '{}'",
                                    number, kColumns, n, platform::printable(line, 120)));
    if (rows.size() >= kMaxListedGpus)
      return make_error("nvidia-smi --query-remapped-rows: more GPUs than any machine has");
    RemappedRows r;
    r.bus_id = token(f[0]);
    r.uuid = token(f[1]);
    if (!read_count(f[2], r.correctable) || !read_count(f[3], r.uncorrectable) || !read_flag(f[4], r.pending) ||
        !read_flag(f[5], r.failure))
      return make_error(fmt::format("nvidia-smi --query-remapped-rows: line {}: expected counts and 0/1, got '{}'",
                                    number, platform::printable(line, 120)));
    rows.push_back(std::move(r));
  }
  return rows;
}

void apply_remapped_rows(const std::vector<RemappedRows>& rows, core::GpuReading& g) {
  const auto same = [&](const RemappedRows& r) {
    if (!g.uuid.empty() && !r.uuid.empty()) return r.uuid == g.uuid;
    return !g.pci_bus_id.empty() && r.bus_id == g.pci_bus_id;
  };
  const auto it = std::find_if(rows.begin(), rows.end(), same);
  if (it == rows.end()) {
    g.remapped_rows_correctable = g.remapped_rows_uncorrectable = Reading<std::uint64_t>::absent(Absent::NotSupported);
    g.remapped_rows_pending = g.remapped_rows_failure = Reading<bool>::absent(Absent::NotSupported);
    return;
  }
  g.remapped_rows_correctable = it->correctable;
  g.remapped_rows_uncorrectable = it->uncorrectable;
  g.remapped_rows_pending = it->pending;
  g.remapped_rows_failure = it->failure;
}

}  // namespace gf::backends::nvidia_smi
