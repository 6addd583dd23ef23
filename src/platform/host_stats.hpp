#pragma once
// The host's CPU, memory and disk, for GET /api/v1/monitoring/metrics. The parsers are pure and
// locale-free (the kernel's text is read digit by digit); the reader takes its /proc root as a
// parameter so tests point it at a fixture tree.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/ports/clock.hpp"
#include "core/result.hpp"

namespace gf::platform {

// The aggregate "cpu" line of /proc/stat, in clock ticks since boot.
struct CpuTimes {
  std::uint64_t busy = 0;  // user + nice + system + irq + softirq + steal
  std::uint64_t idle = 0;  // idle + iowait
  std::uint64_t total() const noexcept { return busy + idle; }
};
// The "cpu " line of /proc/stat text, or nullopt when it is missing or malformed. guest and
// guest_nice are left out: the kernel already counts them in user and nice.
std::optional<CpuTimes> parse_proc_stat(std::string_view text);
// Percent of the time busy between two samples (0..100, one decimal), or nullopt when no tick passed
// or the counters went backwards.
std::optional<double> cpu_percent(const CpuTimes& before, const CpuTimes& after);
// Number of "cpuN" lines (online CPUs), 0 when none.
unsigned parse_cpu_count(std::string_view text);

// /proc/meminfo, in bytes.
struct MemInfo {
  std::uint64_t total = 0;
  std::uint64_t available = 0;  // MemAvailable, or MemFree + Buffers + Cached on old kernels
  std::uint64_t free = 0;
};
// nullopt when MemTotal is missing or a value is malformed.
std::optional<MemInfo> parse_meminfo(std::string_view text);

// statvfs of a path, in bytes: free is what an unprivileged user may still write (f_bavail).
struct DiskUsage {
  std::uint64_t total = 0;
  std::uint64_t used = 0;
  std::uint64_t free = 0;
};
Result<DiskUsage> disk_usage(const std::string& path);

// One reading of the host.
struct HostReading {
  std::optional<double> cpu_percent;  // nullopt: no interval to measure yet
  double cpu_interval_s = 0;          // what cpu_percent averages over
  unsigned cpu_count = 0;
  std::optional<MemInfo> memory;  // nullopt: /proc/meminfo unreadable
  Result<DiskUsage> disk = DiskUsage{};
};

// Reads the host. The CPU percentage is over the time since a kept /proc/stat sample: the reader keeps
// the sample of its construction and of earlier reads, and measures from the newest one that is at
// least `min_interval` old (from the oldest while none is) — so a request never sleeps, and a burst of
// requests does not shrink the interval to nothing. Thread-safe.
class HostStats {
 public:
  HostStats(std::string proc_root, std::string disk_path, const core::Clock& clock,
            std::chrono::milliseconds min_interval = std::chrono::seconds(1));
  HostReading read();
  const std::string& disk_path() const noexcept { return disk_path_; }

 private:
  std::optional<CpuTimes> read_cpu(unsigned* count) const;

  std::string proc_root_, disk_path_;
  const core::Clock& clock_;
  std::chrono::milliseconds min_interval_;
  std::mutex mu_;                        // guards the baseline
  std::optional<CpuTimes> base_, next_;  // measured from; the newer sample that replaces it
  std::chrono::steady_clock::time_point base_at_{}, next_at_{};
};

}  // namespace gf::platform
