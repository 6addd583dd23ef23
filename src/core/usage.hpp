#pragma once
// Per-lease GPU accounting from the readings the agent already takes. Pure: time and readings are
// passed in, nothing is read or written here.
//
// What is counted, per lease (summed over its GPUs):
// - held_gpu_s: exactly (released_at - created_at) × GPUs, from the lease's own times, never from
//   sample counts, so the accounting of ended leases sums to the time their jobs held GPUs.
// - busy_gpu_s: the time a GPU's utilization was ≥ busy_threshold_pct (default 5 %). The interval
//   between two samples takes the state of the sample that ends it, because the driver's utilization
//   is an average over the period before the reading. Always ≤ held_gpu_s.
// - energy_wh: the power integral, trapezoids between two samples (linear between them).
// - mean_util_pct: utilization weighted by the time it covers (same rule as busy).
// - peak_mem_mib: the most memory used by any of its GPUs in a sample taken while it was held.
// Only the part of an interval that falls inside the lease counts. An interval longer than
// max_gap (the agent was stopped, the driver hung) is not integrated: busy time, energy and the
// mean then cover less than the held time, which stays exact. A GPU without a utilization or power
// reading in a sample contributes nothing to that quantity for the interval it ends.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ports/lease_store.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

struct UsageOptions {
  unsigned busy_threshold_pct = 5;
  std::chrono::milliseconds max_gap{5000};  // the agent sets it to a few sampling intervals
};

struct LeaseUsage {
  std::string lease_id;
  std::string job_id;
  std::string user;
  std::optional<std::uint32_t> uid;  // the lease owner's (none for rows of older binaries)
  unsigned gpus = 0;
  std::int64_t created_at_ms = 0;
  std::optional<std::int64_t> released_at_ms;  // set: the row is final
  double held_gpu_s = 0;
  double busy_gpu_s = 0;
  double energy_wh = 0;
  double util_gpu_s = 0;     // Σ utilization × seconds covered (pct·s), for the mean
  double covered_gpu_s = 0;  // GPU-seconds with a utilization reading
  std::optional<std::uint64_t> peak_mem_mib;

  std::optional<double> mean_util_pct() const {
    if (covered_gpu_s <= 0) return std::nullopt;
    return util_gpu_s / covered_gpu_s;
  }
  std::optional<double> busy_fraction() const {
    if (held_gpu_s <= 0) return std::nullopt;
    return busy_gpu_s / held_gpu_s;
  }
};

// Accumulates usage of the leases it is shown. Not thread-safe.
class UsageAccumulator {
 public:
  explicit UsageAccumulator(UsageOptions options = {}) : options_(options) {}

  // One reading at snapshot.timestamp. `leases` are the leases to account for this interval: the
  // active ones and those ended since the previous call (with released_at_ms set); a lease first
  // seen here starts its row. Readings older than the previous one are ignored.
  void add(const Snapshot& snapshot, const std::vector<Lease>& leases);
  // A row kept from before (a previous run of the agent): accounting goes on from it.
  void seed(LeaseUsage row);
  // Held time of leases still running, up to now_ms (they are not final).
  void settle(std::int64_t now_ms);

  // Rows whose lease has ended (final), removed from the accumulator.
  std::vector<LeaseUsage> take_final();
  // Every row (running and ended not yet taken), by lease id.
  const std::map<std::string, LeaseUsage>& rows() const noexcept { return rows_; }
  const UsageOptions& options() const noexcept { return options_; }

 private:
  struct Sample {
    std::int64_t at_ms = 0;
    std::optional<unsigned> util_pct;
    std::optional<double> power_w;
  };
  UsageOptions options_;
  std::map<std::string, LeaseUsage> rows_;
  std::map<unsigned, Sample> previous_;  // by GPU index: the last sample seen
  std::optional<std::int64_t> last_ms_;
};

// Totals of several rows (usage by user or job).
struct UsageTotals {
  std::string key;  // the user or the job id
  // By job: the owner's uid. A job is (uid, job id), so two users' jobs of one id stay apart.
  std::optional<std::uint32_t> uid;
  std::size_t leases = 0;
  double held_gpu_s = 0, busy_gpu_s = 0, energy_wh = 0, util_gpu_s = 0, covered_gpu_s = 0;
  std::optional<std::uint64_t> peak_mem_mib;
  void add(const LeaseUsage& r);   // one lease more
  void add(const UsageTotals& o);  // another group's totals (its key is not taken)
};
enum class UsageGroup : unsigned char { User, Job };
// Rows grouped by user (or by job: the owner's uid and the job id), sorted by held time, largest first.
std::vector<UsageTotals> group_usage(const std::vector<LeaseUsage>& rows, UsageGroup by);

std::int64_t to_epoch_ms(std::chrono::system_clock::time_point t);

}  // namespace gf::core
