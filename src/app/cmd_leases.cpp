// `gpufleet alloc`, `release`, `leases`: GPU leases by hand, for a shell session.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "app/commands.hpp"
#include "app/exit_codes.hpp"
#include "app/jobs.hpp"
#include "platform/log.hpp"

namespace gf::app {

using platform::printable;

int run_alloc(const GlobalOptions& g, const AllocCommand& a) {
  auto jc = open_job_context(g, a.db);
  if (!jc) {
    print_error(jc.error().message);
    return exit_code(jc.error());
  }
  scheduler::AllocationRequest req;
  req.gpus = a.gpus;
  req.min_memory_mib = a.min_memory_mb;
  req.max_utilization_pct = a.max_utilization;
  req.refuse_busy = !a.allow_busy;
  req.job_id = "shell-" + store::new_id();
  req.name = a.name.empty() ? fmt::format("shell {}", ::getppid()) : a.name;
  // The lease belongs to the calling shell: it ends when the shell does (or on `gpufleet release`).
  req.owner = owner_of(static_cast<std::uint32_t>(::getppid()));
  auto got = jc->allocator->allocate(req);
  if (!got) {
    print_error(got.error().message);
    return exit_code(got.error());
  }
  std::vector<std::string> ids;
  for (const auto& gpu : got->lease.gpus)
    ids.push_back(a.uuids && !gpu.uuid.empty() ? gpu.uuid : std::to_string(gpu.index));
  if (a.json) {
    auto j = lease_json(got->lease);
    j["cuda_visible_devices"] = fmt::format("{}", fmt::join(ids, ","));
    j["why"] = got->selection.why;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    // stdout is shell code (eval "$(gpufleet alloc --gpus 2)"); the explanation goes to stderr.
    std::printf("export CUDA_VISIBLE_DEVICES=%s\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\nexport GPUFLEET_LEASE=%s\n",
                fmt::format("{}", fmt::join(ids, ",")).c_str(), got->lease.id.c_str());
    std::fprintf(stderr, "gpufleet: lease %s: GPU %s for shell %d (ends with the shell, or: gpufleet release %s)\n",
                 got->lease.id.c_str(), fmt::format("{}", fmt::join(ids, ",")).c_str(), ::getppid(),
                 got->lease.id.c_str());
    for (const auto& w : got->selection.why) std::fprintf(stderr, "  %s\n", w.c_str());
  }
  return kExitOk;
}

int run_release(const GlobalOptions&, const std::string& lease_id, const std::string& db) {
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
  auto st = open_store(db);
  if (!st) {
    print_error(st.error().message);
    return exit_code(st.error());
  }
  auto leases = all ? (*st)->history(200) : (*st)->active();
  if (!leases) {
    print_error(leases.error().message);
    return exit_code(leases.error());
  }
  auto waiters = (*st)->waiters();
  const auto efficiency = efficiency_lines((*st)->path(), *leases);
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
    std::vector<unsigned> idx;
    for (const auto& gpu : l.gpus) idx.push_back(gpu.index);
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
