#pragma once
// The agent's accounting and idle-lease reclaim, wired for `gpufleet serve`: a UsageLedger over the
// node file's usage tables, fed the node store's leases, releasing through the node store and warning
// in the log.
// GF-MERGE(arbiter): the arbiter replaces release/warn with its own (release through the arbiter,
// warnings as the agent socket's lease_warning event to the owner's CLI).
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "app/serve_config.hpp"
#include "node/node_jobs.hpp"
#include "node/usage_ledger.hpp"

namespace gf::app {

// Told of each reclaim step as it happens: event "lease_warning" or "lease_reclaimed" (the WebSocket
// clients get it). May be empty.
using ReclaimNotice = std::function<void(std::string_view event, const std::string& lease, const std::string& message)>;

// nullptr (with the reason printed) when the usage tables cannot be opened.
std::unique_ptr<node::UsageLedger> make_usage_ledger(const ServeConfig& c, node::NodeJobs& jobs,
                                                     ReclaimNotice notice = {});

}  // namespace gf::app
