// `gpufleet alloc`, `release`, `leases`: GPU leases by hand, for a shell session.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/jobs.hpp"
#include "core/mig.hpp"
#include "platform/log.hpp"
#include "wire/agent_docs.hpp"
#include "wire/gpu_need.hpp"
#include "wire/json.hpp"

namespace gf::app {

using platform::printable;

namespace {

// alloc through the agent: the lease is tied to our parent (the calling shell), which the agent reads
// from its own /proc and watches; what we say about the owner is not asked.
Result<std::pair<core::Lease, std::vector<std::string>>> alloc_via_agent(AgentClient& agent, const AllocCommand& a) {
  nlohmann::json args = wire::gpu_need_json(a.need);
  args["name"] = a.name.empty() ? fmt::format("shell {}", ::getppid()) : a.name;
  args["wait_s"] = 0;
  args["tie"] = "parent";
  auto r = agent.call("acquire", std::move(args));
  if (!r) return r.error();
  auto lease = wire::lease_from_json(r->value("lease", nlohmann::json()));
  if (!lease) return lease.error();
  std::vector<std::string> why;
  if (auto w = r->find("why"); w != r->end() && w->is_array())
    for (const auto& x : *w)
      if (x.is_string()) why.push_back(x.get<std::string>());
  return std::pair{std::move(*lease), std::move(why)};
}

// The verb's leases and waiters, from the agent or the store.
struct LeaseView {
  std::vector<core::Lease> leases;
  std::vector<core::Waiter> waiters;
};
Result<LeaseView> leases_via_agent(AgentClient& agent, bool all) {
  auto r = agent.call("leases", {{"all", all}});
  if (!r) return r.error();
  LeaseView v;
  if (auto l = r->find("leases"); l != r->end() && l->is_array())
    for (const auto& x : *l) {
      auto lease = wire::lease_from_json(x);
      if (!lease) return lease.error();
      v.leases.push_back(std::move(*lease));
    }
  if (auto w = r->find("waiting"); w != r->end() && w->is_array())
    for (const auto& x : *w) v.waiters.push_back(wire::waiter_from_json(x));
  return v;
}

// The efficiency lines of ended leases, from the agent's lease document (GET /api/v1/leases?all=1,
// whose ended leases carry their final usage). None when the agent keeps no accounting.
std::map<std::string, std::string> efficiency_via_agent(AgentClient& agent, const std::vector<core::Lease>& leases) {
  std::map<std::string, std::string> out;
  if (std::none_of(leases.begin(), leases.end(), [](const core::Lease& l) { return l.released_at_ms.has_value(); }))
    return out;
  auto r = agent.call("get", {{"path", "/api/v1/leases?all=1"}});
  if (!r || r->value("status", 0) != 200) return out;
  const auto body = r->value("body", nlohmann::json());
  if (!body.is_object() || !body.contains("leases") || !body["leases"].is_array()) return out;
  for (const auto& l : body["leases"]) {
    if (!l.is_object() || !l.contains("id") || !l["id"].is_string() || !l.contains("usage")) continue;
    const auto& u = l["usage"];
    if (u.is_object() && u.contains("line") && u["line"].is_string())
      out[l["id"].get<std::string>()] = u["line"].get<std::string>();
  }
  return out;
}

}  // namespace

int run_alloc(const GlobalOptions& g, const AllocCommand& a) {
  auto agent = connect_agent(g, a.db);
  if (!agent) {
    print_error(agent.error().message);
    return exit_code(agent.error());
  }
  core::Lease lease;
  std::vector<std::string> why;
  if (*agent) {
    auto got = alloc_via_agent(**agent, a);
    if (!got) {
      print_error(got.error().message);
      return exit_code(got.error());
    }
    lease = std::move(got->first);
    why = std::move(got->second);
  } else {
    auto jc = open_job_context(g, a.db);
    if (!jc) {
      print_error(jc.error().message);
      return exit_code(jc.error());
    }
    scheduler::AllocationRequest req;
    req.need = a.need;
    req.job_id = "shell-" + store::new_id();
    req.name = a.name.empty() ? fmt::format("shell {}", ::getppid()) : a.name;
    // The lease belongs to the calling shell: it ends when the shell does (or on `gpufleet release`).
    req.owner = owner_of(static_cast<std::uint32_t>(::getppid()));
    // The decision is made on a driver query taken now (no agent publishes readings here).
    auto got = jc->allocator->allocate(req, jc->query());
    if (!got) {
      print_error(got.error().message);
      return exit_code(got.error());
    }
    lease = got->lease;
    why = got->selection.why;
  }
  std::vector<std::string> ids;
  // A MIG instance is named by its MIG UUID (CUDA has no index for it).
  for (const auto& gpu : lease.gpus)
    ids.push_back((a.uuids && !gpu.uuid.empty()) || core::is_mig_uuid(gpu.uuid) ? gpu.uuid : std::to_string(gpu.index));
  if (a.json) {
    auto j = lease_json(lease);
    j["cuda_visible_devices"] = fmt::format("{}", fmt::join(ids, ","));
    j["why"] = why;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    // stdout is shell code (eval "$(gpufleet alloc --gpus 2)"): only ids and GPU names made of plain
    // characters reach it, whatever the agent sent.
    const auto shell_safe = [](const std::string& t) {
      return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
               c == '.' || c == '/';  // '/': the older MIG-GPU-<uuid>/<gi>/<ci> form
      });
    };
    if (!shell_safe(lease.id) || !std::all_of(ids.begin(), ids.end(), shell_safe)) {
      print_error("the lease's id or GPU names are not plain text: " + printable(lease.id));
      return kExitError;
    }
    // The explanation goes to stderr.
    std::printf("export CUDA_VISIBLE_DEVICES=%s\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\nexport GPUFLEET_LEASE=%s\n",
                fmt::format("{}", fmt::join(ids, ",")).c_str(), lease.id.c_str());
    std::fprintf(stderr, "gpufleet: lease %s: GPU %s for shell %d (ends with the shell, or: gpufleet release %s)\n",
                 lease.id.c_str(), fmt::format("{}", fmt::join(ids, ",")).c_str(), ::getppid(), lease.id.c_str());
    for (const auto& w : why) std::fprintf(stderr, "  %s\n", w.c_str());
  }
  return kExitOk;
}

int run_release(const GlobalOptions& g, const std::string& lease_id, const std::string& db) {
  auto agent = connect_agent(g, db);
  if (!agent) {
    print_error(agent.error().message);
    return exit_code(agent.error());
  }
  if (*agent) {  // the agent checks that the lease is ours (or that we are an admin)
    (*agent)->ending(lease_id);
    if (auto r = (*agent)->call("release", {{"lease", lease_id}}); !r) {
      print_error(r.error().message);
      return exit_code(r.error());
    }
    std::printf("released %s\n", lease_id.c_str());
    return kExitOk;
  }
  auto st = open_store(db);
  if (!st) {
    print_error(st.error().message);
    return exit_code(st.error());
  }
  auto r = (*st)->release(lease_id, "released by hand");
  if (!r) {
    print_error(r.error().message);
    return exit_code(r.error());
  }
  if (!*r) {
    print_error("no active lease " + lease_id + " (see gpufleet leases)");
    return exit_code(ErrorKind::NotFound);
  }
  std::printf("released %s\n", lease_id.c_str());
  return kExitOk;
}

int run_leases(const GlobalOptions& g, bool json, bool all, const std::string& db) {
  auto agent = connect_agent(g, db);
  if (!agent) {
    print_error(agent.error().message);
    return exit_code(agent.error());
  }
  Result<LeaseView> view = LeaseView{};
  std::map<std::string, std::string> efficiency;
  if (*agent) {
    view = leases_via_agent(**agent, all);
    if (view) efficiency = efficiency_via_agent(**agent, view->leases);
  } else {
    auto st = open_store(db);
    if (!st) {
      print_error(st.error().message);
      return exit_code(st.error());
    }
    auto l = all ? (*st)->history(200) : (*st)->active();
    if (!l) {
      print_error(l.error().message);
      return exit_code(l.error());
    }
    view->leases = std::move(*l);
    if (auto w = (*st)->waiters()) view->waiters = std::move(*w);
    efficiency = efficiency_lines((*st)->path(), view->leases);
  }
  if (!view) {
    print_error(view.error().message);
    return exit_code(view.error());
  }
  const auto* leases = &view->leases;
  const auto* waiters = &view->waiters;
  if (json) {
    nlohmann::json out{{"leases", nlohmann::json::array()}, {"waiting", nlohmann::json::array()}};
    for (const auto& l : *leases) {
      auto j = lease_json(l);
      if (auto e = efficiency.find(l.id); e != efficiency.end()) j["efficiency"] = e->second;
      out["leases"].push_back(std::move(j));
    }
    if (waiters)
      for (const auto& w : *waiters)
        out["waiting"].push_back({{"id", w.id},
                                  {"name", w.name},
                                  {"priority", w.priority},
                                  {"gpus", w.gpus},
                                  {"owner", {{"pid", w.owner.pid}, {"user", w.owner.user}}}});
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  (void)g;
  std::printf("%-12s  %-8s  %-10s  %8s  %-19s  %s\n", "LEASE", "GPUS", "USER", "PID", "SINCE", "JOB");
  for (const auto& l : *leases) {
    std::vector<std::string> idx;  // a MIG instance as "<GPU>:<MIG UUID>"
    for (const auto& gpu : l.gpus)
      idx.push_back(core::is_mig_uuid(gpu.uuid) ? fmt::format("{}:{}", gpu.index, printable(gpu.uuid))
                                                : std::to_string(gpu.index));
    std::string job = l.name.empty() ? l.job_id : l.name;
    if (l.released_at_ms) job += " (ended: " + l.release_reason + ")";
    std::printf("%-12s  %-8s  %-10s  %8u  %-19s  %s\n", l.id.c_str(), fmt::format("{}", fmt::join(idx, ",")).c_str(),
                printable(l.owner.user).c_str(), l.owner.pid, format_time_ms(l.created_at_ms).c_str(),
                printable(job).c_str());
    if (auto e = efficiency.find(l.id); e != efficiency.end())
      std::printf("%14sefficiency: %s\n", "", e->second.c_str());
  }
  if (leases->empty()) std::printf("No %sleases.\n", all ? "" : "active ");
  if (waiters && !waiters->empty()) {
    std::printf("\nWaiting (first served first):\n");
    for (const auto& w : *waiters)
      std::printf("  %s  %u GPU(s)  priority %d  pid %u %s\n", printable(w.name.empty() ? w.id : w.name).c_str(),
                  w.gpus, w.priority, w.owner.pid, printable(w.owner.user).c_str());
  }
  return kExitOk;
}

}  // namespace gf::app
