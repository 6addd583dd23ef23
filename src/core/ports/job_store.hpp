#pragma once
// JobStore port: the node's lease store plus the record of jobs (core/job.hpp) and the lease history. The node's job
// service (node/) depends on this interface; store/ implements it on SQLite. Implementations need not be thread-safe:
// one JobStore (connection) per thread.
#include <chrono>
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

// A page of the job record, filtered (empty fields: no filter), newest first.
struct JobQuery {
  std::string status;
  std::string user;                  // the owner's user name
  std::optional<std::uint32_t> uid;  // the owner's uid
  std::string task;
  std::size_t limit = 50;
  std::size_t offset = 0;
  // false: each record's metrics.gpu_monitoring.series is left out (has_series: true in its place), in
  // the store, so a list page never copies the samples of every run it shows.
  bool with_series = true;
  // When not 0, rows stop once the page's records (record, command line and name, as stored) would
  // pass this many bytes; the first row is always read. JobPage::truncated says rows were left out.
  std::size_t max_bytes = 0;
};
struct JobPage {
  std::vector<Job> jobs;
  std::uint64_t total = 0;  // rows matching the filters, all pages
  bool truncated = false;   // max_bytes ended the page before limit did
};
// One task's runs summed over the whole record (not a page of it).
struct TaskTotals {
  std::string task;
  std::uint64_t runs = 0, succeeded = 0, failed = 0, running = 0;
  double gpu_hours = 0;  // GPUs held × run time; a running job counts up to now
  std::int64_t last_started_ms = 0;
  std::optional<std::uint32_t> owner_uid;  // whose runs these are (a task name is not unique across users)
  std::string owner_user;
};
struct TaskPage {
  std::vector<TaskTotals> tasks;  // the most recently started task first
  std::uint64_t total = 0;        // tasks matching, all pages
};

class JobStore : public LeaseStore {
 public:
  // Leases ended or not, newest first.
  virtual Result<std::vector<Lease>> history(std::size_t limit) = 0;
  // Leases released at or after since_ms (the store's clock), newest first, at most `limit`: what
  // history() filtered would give, read through the store's index on the release time.
  virtual Result<std::vector<Lease>> ended_since(std::int64_t since_ms, std::size_t limit) = 0;

  virtual Result<void> put_job(const Job& j) = 0;  // insert or replace
  virtual Result<std::optional<Job>> job(const std::string& id) = 0;
  virtual Result<std::vector<Job>> jobs(std::size_t limit) = 0;  // newest first
  // A filtered page of jobs, newest first, with the count of all matching.
  virtual Result<JobPage> jobs_page(const JobQuery& q) = 0;
  // Tasks with their totals (q.status unused; q.task: that task only; q.user/q.uid filter the runs counted).
  virtual Result<TaskPage> task_totals(const JobQuery& q) = 0;
  // How many jobs are in each status ("running", "succeeded", …).
  virtual Result<std::map<std::string, std::uint64_t>> job_counts() = 0;

  // Bounds on the record (issue 20, finding 4). A job is finished when its status is neither "waiting"
  // nor "running"; its age is counted from when the store last wrote it (the store's clock, never a
  // time the writer sent). How many records the uid owns (runs whose owner died are turned "lost" first,
  // so that they count as finished).
  virtual Result<std::uint64_t> count_jobs(std::uint32_t uid) = 0;
  // Deletes up to n of the uid's finished records, least recently written first; how many it deleted.
  virtual Result<std::size_t> prune_oldest_finished(std::uint32_t uid, std::size_t n) = 0;
  // Deletes every finished record last written more than `age` ago; how many it deleted.
  virtual Result<std::size_t> prune_finished_older_than(std::chrono::milliseconds age) = 0;

  // Where the store lives, for people (a file path).
  virtual const std::string& path() const noexcept = 0;
};

}  // namespace gf::core
