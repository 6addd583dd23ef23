#pragma once
// Docker-image jobs submitted to the agent over HTTP (POST /api/v1/jobs, issue 23 item 8). Each one is
// recorded at once ("waiting"), queued through the node's arbiter as `gpufleet run --docker` queues its
// own (priority, then arrival; waiting up to its wait_s), run in the Docker engine on the GPUs it is
// granted (named by DeviceRequests, never CUDA_VISIBLE_DEVICES), sampled while it runs, and recorded when
// it ends, with the same record as a CLI run. Its life goes out as events: job_queued, job_started (with
// its GPUs), job_finished (with the exit status) and job_failed (no GPUs within the wait, the engine's
// error, a cancel).
//
// The lease is tied to the job's own connection to the arbiter: if the agent dies, its next start ends
// it; the job record's owner is the agent process, so the record turns "lost".
//
// Thread-safety: submit() and cancel() from any thread. Each job in flight has a thread of its own; at
// most max_in_flight at once (a submission beyond that is refused, Unavailable). The destructor cancels
// every job still in flight (their containers are stopped) and joins the threads.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "core/result.hpp"
#include "launch/docker.hpp"
#include "node/arbiter.hpp"
#include "sampler/hub.hpp"
#include "server/api.hpp"

namespace gf::app {

class JobService final : public server::JobSubmitter {
 public:
  struct Options {
    std::size_t max_in_flight = 16;
    std::chrono::milliseconds sample_interval{1000};
    std::string backend;  // the monitor's backend name, for the record
    std::string host;     // the node's name, for the record
    // The engine each job talks to; default: DockerClient::from_environment() (DOCKER_HOST).
    std::function<Result<launch::DockerClient>()> docker;
  };
  // emit(event, data): a job event for /ws and Socket.IO; called from the jobs' threads, never under a lock.
  using Emit = std::function<void(std::string_view event, const nlohmann::json& data)>;

  JobService(node::Arbiter& arbiter, sampler::SampleHub& hub, Emit emit, Options options);
  ~JobService() override;
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  Result<core::Job> submit(const server::JobSubmission& s) override;
  Result<void> cancel(const std::string& id) override;
  std::size_t in_flight() const;

 private:
  struct Flight {
    std::atomic<bool> cancel{false};
    std::thread thread;
    bool done = false;
  };
  struct Run;
  // The job's thread: waits for its GPUs through the arbiter, runs it, records it.
  void run(const std::string& id, server::JobSubmission s, std::shared_ptr<Flight> flight);
  // The grant, or nullopt with the job recorded and announced as ended without GPUs.
  std::optional<scheduler::Allocation> wait_for_gpus(Run& run, Flight& flight);
  // Runs the container on the granted GPUs, samples them, releases the lease and records the run.
  void run_granted(Run& run, const scheduler::Allocation& grant, Flight& flight);
  // Ends the job without GPUs: the record, the event.
  void fail(Run& run, const std::string& status, const std::string& error);
  void reap_locked();  // joins the threads of finished jobs

  node::Arbiter& arbiter_;
  sampler::SampleHub& hub_;
  Emit emit_;
  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Flight>> flights_;
};

}  // namespace gf::app
