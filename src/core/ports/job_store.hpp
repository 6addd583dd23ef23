#pragma once
// JobStore port: the node's lease store plus the record of jobs (core/job.hpp) and the lease history. The node's job
// service (node/) depends on this interface; store/ implements it on SQLite. Implementations need not be thread-safe:
// one JobStore (connection) per thread.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.hpp"
#include "core/ports/lease_store.hpp"
#include "core/result.hpp"

namespace gf::core {

class JobStore : public LeaseStore {
 public:
  // Leases ended or not, newest first.
  virtual Result<std::vector<Lease>> history(std::size_t limit) = 0;

  virtual Result<void> put_job(const Job& j) = 0;  // insert or replace
  virtual Result<std::optional<Job>> job(const std::string& id) = 0;
  virtual Result<std::vector<Job>> jobs(std::size_t limit) = 0;  // newest first
  // How many jobs are in each status ("running", "succeeded", …).
  virtual Result<std::map<std::string, std::uint64_t>> job_counts() = 0;

  // Where the store lives, for people (a file path).
  virtual const std::string& path() const noexcept = 0;
};

}  // namespace gf::core
