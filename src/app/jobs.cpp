#include "app/jobs.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include "platform/procfs.hpp"
#include "wire/json.hpp"

namespace gf::app {

Result<std::unique_ptr<store::NodeStore>> open_store(const std::string& db_path) {
  return store::NodeStore::open(db_path.empty() ? store::default_db_path() : db_path);
}

Result<JobContext> open_job_context(const GlobalOptions& g, const std::string& db_path) {
  JobContext jc{open_context(g), nullptr, nullptr, {}};
  if (jc.node.explicit_backend_failed) {
    std::string why;
    for (const auto& l : describe_steps(jc.node.steps)) why += (why.empty() ? "" : "; ") + l;
    return make_error(ErrorKind::Unsupported, why);
  }
  auto st = open_store(db_path);
  if (!st) return st.error();
  jc.store = std::move(*st);
  sampler::Monitor* m = jc.node.monitor.get();
  jc.query = [m] { return m->snapshot(false); };
  core::Topology topology;
  if (auto t = m->topology(); t) topology = std::move(*t);
  jc.allocator = std::make_unique<scheduler::NodeAllocator>(*jc.store, std::move(topology));
  return jc;
}

Result<std::optional<AgentClient>> connect_agent(const GlobalOptions& g, const std::string& db) {
  auto where = find_agent(g.socket);
  if (!where) return std::optional<AgentClient>();
  if (!db.empty()) {
    if (where->own_user) return std::optional<AgentClient>();  // one user's own files: their choice
    return make_error(ErrorKind::Usage,
                      fmt::format("this node has an agent ({}), the only writer of its leases and jobs; --db would "
                                  "bypass it (leave --db out, or give --socket none for a store of your own)",
                                  where->path));
  }
  auto c = AgentClient::connect(where->path);
  if (!c) {
    const bool stale = c.error().kind == ErrorKind::NotFound || c.error().kind == ErrorKind::Unavailable;
    if (where->own_user && stale) return std::optional<AgentClient>();
    return make_error(ErrorKind::Failed, c.error().message);  // exit 1, never "no GPUs" (75)
  }
  return std::optional<AgentClient>(std::move(*c));
}

core::LeaseOwner owner_of(std::uint32_t pid) {
  core::LeaseOwner o;
  o.pid = pid;
  o.start_time = platform::ProcReader().start_time(pid).value_or(0);
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res) == 0 && res)
    o.user = res->pw_name;
  else
    o.user = std::to_string(::geteuid());
  return o;
}

std::string format_time_ms(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", tm);
}

}  // namespace gf::app

namespace gf::app {

std::string iso_ms(std::int64_t ms) {
  return wire::iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)));
}

nlohmann::json finished_run_json(const FinishedRun& r) {
  const core::Job& job = r.job;
  const std::int64_t ended = job.ended_at_ms.value_or(job.started_at_ms);
  nlohmann::json rec{{"id", job.id},
                     {"name", job.name},
                     {"command", r.command},
                     {"status", job.status},
                     {"exit_code", job.exit_code ? nlohmann::json(*job.exit_code) : nlohmann::json(nullptr)},
                     {"queued_at", iso_ms(r.queued_at_ms)},
                     {"started_at", iso_ms(job.started_at_ms)},
                     {"ended_at", iso_ms(ended)},
                     {"duration_seconds", static_cast<double>(ended - job.started_at_ms) / 1000.0},
                     {"lease_id", job.lease_id},
                     {"backend", r.backend},
                     {"host", r.host},
                     {"task", job.task.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.task)},
                     {"gpu_info", r.gpu_info},
                     {"metrics", {{"gpu_monitoring", wire::run_report_json(r.report)}}}};
  if (!r.docker_image.empty()) {
    rec["docker"] = {{"image", r.docker_image},
                     {"container_id", r.container_id},
                     {"error", r.docker_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.docker_error)}};
  }
  return rec;
}

}  // namespace gf::app
