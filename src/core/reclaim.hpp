#pragma once
// Idle-lease reclaim, off by default. A lease is idle in a reading when none of its GPUs runs a
// process of the lease owner and each GPU's utilization is under the threshold. Once it has been
// idle for idle_for, the owner is warned (once); a grace period after the warning, still idle, it is
// released (never without a warning first, even when readings were missed). A reading in
// which the lease is not idle starts the count again. Pure: readings and time are passed in.
// Reclaim never acts on missing evidence: a GPU without a utilization reading, absent from the
// reading, running a process whose user could not be resolved, or a node where some processes may
// be invisible to the agent, makes the lease count as not idle.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ports/lease_store.hpp"
#include "core/snapshot.hpp"

namespace gf::core {

struct ReclaimOptions {
  bool enabled = false;
  unsigned utilization_threshold_pct = 5;
  std::chrono::milliseconds idle_for{std::chrono::minutes(30)};
  std::chrono::milliseconds grace{std::chrono::minutes(10)};
};

// What one GPU of the lease showed: the evidence recorded with a decision.
struct ReclaimEvidence {
  unsigned gpu = 0;
  std::optional<unsigned> utilization_pct;  // in the deciding reading
  unsigned max_utilization_pct = 0;         // the most seen since the lease became idle
  std::vector<std::string> process_users;   // users of the processes on it (none of them the owner)
};

enum class ReclaimAction : unsigned char { Warn, Release };
std::string_view to_string(ReclaimAction a) noexcept;

struct ReclaimDecision {
  ReclaimAction action = ReclaimAction::Warn;
  std::string lease_id;
  std::string user;
  std::int64_t at_ms = 0;
  std::int64_t idle_since_ms = 0;
  std::string message;  // one sentence for the owner and the log
  std::vector<ReclaimEvidence> evidence;
};

// Not thread-safe.
class ReclaimPolicy {
 public:
  explicit ReclaimPolicy(ReclaimOptions options = {}) : options_(options) {}

  // One reading of the node with its active leases; returns what to do now (nothing when disabled).
  // A lease gets at most one Warn per idle period and one Release.
  std::vector<ReclaimDecision> evaluate(const Snapshot& snapshot, const std::vector<Lease>& active);
  const ReclaimOptions& options() const noexcept { return options_; }

 private:
  struct State {
    std::int64_t idle_since_ms = 0;
    std::optional<std::int64_t> warned_at_ms;
    bool released = false;
    std::map<unsigned, unsigned> max_util;  // by GPU index, since idle_since
  };
  ReclaimOptions options_;
  std::map<std::string, State> state_;  // by lease id: the leases idle now
};

}  // namespace gf::core
