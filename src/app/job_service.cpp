#include "app/job_service.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <optional>
#include <utility>
#include <vector>

#include "app/jobs.hpp"
#include "sampler/sampler.hpp"
#include "store/node_store.hpp"
#include "wire/agent_docs.hpp"

namespace gf::app {
namespace {

// How often a waiting job looks at its cancel flag and lets the arbiter do its timer work (expired
// waits, the queue against new readings): the agent socket ticks it too, when there is one.
constexpr std::chrono::milliseconds kPoll{100};

// The token holder, as the arbiter sees it: the agent's own user, an admin (as the lease routes).
node::Peer api_peer() {
  node::Peer p;
  p.uid = static_cast<std::uint32_t>(::geteuid());
  p.gid = static_cast<std::uint32_t>(::getegid());
  p.pid = static_cast<std::uint32_t>(::getpid());
  p.user = "api";
  p.admin = true;
  return p;
}

// The arbiter's answers to one job's connection. Called with the arbiter's lock held: it only stores.
class Answers final : public node::ConnectionSink {
 public:
  void granted(std::int64_t, const scheduler::Allocation& a) override {
    std::lock_guard lock(mu_);
    grant_ = a;
    cv_.notify_all();
  }
  void refused(std::int64_t, const Error& e) override {
    std::lock_guard lock(mu_);
    refusal_ = e;
    cv_.notify_all();
  }
  void waiting(std::int64_t, const node::WaitingEvent&) override {}
  void lease_ended(const std::string&, const std::string&) override {}
  void lease_warning(const std::string&, const std::string&) override {}

  // Waits up to `d` for an answer; true when there is one.
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [&] { return grant_ || refusal_; });
  }
  std::optional<scheduler::Allocation> grant() {
    std::lock_guard lock(mu_);
    return grant_;
  }
  std::optional<Error> refusal() {
    std::lock_guard lock(mu_);
    return refusal_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<scheduler::Allocation> grant_;
  std::optional<Error> refusal_;
};

nlohmann::json gpu_indices(const core::Lease& l) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : l.gpus) out.push_back(g.index);
  return out;
}

}  // namespace

JobService::JobService(node::Arbiter& arbiter, sampler::SampleHub& hub, Emit emit, Options options)
    : arbiter_(arbiter), hub_(hub), emit_(std::move(emit)), options_(std::move(options)) {
  if (!options_.docker) options_.docker = [] { return launch::DockerClient::from_environment(); };
}

JobService::~JobService() {
  std::map<std::string, std::shared_ptr<Flight>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(flights_);
  }
  for (auto& [id, f] : all) f->cancel.store(true);
  for (auto& [id, f] : all)
    if (f->thread.joinable()) f->thread.join();
}

std::size_t JobService::in_flight() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [id, f] : flights_) n += f->done ? 0 : 1;
  return n;
}

void JobService::reap_locked() {
  for (auto it = flights_.begin(); it != flights_.end();) {
    if (it->second->done && it->second->thread.joinable()) {
      it->second->thread.join();
      it = flights_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<core::Job> JobService::submit(const server::JobSubmission& s) {
  core::Job job;
  job.id = store::new_id();
  job.name = s.name.empty() ? s.image : s.name;
  job.command = nlohmann::json(s.args).dump();
  job.status = "waiting";
  job.started_at_ms = store::now_ms();
  job.owner = owner_of(static_cast<std::uint32_t>(::getpid()));
  job.record = nlohmann::json{{"id", job.id},
                              {"name", job.name},
                              {"status", "waiting"},
                              {"submitted_via", "api"},
                              {"docker", {{"image", s.image}}},
                              {"gpus", s.need.gpus}}
                   .dump();
  std::lock_guard lock(mu_);
  reap_locked();
  if (flights_.size() >= options_.max_in_flight)
    return make_error(
        ErrorKind::Unavailable,
        fmt::format("{} submitted jobs are already waiting or running (the most at once); try later", flights_.size()));
  auto put = arbiter_.job_put(api_peer(), job);
  if (!put) return put.error();
  job.id = *put;
  auto flight = std::make_shared<Flight>();
  flights_[job.id] = flight;
  flight->thread = std::thread([this, id = job.id, s, flight] { run(id, s, flight); });
  return job;
}

Result<void> JobService::cancel(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = flights_.find(id);
  if (it == flights_.end() || it->second->done)
    return make_error(ErrorKind::NotFound,
                      fmt::format("no job {} waiting or running that was submitted through the API", id));
  it->second->cancel.store(true);
  return {};
}

// One submitted job as its thread runs it.
struct JobService::Run {
  core::Job job;
  server::JobSubmission s;
  nlohmann::json command;
  std::int64_t queued_at_ms = 0;
  node::ConnectionId conn = 0;  // the arbiter connection that holds the lease, once granted
};

void JobService::fail(Run& run, const std::string& status, const std::string& error) {
  core::Job& job = run.job;
  job.status = status;
  job.ended_at_ms = store::now_ms();
  job.record = nlohmann::json{{"id", job.id},
                              {"name", job.name},
                              {"command", run.command},
                              {"status", status},
                              {"error", error},
                              {"submitted_via", "api"},
                              {"docker", {{"image", run.s.image}}},
                              {"queued_at", iso_ms(run.queued_at_ms)},
                              {"ended_at", iso_ms(*job.ended_at_ms)}}
                   .dump();
  (void)arbiter_.job_put(api_peer(), job);
  emit_("job_failed", {{"id", job.id}, {"name", job.name}, {"status", status}, {"error", error}});
}

std::optional<scheduler::Allocation> JobService::wait_for_gpus(Run& run, Flight& flight) {
  auto answers = std::make_shared<Answers>();
  const node::ConnectionId conn = arbiter_.connect(api_peer(), answers);
  node::AcquireRequest req;
  req.need = run.s.need;
  req.name = run.job.name;
  req.job_id = run.job.id;
  req.priority = run.s.priority;
  req.wait = run.s.wait;
  req.tie = core::LeaseTie::Connection;
  std::optional<scheduler::Allocation> grant;
  auto no_gpus = [&](const Error& e) {
    fail(run, e.kind == ErrorKind::Unavailable ? "no_gpus" : "failed",
         e.kind == ErrorKind::Unavailable ? "no GPUs within the wait: " + e.message : e.message);
  };
  if (auto now = arbiter_.acquire(conn, 1, req); !now) {
    no_gpus(now.error());
  } else if (*now) {
    grant = std::move(*now);
  } else {
    bool cancel_sent = false;
    while (!answers->wait_for(kPoll)) {
      if (flight.cancel.load() && !cancel_sent) {
        (void)arbiter_.cancel(conn, 1);  // answers "cancelled" through the sink
        cancel_sent = true;
      }
      arbiter_.tick();
    }
    grant = answers->grant();
    if (!grant && flight.cancel.load())
      fail(run, "interrupted", "cancelled through the API while waiting for GPUs");
    else if (!grant)
      no_gpus(answers->refusal().value_or(Error{"the arbiter gave no answer", ErrorKind::Failed}));
  }
  // The lease is connection-tied: it lasts until the job releases it, then the connection goes.
  if (grant)
    run.conn = conn;
  else
    arbiter_.disconnect(conn);
  return grant;
}

void JobService::run_granted(Run& run, const scheduler::Allocation& grant, Flight& flight) {
  core::Job& job = run.job;
  const core::Lease& lease = grant.lease;
  std::vector<std::string> ids;
  std::vector<unsigned> indices;
  for (const auto& g : lease.gpus) {
    ids.push_back(std::to_string(g.index));
    indices.push_back(g.index);
  }
  job.status = "running";
  job.lease_id = lease.id;
  job.started_at_ms = store::now_ms();
  (void)arbiter_.job_put(api_peer(), job);
  emit_("job_started", {{"id", job.id}, {"name", job.name}, {"gpus", gpu_indices(lease)}, {"lease", lease.id}});

  auto smp = sampler::Sampler::create(hub_, options_.sample_interval, indices);
  if (smp) (*smp)->start();
  int code = 0;
  std::string docker_error, container_id;
  if (flight.cancel.load()) {
    docker_error = "cancelled through the API before the container started";
  } else if (auto client = options_.docker(); !client) {
    docker_error = client.error().message;
  } else {
    launch::DockerRunSpec spec;
    spec.image = run.s.image;
    spec.cmd = run.s.args;
    spec.gpu_ids = ids;
    spec.labels = {{"gpufleet.job", job.id}, {"gpufleet.lease", lease.id}};
    auto res = client->run(spec, &flight.cancel);
    if (!res) {
      docker_error = flight.cancel.load() ? "cancelled through the API: " + res.error().message : res.error().message;
    } else {
      code = res->exit_code;
      container_id = res->container_id;
    }
  }
  (void)arbiter_.release(lease.id, true, "job ended");
  const core::RunReport report = smp ? (*smp)->stop() : core::RunReport{};

  const bool cancelled = flight.cancel.load();
  job.exit_code = docker_error.empty() ? std::optional<int>(code) : std::nullopt;
  job.ended_at_ms = store::now_ms();
  job.status = !docker_error.empty() ? (cancelled ? "interrupted" : "failed")
                                     : (code == 0 ? "succeeded" : (cancelled ? "interrupted" : "failed"));
  nlohmann::json gpu_info = wire::gpu_info_json(grant.selection, *grant.snapshot, run.s.need.gpus);
  auto rec = finished_run_json({job, run.command, run.queued_at_ms, options_.backend, options_.host,
                                std::move(gpu_info), report, run.s.image, container_id, docker_error});
  rec["submitted_via"] = "api";
  if (!docker_error.empty()) rec["error"] = docker_error;
  job.record = rec.dump();
  (void)arbiter_.job_put(api_peer(), job);
  if (docker_error.empty() && !cancelled)
    emit_("job_finished", {{"id", job.id}, {"name", job.name}, {"status", job.status}, {"exit_code", code}});
  else
    emit_("job_failed", {{"id", job.id},
                         {"name", job.name},
                         {"status", job.status},
                         {"error", docker_error.empty() ? "cancelled through the API" : docker_error}});
}

void JobService::run(const std::string& id, server::JobSubmission s, std::shared_ptr<Flight> flight) {
  Run run;
  run.job.id = id;
  run.job.name = s.name.empty() ? s.image : s.name;
  run.job.command = nlohmann::json(s.args).dump();
  run.job.owner = owner_of(static_cast<std::uint32_t>(::getpid()));
  run.job.started_at_ms = store::now_ms();
  run.queued_at_ms = run.job.started_at_ms;
  run.command = s.args;
  run.s = std::move(s);
  emit_("job_queued", {{"id", id}, {"name", run.job.name}, {"image", run.s.image}, {"gpus", run.s.need.gpus}});
  if (auto grant = wait_for_gpus(run, *flight)) {
    run_granted(run, *grant, *flight);
    arbiter_.disconnect(run.conn);
  }
  std::lock_guard lock(mu_);
  flight->done = true;
}

}  // namespace gf::app
