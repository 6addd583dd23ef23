#pragma once
// Where `run` takes its lease and keeps its job record: the node's agent over its socket (a shared node:
// the agent is the only writer) or, without an agent, the per-user store directly. run_job is written
// once against this interface; the two implementations differ only in who decides and who writes.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "core/job.hpp"
#include "core/ports/lease_store.hpp"
#include "scheduler/node_allocator.hpp"

namespace gf::app {

struct Grant {
  core::Lease lease;
  std::vector<unsigned> indices;  // the GPUs to sample
  nlohmann::json gpu_info;        // the record's gpu_info (wire::gpu_info_json)
};

class NodeLink {
 public:
  virtual ~NodeLink() = default;
  // The local backend, for sampling the GPUs while the job runs.
  virtual Context& node() = 0;
  // Inserts or replaces the job's record; the agent may give the job its id.
  virtual Result<void> put_job(core::Job& job) = 0;
  // Waits (wo.timeout, wo.cancel, wo.progress) for the GPUs; the lease lasts until release() or our exit.
  virtual Result<Grant> acquire(const scheduler::AllocationRequest& req, const scheduler::WaitOptions& wo) = 0;
  virtual Result<bool> release(const std::string& lease_id, const std::string& reason) = 0;
  // Around the command's run: the agent's link watches its connection meanwhile and says on stderr when
  // it drops (the job goes on, without a lease).
  virtual void command_started(const std::string& job_id) { (void)job_id; }
  virtual void command_ended() {}
};

// The agent's link when find_agent() finds one (db must then be empty: --db would bypass the agent),
// else the store at db (empty: the default store). Errors: Unsupported (the backend asked for cannot be
// used), Usage (--db with an agent), Failed (the store or the agent).
Result<std::unique_ptr<NodeLink>> open_node_link(const GlobalOptions& g, const std::string& db);

}  // namespace gf::app
