#pragma once
// JobStore port: the node's lease store plus the record of job runs ("experiments") and the lease
// history. The node's job service (node/) depends on this interface; store/ implements it on SQLite.
// Implementations need not be thread-safe: one JobStore (connection) per thread.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/ports/lease_store.hpp"
#include "core/result.hpp"

namespace gf::core {

struct Experiment {
  std::string id;
  std::string name;
  std::string status;   // "waiting", "running", "succeeded", "failed", "no_gpus", "interrupted"
  std::string command;  // JSON array text
  std::optional<int> exit_code;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> ended_at_ms;
  std::string lease_id;
  std::string record;   // the whole record as JSON text (gpu_info, metrics, …)
  LeaseOwner owner;     // the gpufleet process running it: a dead owner turns waiting/running into "lost"
};

class JobStore : public LeaseStore {
 public:
  // Leases ended or not, newest first.
  virtual Result<std::vector<Lease>> history(std::size_t limit) = 0;

  virtual Result<void> put_experiment(const Experiment& e) = 0;  // insert or replace
  virtual Result<std::optional<Experiment>> experiment(const std::string& id) = 0;
  virtual Result<std::vector<Experiment>> experiments(std::size_t limit) = 0;
  // How many experiments are in each status ("running", "succeeded", …).
  virtual Result<std::map<std::string, std::uint64_t>> experiment_counts() = 0;

  // Where the store lives, for people (a file path).
  virtual const std::string& path() const noexcept = 0;
};

}  // namespace gf::core
