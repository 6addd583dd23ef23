#include "app/serve_usage.hpp"

#include <algorithm>
#include <cstdio>

#include "platform/log.hpp"
#include "store/usage_store.hpp"

namespace gf::app {

std::unique_ptr<node::UsageLedger> make_usage_ledger(const ServeConfig& c, node::NodeRecords& records,
                                                     node::Arbiter& arbiter, ReclaimNotice notice) {
  auto st = store::UsageStore::open(c.db);
  if (!st) {
    std::fprintf(stderr, "gpufleet: no GPU accounting: %s\n", st.error().message.c_str());
    return nullptr;
  }
  node::LeaseSource source;
  source.active = [&records] { return records.active(); };
  // Leases that just ended are among the newest; 1000 covers far more than end between two readings.
  source.find = [&records](const std::vector<std::string>& ids) -> Result<std::vector<core::Lease>> {
    auto all = records.history(1000);
    if (!all) return all.error();
    std::vector<core::Lease> out;
    for (auto& l : *all)
      if (std::find(ids.begin(), ids.end(), l.id) != ids.end()) out.push_back(std::move(l));
    return out;
  };
  // Asked at every reading: only the leases that ended since (the store's index on the release time),
  // not the whole history filtered here — 1 000 leases read back every second, and a query per lease
  // for its GPUs, were most of the agent's CPU on a node with a history of leases.
  source.ended_since = [&records](std::int64_t since_ms) { return records.ended_since(since_ms, 1000); };
  auto warn = [notice, &arbiter](const std::string& lease, const std::string& message) {
    platform::log_line("reclaim", "warning for lease " + lease + ": " + message);
    (void)arbiter.warn(lease, message);
    if (notice) notice("lease_warning", lease, message);
  };
  auto release = [notice, &arbiter](const std::string& lease, const std::string& reason) {
    auto r = arbiter.release(lease, true, reason);
    if (!r) {
      platform::log_line("reclaim", "cannot release lease " + lease + ": " + r.error().message);
      return;
    }
    if (*r && notice) notice("lease_reclaimed", lease, reason);
  };
  node::LedgerOptions o;
  o.usage.busy_threshold_pct = c.busy_threshold_pct;
  // Gaps longer than a few intervals (the agent or the driver stalled) are not integrated.
  o.usage.max_gap = std::max(std::chrono::milliseconds(1000), 3 * c.interval);
  o.reclaim = c.reclaim;
  auto ledger =
      std::make_unique<node::UsageLedger>(std::move(*st), std::move(source), std::move(warn), std::move(release), o);
  if (auto l = ledger->load(); !l) {
    std::fprintf(stderr, "gpufleet: no GPU accounting: %s\n", l.error().message.c_str());
    return nullptr;
  }
  return ledger;
}

}  // namespace gf::app
