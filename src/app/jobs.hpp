#pragma once
// Shared pieces of the allocation and job verbs: opening the node store and the allocator, lease
// owners, and the JSON record of a job (core/job.hpp).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "app/agent_client.hpp"
#include "app/context.hpp"
#include "core/stats.hpp"
#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"
#include "wire/agent_docs.hpp"
#include "wire/json.hpp"

namespace gf::app {

// The agentless path: this process decides on the store directly (no agent runs, or --socket none).
struct JobContext {
  Context node;
  std::unique_ptr<store::NodeStore> store;
  std::unique_ptr<scheduler::NodeAllocator> allocator;
  scheduler::ReadingQuery query;  // a new driver query: what each of this process's decisions is made on
};

// Opens the backend, the store (db_path empty: the default) and an allocator over them. On failure the
// error's kind says which part failed: Unsupported (the backend asked for cannot be used here) or
// Failed (the store).
Result<JobContext> open_job_context(const GlobalOptions& g, const std::string& db_path);
// The node store at db_path (empty: store::default_db_path()).
Result<std::unique_ptr<store::NodeStore>> open_store(const std::string& db_path);

// The node's agent, connected, when there is one (find_agent); nullopt when there is none and the verb
// uses the store. db is the verb's --db: with an agent it is a Usage error (it would bypass the
// arbiter). A socket that was named or is the root agent's but cannot be reached is an error (falling
// back to a store of one's own is what split a shared node's leases); this user's own agent's stale
// socket falls back to the store.
Result<std::optional<AgentClient>> connect_agent(const GlobalOptions& g, const std::string& db);

// The owner of a lease: this process, or (for `alloc`) the calling shell.
core::LeaseOwner owner_of(std::uint32_t pid);

using wire::lease_json;
std::string format_time_ms(std::int64_t ms);  // local "YYYY-MM-DD HH:MM:SS"
std::string iso_ms(std::int64_t ms);          // UTC ISO 8601 with microseconds, as every document writes times

// The record of a run that got its GPUs and ended (`gpufleet run`, and jobs submitted to the agent):
// what core::Job::record holds. docker_image empty: not a Docker run (no "docker" block).
struct FinishedRun {
  const core::Job& job;  // id, name, status, exit_code, started/ended, lease_id, task
  nlohmann::json command;
  std::int64_t queued_at_ms = 0;
  std::string backend;
  std::string host;
  nlohmann::json gpu_info;
  const core::RunReport& report;
  std::string docker_image;
  std::string container_id;
  std::string docker_error;
};
nlohmann::json finished_run_json(const FinishedRun& r);

}  // namespace gf::app
