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
  JobContext jc{open_context(g), nullptr, nullptr};
  if (jc.node.explicit_backend_failed) {
    std::string why;
    for (const auto& l : describe_steps(jc.node.steps)) why += (why.empty() ? "" : "; ") + l;
    return make_error(ErrorKind::Unsupported, why);
  }
  auto st = open_store(db_path);
  if (!st) return st.error();
  jc.store = std::move(*st);
  scheduler::SnapshotSource src;
  sampler::Monitor* m = jc.node.monitor.get();
  src.fresh = [m] { return m->snapshot(false); };
  if (auto t = m->topology(); t) src.topology = std::move(*t);
  jc.allocator = std::make_unique<scheduler::NodeAllocator>(*jc.store, std::move(src));
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
