// `gpufleet run`: wait for GPUs, take the lease, run the command on them (or a Docker container),
// sample while it runs, release, and record the run. Also `jobs` and `show`, which read the record.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "app/child_run.hpp"
#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/jobs.hpp"
#include "app/node_link.hpp"
#include "app/render.hpp"
#include "core/mig.hpp"
#include "launch/docker.hpp"
#include "platform/log.hpp"
#include "sampler/hub.hpp"
#include "sampler/sampler.hpp"
#include "wire/agent_docs.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

std::atomic<bool> g_cancel{false};
bool g_interrupted = false;  // the last run_job was interrupted (SIGINT/SIGTERM/SIGHUP)

extern "C" void on_cancel(int) { g_cancel.store(true); }

void set_handler(int sig, void (*fn)(int)) {
  struct sigaction sa {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

// One line of progress while waiting: rewritten in place on a terminal, printed on change otherwise.
class WaitReporter {
 public:
  explicit WaitReporter(unsigned gpus) : tty_(::isatty(2) == 1), gpus_(gpus) {}
  void operator()(const scheduler::WaitProgress& p) {
    std::string held;
    for (const auto& l : p.holders) {
      std::vector<unsigned> idx;
      for (const auto& gpu : l.gpus) idx.push_back(gpu.index);
      held += fmt::format("{}GPU {} by {} ({})", held.empty() ? "" : ", ", fmt::join(idx, ","),
                          l.name.empty() ? l.job_id : l.name, l.owner.user);
    }
    const std::string first = p.why_not.substr(0, p.why_not.find('\n'));
    // Other users' job and user names are in it: escaped before it reaches the terminal.
    const std::string line = platform::printable(fmt::format("waiting {:.0f} s for {} GPU(s): {}{}",
                                                             std::chrono::duration<double>(p.waited).count(), gpus_,
                                                             first, held.empty() ? "" : " — held: " + held));
    if (tty_) {
      std::fprintf(stderr, "\r\x1b[K%s", line.substr(0, 200).c_str());
      dirty_ = true;
    } else if (first != last_) {
      std::fprintf(stderr, "gpufleet: %s\n", line.c_str());
      last_ = first;
    }
  }
  void done() {
    if (dirty_) std::fputs("\r\x1b[K", stderr);
    dirty_ = false;
  }

 private:
  bool tty_;
  unsigned gpus_;
  bool dirty_ = false;
  std::string last_;
};

// What run checks before any GPU is asked for (a typo must not cost a wait in the queue).
struct RunPlan {
  std::chrono::milliseconds interval{1000};
  std::vector<std::string> binds;
  std::vector<launch::DockerRunSpec::Port> ports;
};
// The plan, or the usage error to print (exit kExitUsage).
Result<RunPlan> plan_run(const RunCommand& r) {
  auto usage = [](std::string m) { return make_error(ErrorKind::Usage, std::move(m)); };
  if (r.argv.empty() && r.docker_image.empty())
    return usage("run: no command given (usage: gpufleet run --gpus N [OPTIONS] -- CMD [ARGS...])");
  if (r.alloc.need.gpus == 0) return usage("run: --gpus must be at least 1");
  RunPlan plan;
  plan.interval = std::chrono::milliseconds(static_cast<long long>(r.interval_s * 1000.0));
  if (plan.interval < sampler::Sampler::kMinInterval || plan.interval > sampler::Sampler::kMaxInterval)
    return usage("--interval must be between 0.05 and 60 seconds");
  if (r.docker_image.empty() && (!r.docker_volumes.empty() || !r.docker_publish.empty()))
    return usage("run: --volume and --publish go with --docker IMAGE");
  for (const auto& v : r.docker_volumes) {
    auto b = launch::parse_bind(v);
    if (!b) return usage("run: " + b.error().message);
    plan.binds.push_back(*b);
  }
  for (const auto& p : r.docker_publish) {
    auto port = launch::parse_port(p);
    if (!port) return usage("run: " + port.error().message);
    plan.ports.push_back(*port);
  }
  return plan;
}

// The job's record as it waits for GPUs: recorded at once (the agent may give it its id).
store::Job waiting_job(const RunCommand& r, NodeLink& link) {
  store::Job job;
  job.id = store::new_id();
  job.name = r.alloc.name.empty() ? (r.docker_image.empty() ? r.argv.front() : r.docker_image) : r.alloc.name;
  job.command = nlohmann::json(r.argv).dump();
  job.task = r.task;
  job.status = "waiting";
  job.started_at_ms = store::now_ms();
  job.record = "{}";
  job.owner = owner_of(static_cast<std::uint32_t>(::getpid()));
  (void)link.put_job(job);
  return job;
}

// Queues for the GPUs, reporting progress, until they come, the wait ends or the user interrupts.
Result<Grant> wait_for_gpus(const RunCommand& r, NodeLink& link, const store::Job& job) {
  scheduler::AllocationRequest req;
  req.need = r.alloc.need;
  req.job_id = job.id;
  req.name = job.name;
  req.priority = r.priority;
  req.owner = job.owner;
  set_handler(SIGINT, on_cancel);
  set_handler(SIGTERM, on_cancel);
  WaitReporter reporter(req.need.gpus);
  scheduler::WaitOptions wo;
  wo.timeout = std::chrono::milliseconds(static_cast<long long>(std::max(0.0, r.wait_s) * 1000.0));
  wo.progress = std::ref(reporter);
  wo.cancel = &g_cancel;
  auto got = link.acquire(req, wo);
  reporter.done();
  return got;
}

// No GPUs came (or the wait was interrupted): the record says so; the exit code.
int record_no_gpus(NodeLink& link, store::Job& job, const Error& e) {
  print_error(e.message);
  g_interrupted = g_cancel.load();
  const bool unavailable = e.kind == ErrorKind::Unavailable;
  job.status = g_cancel.load() ? "interrupted" : (unavailable ? "no_gpus" : "failed");
  job.ended_at_ms = store::now_ms();
  job.record = nlohmann::json{{"id", job.id},
                              {"name", job.name},
                              {"command", nlohmann::json::parse(job.command)},
                              {"status", job.status},
                              {"error", e.message},
                              {"started_at", iso_ms(job.started_at_ms)},
                              {"ended_at", iso_ms(*job.ended_at_ms)}}
                   .dump();
  (void)link.put_job(job);
  if (g_cancel.load()) return 130;
  return exit_code(e);
}

struct CommandOutcome {
  int code = 0;
  std::string docker_error, container_id;
};

// The job in a Docker container: Docker names the GPUs through DeviceRequests; CUDA_VISIBLE_DEVICES is
// not set (seed rule).
CommandOutcome run_container(const RunCommand& r, const RunPlan& plan, const store::Job& job,
                             const std::string& lease_id, const std::vector<std::string>& ids) {
  CommandOutcome out;
  std::string logs;
  auto client = launch::DockerClient::from_environment();
  launch::DockerRunSpec spec;
  spec.image = r.docker_image;
  spec.cmd = r.argv;
  spec.gpu_ids = ids;
  spec.labels = {{"gpufleet.job", job.id}, {"gpufleet.lease", lease_id}};
  spec.binds = plan.binds;
  spec.ports = plan.ports;
  if (!client) {
    out.docker_error = client.error().message;
  } else {
    auto res = client->run(spec, &g_cancel);
    if (!res) {
      out.docker_error = res.error().message;
    } else {
      out.code = res->exit_code;
      out.container_id = res->container_id;
      logs = res->logs_tail;
      for (const auto& w : res->warnings) print_error("docker: " + w);
    }
  }
  if (!logs.empty()) std::fwrite(logs.data(), 1, logs.size(), stdout);
  if (!out.docker_error.empty()) {
    print_error(out.docker_error);
    out.code = kExitMonitorFailed;
  }
  return out;
}

// The command on the leased GPUs: a container, or a foreground child with CUDA_VISIBLE_DEVICES.
CommandOutcome run_command(const RunCommand& r, const RunPlan& plan, const store::Job& job, const std::string& lease_id,
                           const std::vector<std::string>& ids) {
  if (!r.docker_image.empty()) return run_container(r, plan, job, lease_id, ids);
  CommandOutcome out;
  if (g_cancel.load()) {  // a signal between the grant and here: do not start the job
    out.code = 130;
    return out;
  }
  // CUDA numbers GPUs fastest-first unless told otherwise; our indices are the driver's PCI order.
  const std::string visible = fmt::format("{}", fmt::join(ids, ","));
  const ChildOutcome child =
      run_foreground_child(r.argv, {"CUDA_VISIBLE_DEVICES=" + visible, "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                                    "GPUFLEET_LEASE=" + lease_id, "GPUFLEET_JOB=" + job.id});
  if (!child.started) print_error(child.error);
  out.code = child.exit_code;
  if (child.interrupted) g_cancel.store(true);
  return out;
}

}  // namespace

bool last_run_interrupted() { return g_interrupted; }

int run_job(const GlobalOptions& g, const RunCommand& r) {
  g_cancel.store(false);
  g_interrupted = false;
  auto plan = plan_run(r);
  if (!plan) {
    print_error(plan.error().message);
    return kExitUsage;
  }
  auto link = open_node_link(g, r.alloc.db);  // the node's agent, or the store without one
  if (!link) {
    print_error(link.error().message);
    return exit_code(link.error());
  }
  NodeLink& jc = **link;
  store::Job job = waiting_job(r, jc);
  auto got = wait_for_gpus(r, jc, job);
  if (!got) return record_no_gpus(jc, job, got.error());

  const core::Lease lease = got->lease;
  std::vector<std::string> ids;
  for (const auto& gpu : lease.gpus)
    ids.push_back((r.alloc.uuids && !gpu.uuid.empty()) || core::is_mig_uuid(gpu.uuid) ? gpu.uuid
                                                                                      : std::to_string(gpu.index));
  std::fprintf(stderr, "gpufleet: job %s on GPU %s (lease %s)\n", job.id.c_str(),
               fmt::format("{}", fmt::join(ids, ",")).c_str(), lease.id.c_str());
  job.status = "running";
  job.lease_id = lease.id;
  const std::int64_t queued_at_ms = job.started_at_ms;
  job.started_at_ms = store::now_ms();
  (void)jc.put_job(job);

  sampler::SampleHub hub(*jc.node().monitor);
  auto smp = sampler::Sampler::create(hub, plan->interval, got->indices);
  if (smp) (*smp)->start();
  jc.command_started(job.id);
  const CommandOutcome ran = run_command(r, *plan, job, lease.id, ids);
  jc.command_ended();
  // Release first (waiters wake at once), then summarise and record.
  if (auto rel = jc.release(lease.id, "job ended"); !rel)
    print_error("cannot release " + lease.id + ": " + rel.error().message);
  core::RunReport report = smp ? (*smp)->stop() : core::RunReport{};

  const int code = ran.code;
  job.exit_code = code;
  job.ended_at_ms = store::now_ms();
  g_interrupted = g_cancel.load();
  job.status = code == 0 ? "succeeded" : (g_interrupted ? "interrupted" : "failed");
  const nlohmann::json rec =
      finished_run_json({job, nlohmann::json(r.argv), queued_at_ms, jc.node().monitor->backend_name(), hostname(),
                         got->gpu_info, report, r.docker_image, ran.container_id, ran.docker_error});
  job.record = rec.dump();
  if (auto w = jc.put_job(job); !w) print_error("cannot record the run: " + w.error().message);
  if (r.alloc.json) {
    std::printf("%s\n", rec.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr, "gpufleet: job %s %s (exit %d); details: gpufleet show %s\n", job.id.c_str(),
                 job.status.c_str(), code, job.id.c_str());
  }
  return code;
}

namespace {

// The records through the agent (a shared node: every user's jobs, each with its owner).
Result<std::vector<store::Job>> jobs_via_agent(AgentClient& agent) {
  auto r = agent.call("jobs", {{"limit", 200}});
  if (!r) return r.error();
  std::vector<store::Job> out;
  if (auto l = r->find("jobs"); l != r->end() && l->is_array())
    for (const auto& j : *l) out.push_back(wire::job_from_json(j));
  if (r->value("truncated", false))
    std::fprintf(stderr, "gpufleet: the agent sent the newest %zu records, as many as fit in one reply\n", out.size());
  return out;
}
Result<std::optional<store::Job>> job_via_agent(AgentClient& agent, const std::string& id) {
  auto r = agent.call("job", {{"job", id}});
  if (!r) {
    if (r.error().kind == ErrorKind::NotFound) return std::optional<store::Job>();
    return r.error();
  }
  return std::optional<store::Job>(wire::job_from_json(r->value("job", nlohmann::json::object())));
}

}  // namespace

int run_jobs(const GlobalOptions& g, bool json, const std::string& db) {
  auto agent = connect_agent(g, db);
  if (!agent) {
    print_error(agent.error().message);
    return exit_code(agent.error());
  }
  Result<std::vector<store::Job>> list = std::vector<store::Job>{};
  if (*agent) {
    list = jobs_via_agent(**agent);
  } else {
    auto st = open_store(db);
    if (!st) {
      print_error(st.error().message);
      return exit_code(st.error());
    }
    list = (*st)->jobs(200);
  }
  if (!list) {
    print_error(list.error().message);
    return exit_code(list.error());
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : *list) {
      auto rec = nlohmann::json::parse(e.record, nullptr, false);
      out.push_back(
          rec.is_object() && !rec.empty() ? rec : nlohmann::json{{"id", e.id}, {"name", e.name}, {"status", e.status}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-12s  %-11s  %5s  %-19s  %9s  %-24s  %s\n", "JOB", "STATUS", "EXIT", "STARTED", "SECONDS", "GPUS",
              "NAME");
  for (const auto& e : *list) {
    auto rec = nlohmann::json::parse(e.record, nullptr, false);
    std::string gpus = "-";
    // Records are written by their owners, whoever they are: a field of the wrong type shows as "?"
    // rather than ending everyone's listing.
    if (rec.is_object() && rec.contains("gpu_info")) try {
        const auto& gi = rec["gpu_info"];
        // The distinguishing model name ("H100 80GB HBM3"), not the vendor's first word.
        std::string model = gi.value("model", "");
        if (model.rfind("NVIDIA ", 0) == 0) model = model.substr(7);
        gpus = fmt::format("{} × {}", gi.value("count", 0), model);
      } catch (const nlohmann::json::exception&) {
        gpus = "?";
      }
    const std::string secs =
        e.ended_at_ms ? fmt::format("{:.1f}", static_cast<double>(*e.ended_at_ms - e.started_at_ms) / 1000.0) : "-";
    std::printf("%-12s  %-11s  %5s  %-19s  %9s  %-24s  %s\n", platform::printable(e.id).c_str(),
                platform::printable(e.status).c_str(), e.exit_code ? std::to_string(*e.exit_code).c_str() : "-",
                format_time_ms(e.started_at_ms).c_str(), secs.c_str(), platform::printable(gpus).c_str(),
                platform::printable(e.name).c_str());
  }
  if (list->empty()) std::printf("No jobs recorded yet (gpufleet run --gpus N -- CMD).\n");
  return kExitOk;
}

namespace {

// The record's GPU monitoring in the text of `show`: duration and samples, then each GPU's means and
// (NVML GPM) what its utilization was made of. Text from the record is escaped.
void print_monitoring(const nlohmann::json& m) {
  using platform::printable;
  std::printf("monitoring %.1f s, %d samples\n", m.value("monitoring_duration_seconds", 0.0),
              m.value("sample_count", 0));
  for (const auto& item : m["gpu_stats"].items()) {
    const auto& idx = item.key();
    const auto& s = item.value();  // a plain reference: lambdas below may capture it (not a binding)
    auto mean = [&](const char* k) {
      return s.contains(k) && s[k].is_object() ? fmt::format("{:.1f}", s[k].value("mean", 0.0)) : std::string("n/a");
    };
    std::printf(
        "  [%s] %s: util %s %%, memory %s MiB, temp %s °C, power %s W, energy %s J\n", idx.c_str(),
        printable(s.value("name", "")).c_str(), mean("utilization").c_str(), mean("memory_used_mb").c_str(),
        mean("temperature_c").c_str(), mean("power_draw_w").c_str(),
        s["energy_joules"].is_number() ? fmt::format("{:.1f}", s["energy_joules"].get<double>()).c_str() : "n/a");
    // What the utilization was made of (NVML GPM), as percent means; or why there is nothing.
    if (s.contains("profiling") && s["profiling"].is_object()) {
      const auto& p = s["profiling"];
      std::string activity;
      for (const char* k :
           {"sm_active", "sm_occupancy", "tensor_active", "dram_active", "fp64_active", "fp32_active", "fp16_active"}) {
        if (!p.contains(k)) continue;
        // Full statistics, or the bare mean of a record summarised to fit the agent's limit.
        const auto& v = p[k].is_object() && p[k].contains("mean") ? p[k]["mean"] : p[k];
        if (!v.is_number()) continue;
        activity += fmt::format("{}{} {:.1f} %", activity.empty() ? "" : ", ", k, v.get<double>() * 100);
      }
      if (!activity.empty())
        std::printf("      activity (GPM means): %s\n", activity.c_str());
      else if (p.contains("note") && p["note"].is_string())
        std::printf("      activity: n/a (%s)\n", printable(p["note"].get<std::string>()).c_str());
    }
  }
}

}  // namespace

int run_show(const GlobalOptions& g, const std::string& id, bool json, const std::string& db) {
  auto agent = connect_agent(g, db);
  if (!agent) {
    print_error(agent.error().message);
    return exit_code(agent.error());
  }
  Result<std::optional<store::Job>> e = std::optional<store::Job>();
  if (*agent) {
    e = job_via_agent(**agent, id);
  } else {
    auto st = open_store(db);
    if (!st) {
      print_error(st.error().message);
      return exit_code(st.error());
    }
    e = (*st)->job(id);
  }
  if (!e) {
    print_error(e.error().message);
    return exit_code(e.error());
  }
  if (!*e) {
    print_error("no job " + id + " (see gpufleet jobs)");
    return exit_code(ErrorKind::NotFound);
  }
  auto rec = nlohmann::json::parse((*e)->record, nullptr, false);
  if (json) {
    std::printf("%s\n", rec.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  // Text mode shows names, commands and errors escaped; --json above keeps them exact.
  using platform::printable;
  std::printf("job %s  %s  status %s  exit %s\n", printable((*e)->id).c_str(), printable((*e)->name).c_str(),
              printable((*e)->status).c_str(), (*e)->exit_code ? std::to_string(*(*e)->exit_code).c_str() : "-");
  if (rec.is_object()) try {
      if (rec.contains("command")) std::printf("command   %s\n", printable(rec["command"].dump()).c_str());
      if (rec.contains("started_at")) std::printf("started   %s\n", rec["started_at"].get<std::string>().c_str());
      if (rec.contains("ended_at")) std::printf("ended     %s\n", rec["ended_at"].get<std::string>().c_str());
      if (rec.contains("error")) std::printf("error     %s\n", printable(rec["error"].get<std::string>()).c_str());
      if (rec.contains("gpu_info")) {
        const auto& gi = rec["gpu_info"];
        std::printf("gpus      %s × %s (%s)\n", gi["count"].dump().c_str(), printable(gi.value("model", "")).c_str(),
                    gi["gpu_info"].value("allocation_method", "").c_str());
        for (const auto& w : gi["gpu_info"].value("why", nlohmann::json::array()))
          std::printf("          %s\n", printable(w.get<std::string>()).c_str());
      }
      if (rec.contains("metrics") && rec["metrics"].contains("gpu_monitoring"))
        print_monitoring(rec["metrics"]["gpu_monitoring"]);
    } catch (const nlohmann::json::exception& ex) {
      // Written by the job's owner: a field of the wrong type ends the listing here, with what was shown.
      std::printf("(the rest of the record is not in the expected shape: %s)\n", printable(ex.what()).c_str());
    }
  (void)g;
  return kExitOk;
}

}  // namespace gf::app
