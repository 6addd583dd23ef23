#pragma once
// Per-lease usage rows (table lease_usage) and the audit log of idle-lease reclaim decisions (table
// reclaim_audit) in the node's SQLite file, on their own connection. Not thread-safe: one per thread.
#include <memory>
#include <string>

#include "core/ports/usage_store.hpp"
#include "store/sqlite.hpp"

namespace gf::store {

class UsageStore final : public core::UsageStore {
 public:
  static Result<std::unique_ptr<UsageStore>> open(const std::string& path);

  Result<void> put(const std::vector<core::LeaseUsage>& rows) override;
  Result<std::vector<core::LeaseUsage>> since(std::int64_t since_ms) override;
  Result<std::vector<core::LeaseUsage>> unfinished() override;
  Result<std::optional<core::LeaseUsage>> get(const std::string& lease_id) override;
  Result<std::map<std::string, core::UsageTotals>> final_totals_by_user() override;
  Result<void> audit(const core::ReclaimDecision& d) override;

 private:
  explicit UsageStore(Db db) : db_(std::move(db)) {}
  Result<std::vector<core::LeaseUsage>> load(const char* where_sql, std::int64_t arg);
  Db db_;
};

}  // namespace gf::store
