#pragma once
// A job: one recorded run of a command on leased GPUs (`gpufleet run`, or one grid point of `gpufleet
// task run`). The seeds call the runs of a task's parameter grid "experiments"; that word stays as an
// alias (GET /api/v1/experiments/{id}, the store's table name), and "job" is the name everywhere else.
#include <cstdint>
#include <optional>
#include <string>

#include "core/ports/lease_store.hpp"

namespace gf::core {

struct Job {
  std::string id;
  std::string name;
  std::string status;   // "waiting", "running", "succeeded", "failed", "no_gpus", "interrupted", "lost"
  std::string command;  // JSON array text
  std::optional<int> exit_code;
  std::int64_t started_at_ms = 0;
  std::optional<std::int64_t> ended_at_ms;
  std::string lease_id;
  std::string record;  // the whole record as JSON text (gpu_info, metrics, …)
  LeaseOwner owner;    // the gpufleet process running it: a dead owner turns waiting/running into "lost"
  std::string task;    // the task whose grid this run is one point of (`gpufleet task run`); empty for a lone run
};

}  // namespace gf::core
