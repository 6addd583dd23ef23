#pragma once
// UsageLedger: the node's accounting of GPU use per lease, and the idle-lease reclaim. Fed with every
// collection the agent takes (attach() subscribes it to the SampleHub, like the other listeners), it
// asks its lease source which leases to account for, integrates the reading (core::UsageAccumulator),
// keeps the rows in the UsageStore port (final when the lease ends, running ones every `flush`), and
// runs the reclaim policy (core::ReclaimPolicy), whose decisions go to the audit table and then to the
// injected actions: warn(lease, message) and release(lease, reason).
// Thread-safety: every public member may be called from any thread. observe() runs one at a time
// (the hub's thread); the lease source and the actions are called without the ledger's lock held.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ports/clock.hpp"
#include "core/ports/usage_store.hpp"
#include "core/reclaim.hpp"
#include "core/usage.hpp"
#include "platform/clock.hpp"
#include "sampler/hub.hpp"

namespace gf::node {

struct LedgerOptions {
  core::UsageOptions usage;
  core::ReclaimOptions reclaim;
  std::chrono::milliseconds flush{10000};  // running rows are written at most this often
};

struct LeaseSource {
  std::function<Result<std::vector<core::Lease>>()> active;
  // The leases among these ids that the source knows, ended or not (one call per reading for all the
  // leases that left the active list; an id it does not return is taken as ended at that reading).
  std::function<Result<std::vector<core::Lease>>(const std::vector<std::string>& ids)> find;
  // The leases that ended at or after since_ms (Unix epoch ms), so that one created and ended between
  // two readings — never in an active list — is still accounted. May be empty (such leases are missed).
  std::function<Result<std::vector<core::Lease>>(std::int64_t since_ms)> ended_since;
};

// Monotonic per-user totals (final rows plus the running ones), for Prometheus counters.
struct UserUsageCounter {
  std::string user;
  double held_gpu_s = 0, busy_gpu_s = 0, energy_j = 0;
};

class UsageLedger {
 public:
  using Warn = std::function<void(const std::string& lease_id, const std::string& message)>;
  using Release = std::function<void(const std::string& lease_id, const std::string& reason)>;

  UsageLedger(std::unique_ptr<core::UsageStore> store, LeaseSource source, Warn warn, Release release,
              LedgerOptions options, const core::Clock& clock = platform::system_clock());
  ~UsageLedger();
  UsageLedger(const UsageLedger&) = delete;
  UsageLedger& operator=(const UsageLedger&) = delete;

  // Loads the final totals and the rows a previous run left unfinished. Call before observe().
  Result<void> load();
  // One collection. Never throws; a failing source or store is logged (once per new message).
  void observe(const core::Snapshot& snapshot);
  // Subscribes observe() to the hub's collections every `interval` (aligned, like the agent's loop, so
  // they share the driver query); the returned handle unsubscribes.
  sampler::SampleHub::Subscription attach(sampler::SampleHub& hub, std::chrono::nanoseconds interval);

  // Rows of leases held since since_ms: the stored ones with the running ones (fresher) over them.
  Result<std::vector<core::LeaseUsage>> since(std::int64_t since_ms);
  // The stored rows of these leases (their efficiency line), by lease id; missing ones are left out.
  Result<std::map<std::string, core::LeaseUsage>> rows_of(const std::vector<std::string>& lease_ids);
  std::vector<UserUsageCounter> counters();
  // Writes the running rows now (at stop).
  void flush();

 private:
  void note_error(const std::string& what);
  void write_running_locked(std::int64_t now_ms);

  std::unique_ptr<core::UsageStore> store_;
  LeaseSource source_;
  Warn warn_;
  Release release_;
  LedgerOptions options_;
  const core::Clock& clock_;

  std::mutex mu_;  // guards everything below
  core::UsageAccumulator acc_;
  core::ReclaimPolicy policy_;
  std::map<std::string, core::UsageTotals> final_by_user_;
  std::optional<std::int64_t> last_flush_ms_;
  std::string last_error_;
  // For ended_since: the latest reading's time, and the leases already made final, by end time (an
  // ended lease the source returns again must not be counted twice; pruned once out of the window).
  std::optional<std::int64_t> last_observed_ms_;
  std::map<std::string, std::int64_t> finalized_;
};

}  // namespace gf::node
