#pragma once
// Shared pieces of the allocation and job verbs: opening the node store and the allocator, lease
// owners, and the JSON record of a job run (an "experiment").
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "app/context.hpp"
#include "core/stats.hpp"
#include "scheduler/allocation_json.hpp"
#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"
#include "wire/json.hpp"

namespace gf::app {

struct JobContext {
  Context node;
  std::unique_ptr<store::NodeStore> store;
  std::unique_ptr<scheduler::NodeAllocator> allocator;
};

// Opens the backend, the store (db_path empty: the default) and an allocator over them. On failure,
// *exit_code says which part failed (kExitNoBackend or kExitError).
Result<JobContext> open_job_context(const GlobalOptions& g, const std::string& db_path, int* exit_code);
// The node store at db_path (empty: store::default_db_path()).
Result<std::unique_ptr<store::NodeStore>> open_store(const std::string& db_path);

// The owner of a lease: this process, or (for `alloc`) the calling shell.
core::LeaseOwner owner_of(std::uint32_t pid);

using scheduler::gpu_info_json;
using wire::lease_json;
std::string format_time_ms(std::int64_t ms);  // local "YYYY-MM-DD HH:MM:SS"

}  // namespace gf::app
