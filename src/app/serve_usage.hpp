#pragma once
// The agent's accounting and idle-lease reclaim, wired for `gpufleet serve`: a UsageLedger over the
// node file's usage tables, fed the node store's leases (read through the records view). A reclaim
// warning and release go through the arbiter, the node's one writer (the owner's CLI hears
// lease_warning / lease_ended on the agent socket); both are logged.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "app/serve_config.hpp"
#include "node/arbiter.hpp"
#include "node/node_records.hpp"
#include "node/usage_ledger.hpp"

namespace gf::app {

// Told of each reclaim step as it happens: event "lease_warning" or "lease_reclaimed" (the WebSocket
// clients get it). May be empty.
using ReclaimNotice = std::function<void(std::string_view event, const std::string& lease, const std::string& message)>;

// nullptr (with the reason printed) when the usage tables cannot be opened.
// records and arbiter outlive the ledger.
std::unique_ptr<node::UsageLedger> make_usage_ledger(const ServeConfig& c, node::NodeRecords& records,
                                                     node::Arbiter& arbiter, ReclaimNotice notice = {});

}  // namespace gf::app
