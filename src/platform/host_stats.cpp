#include "platform/host_stats.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "platform/fs.hpp"

namespace gf::platform {
namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// An unsigned decimal at the start of `s` (leading blanks skipped), consumed from s; nullopt when there
// are no digits or the value does not fit in 64 bits.
std::optional<std::uint64_t> take_number(std::string_view& s) {
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  const std::size_t start = i;
  std::uint64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    const auto d = static_cast<std::uint64_t>(s[i] - '0');
    if (v > (kMax - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  if (i == start) return std::nullopt;
  s.remove_prefix(i);
  return v;
}

bool add_to(std::uint64_t& sum, std::uint64_t v) {
  if (sum > kMax - v) return false;
  sum += v;
  return true;
}

// The lines of `text` one by one (the last one may lack its newline).
template <class F>
void each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    if (!f(line)) return;
    if (nl == std::string_view::npos) return;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  std::optional<CpuTimes> out;
  each_line(text, [&](std::string_view line) {
    if (line.substr(0, 4) != "cpu " && line.substr(0, 4) != "cpu\t") return true;
    line.remove_prefix(3);
    // user nice system idle iowait irq softirq steal [guest guest_nice]; at least the first four.
    std::uint64_t v[8] = {};
    std::size_t n = 0;
    while (n < 8) {
      auto x = take_number(line);
      if (!x) break;
      v[n++] = *x;
    }
    if (n < 4) return false;
    CpuTimes t;
    const bool ok = add_to(t.busy, v[0]) && add_to(t.busy, v[1]) && add_to(t.busy, v[2]) && add_to(t.busy, v[5]) &&
                    add_to(t.busy, v[6]) && add_to(t.busy, v[7]) && add_to(t.idle, v[3]) && add_to(t.idle, v[4]) &&
                    t.busy <= kMax - t.idle;
    if (ok) out = t;
    return false;
  });
  return out;
}

std::optional<double> cpu_percent(const CpuTimes& before, const CpuTimes& after) {
  if (after.busy < before.busy || after.idle < before.idle) return std::nullopt;
  const std::uint64_t busy = after.busy - before.busy;
  const std::uint64_t all = busy + (after.idle - before.idle);
  if (all == 0) return std::nullopt;
  return std::round(static_cast<double>(busy) / static_cast<double>(all) * 1000) / 10;
}

unsigned parse_cpu_count(std::string_view text) {
  unsigned n = 0;
  each_line(text, [&](std::string_view line) {
    if (line.size() > 3 && line.substr(0, 3) == "cpu" && line[3] >= '0' && line[3] <= '9' && n < 1u << 20) ++n;
    return true;
  });
  return n;
}

std::optional<MemInfo> parse_meminfo(std::string_view text) {
  std::optional<std::uint64_t> total, available, free, buffers, cached;
  bool bad = false;
  each_line(text, [&](std::string_view line) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return true;
    const auto key = line.substr(0, colon);
    std::optional<std::uint64_t>* slot = key == "MemTotal"       ? &total
                                         : key == "MemAvailable" ? &available
                                         : key == "MemFree"      ? &free
                                         : key == "Buffers"      ? &buffers
                                         : key == "Cached"       ? &cached
                                                                 : nullptr;
    if (!slot) return true;
    auto rest = line.substr(colon + 1);
    auto v = take_number(rest);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!v || !(rest == "kB" || rest.empty()) || *v > kMax / 1024) {
      bad = true;
      return false;
    }
    *slot = *v * 1024;
    return true;
  });
  if (bad || !total || !free) return std::nullopt;
  MemInfo m;
  m.total = *total;
  m.free = std::min(*free, m.total);
  if (available) {
    m.available = *available;
  } else {  // kernels before 3.14: an estimate from what was free and the page cache
    m.available = m.free;
    if (!add_to(m.available, buffers.value_or(0)) || !add_to(m.available, cached.value_or(0))) m.available = m.total;
  }
  m.available = std::min(m.available, m.total);
  return m;
}

Result<DiskUsage> disk_usage(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return make_error("statvfs " + path + ": " + std::strerror(errno));
  const std::uint64_t unit = st.f_frsize ? st.f_frsize : st.f_bsize;
  auto bytes = [&](std::uint64_t blocks) { return unit && blocks > kMax / unit ? kMax : blocks * unit; };
  DiskUsage d;
  d.total = bytes(st.f_blocks);
  const std::uint64_t free_all = std::min(bytes(st.f_bfree), d.total);
  d.used = d.total - free_all;
  d.free = std::min(bytes(st.f_bavail), free_all);
  return d;
}

HostStats::HostStats(std::string proc_root, std::string disk_path, const core::Clock& clock,
                     std::chrono::milliseconds min_interval)
    : proc_root_(std::move(proc_root)), disk_path_(std::move(disk_path)), clock_(clock), min_interval_(min_interval) {
  base_ = next_ = read_cpu(nullptr);
  base_at_ = next_at_ = clock_.now();
}

std::optional<CpuTimes> HostStats::read_cpu(unsigned* count) const {
  const auto text = read_file(under_root(proc_root_, "/stat"), 1 << 20);
  if (!text) return std::nullopt;
  if (count) *count = parse_cpu_count(*text);
  return parse_proc_stat(*text);
}

HostReading HostStats::read() {
  HostReading r;
  const auto cur = read_cpu(&r.cpu_count);
  const auto now = clock_.now();
  {
    std::lock_guard lock(mu_);
    if (next_ && now - next_at_ >= min_interval_) base_ = next_, base_at_ = next_at_;
    if (cur && base_) {
      r.cpu_percent = cpu_percent(*base_, *cur);
      r.cpu_interval_s = std::chrono::duration<double>(now - base_at_).count();
    }
    if (cur && (!next_ || now - next_at_ >= min_interval_)) next_ = cur, next_at_ = now;
    if (cur && !base_) base_ = cur, base_at_ = now;  // /proc/stat was unreadable until now
  }
  if (const auto text = read_file(under_root(proc_root_, "/meminfo"), 1 << 20)) r.memory = parse_meminfo(*text);
  r.disk = disk_usage(disk_path_);
  return r;
}

}  // namespace gf::platform
