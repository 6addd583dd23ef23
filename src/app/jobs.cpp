#include "app/jobs.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include "app/exit_codes.hpp"
#include "platform/procfs.hpp"
#include "wire/json.hpp"

namespace gf::app {

Result<std::unique_ptr<store::NodeStore>> open_store(const std::string& db_path) {
  return store::NodeStore::open(db_path.empty() ? store::default_db_path() : db_path);
}

Result<JobContext> open_job_context(const GlobalOptions& g, const std::string& db_path, int* exit_code) {
  JobContext jc{open_context(g), nullptr, nullptr};
  if (jc.node.explicit_backend_failed) {
    std::string why;
    for (const auto& l : describe_steps(jc.node.steps)) why += (why.empty() ? "" : "; ") + l;
    *exit_code = kExitNoBackend;
    return make_error(why);
  }
  auto st = open_store(db_path);
  if (!st) {
    *exit_code = kExitError;
    return st.error();
  }
  jc.store = std::move(*st);
  scheduler::SnapshotSource src;
  sampler::Monitor* m = jc.node.monitor.get();
  src.fresh = [m] { return m->snapshot(false); };
  if (auto t = m->topology(); t) src.topology = std::move(*t);
  jc.allocator = std::make_unique<scheduler::NodeAllocator>(*jc.store, std::move(src));
  return jc;
}

core::LeaseOwner owner_of(std::uint32_t pid) {
  core::LeaseOwner o;
  o.pid = pid;
  o.start_time = platform::ProcReader().start_time(pid).value_or(0);
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res) == 0 && res) o.user = res->pw_name;
  else o.user = std::to_string(::geteuid());
  return o;
}

nlohmann::json gpu_info_json(const scheduler::Allocation& a, unsigned world_size) {
  nlohmann::json details = nlohmann::json::array();
  std::vector<std::string> ids;
  std::string model;
  for (unsigned i : a.selection.indices) {
    ids.push_back(std::to_string(i));
    for (const auto& g : a.snapshot->gpus) {
      if (g.index != i) continue;
      if (model.empty()) model = g.name;
      details.push_back({{"index", g.index},
                         {"name", g.name},
                         {"uuid", g.uuid},
                         {"memory_free_mb", g.memory_free_mib ? nlohmann::json(*g.memory_free_mib) : nlohmann::json(nullptr)},
                         {"utilization_percent", g.utilization_pct ? nlohmann::json(*g.utilization_pct) : nlohmann::json(nullptr)},
                         {"availability_score", g.availability_score ? nlohmann::json(std::round(*g.availability_score * 1e4) / 1e4)
                                                                     : nlohmann::json(nullptr)}});
    }
  }
  return {{"model", model},
          {"count", a.selection.indices.size()},
          {"device_ids", ids},
          {"world_size", world_size},
          {"gpu_info",
           {{"count", a.selection.indices.size()},
            {"indices", a.selection.indices},
            {"allocation_method", a.selection.method},
            {"why", a.selection.why},
            {"details", details}}}};
}

std::string format_time_ms(std::int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", tm);
}

nlohmann::json lease_json(const core::Lease& l) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : l.gpus) gpus.push_back({{"index", g.index}, {"uuid", g.uuid}});
  return {{"id", l.id},
          {"job_id", l.job_id},
          {"name", l.name},
          {"gpus", gpus},
          {"owner", {{"pid", l.owner.pid}, {"user", l.owner.user}}},
          {"created_at", wire::iso8601(std::chrono::system_clock::time_point(std::chrono::milliseconds(l.created_at_ms)))},
          {"released_at", l.released_at_ms ? nlohmann::json(wire::iso8601(std::chrono::system_clock::time_point(
                                                 std::chrono::milliseconds(*l.released_at_ms))))
                                           : nlohmann::json(nullptr)},
          {"release_reason", l.release_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.release_reason)}};
}

}  // namespace gf::app
