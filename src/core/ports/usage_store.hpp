#pragma once
// UsageStore port: where per-lease usage rows and the audit of reclaim decisions are kept.
// Implemented by store/ (SQLite, its own tables in the node's file). One instance per thread.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/reclaim.hpp"
#include "core/result.hpp"
#include "core/usage.hpp"

namespace gf::core {

class UsageStore {
 public:
  virtual ~UsageStore() = default;
  // Inserts or replaces the rows (by lease id), in one transaction.
  virtual Result<void> put(const std::vector<LeaseUsage>& rows) = 0;
  // Rows of leases held at any time since since_ms (running ones included), oldest first.
  virtual Result<std::vector<LeaseUsage>> since(std::int64_t since_ms) = 0;
  // Rows whose lease has not ended (left by a previous run of the agent).
  virtual Result<std::vector<LeaseUsage>> unfinished() = 0;
  virtual Result<std::optional<LeaseUsage>> get(const std::string& lease_id) = 0;
  // Totals of the final rows per user (for the monotonic counters at start).
  virtual Result<std::map<std::string, UsageTotals>> final_totals_by_user() = 0;
  virtual Result<void> audit(const ReclaimDecision& d) = 0;
};

}  // namespace gf::core
