#include "sampler/monitor.hpp"

#include <unordered_set>

#include "core/text.hpp"
#include "platform/log.hpp"

namespace gf::sampler {

Monitor::Monitor(std::unique_ptr<backends::Backend> backend, const core::Clock& clock, MonitorOptions opts)
    : backend_(std::move(backend)),
      clock_(clock),
      opts_(std::move(opts)),
      proc_(opts_.proc_root),
      in_child_pid_ns_(proc_.in_child_pid_namespace()) {}

std::string Monitor::backend_name() const { return backend_ ? std::string(backend_->name()) : "none"; }

Result<core::Topology> Monitor::topology() {
  std::lock_guard lock(query_mu_);
  if (!backend_) return core::Topology{};
  return backend_->topology();
}

Result<core::SnapshotPtr> Monitor::snapshot(bool use_cache) {
  auto from_cache = [&]() -> core::SnapshotPtr {
    std::lock_guard c(cache_mu_);
    if (cached_ && clock_.now() - cached_at_ < opts_.cache_ttl) return cached_;
    return nullptr;
  };
  if (use_cache)
    if (auto s = from_cache()) return s;
  std::lock_guard lock(query_mu_);
  // Another caller may have refreshed the cache while this one waited for the backend.
  if (use_cache)
    if (auto s = from_cache()) return s;
  return refresh_locked();
}

Result<core::SnapshotPtr> Monitor::snapshot_with_fresh_counters() {
  std::lock_guard lock(query_mu_);
  if (backend_) backend_->fresh_counters();
  return refresh_locked();
}

Result<core::SnapshotPtr> Monitor::refresh_locked() {
  core::Snapshot s;
  if (!backend_) {
    s.timestamp = clock_.wall_now();
    s.backend = "none";
    s.warnings.push_back("no GPU backend is available on this machine");
    for (const auto& r : opts_.no_backend_reasons) s.warnings.push_back(r);
  } else {
    auto got = backend_->snapshot();
    if (!got) return got.error();
    s = std::move(*got);
  }
  return finish_locked(std::move(s));
}

core::SnapshotPtr Monitor::finish_locked(core::Snapshot s) {
  if (backend_ && !s.simulated) resolve_processes(s);
  for (const auto& line : clears_.apply(s)) platform::log_line("health", line);
  for (auto& g : s.gpus) core::attribute_memory(g);
  core::score_gpus(s, opts_.weights);
  auto done = std::make_shared<const core::Snapshot>(std::move(s));
  std::lock_guard c(cache_mu_);
  cached_ = done;
  cached_at_ = clock_.now();
  return done;
}

void Monitor::prime(core::Snapshot raw) {
  std::lock_guard lock(query_mu_);
  finish_locked(std::move(raw));
}

const platform::ProcInfo* Monitor::known_process(std::uint32_t pid) {
  auto it = proc_cache_.find(pid);
  if (it != proc_cache_.end()) {
    const KnownProc& k = it->second;
    if (k.handle.valid() ? k.handle.alive() : proc_.start_time(pid) == k.info.start_time_ticks) return &k.info;
    if (k.handle.valid()) --held_;
    proc_cache_.erase(it);
  }
  if (!proc_.start_time(pid)) return nullptr;  // gone, or a stat file without a start time
  auto fresh = proc_.read(pid);
  if (!fresh) return nullptr;
  KnownProc k{std::move(*fresh), {}};
  if (held_ < opts_.max_held_processes) {
    k.handle = proc_.hold(pid, k.info.start_time_ticks);
    if (k.handle.valid()) ++held_;
  }
  return &proc_cache_.insert_or_assign(pid, std::move(k)).first->second.info;
}

void Monitor::resolve_processes(core::Snapshot& s) {
  std::size_t reported = 0, invisible = 0;
  std::unordered_set<std::uint32_t> seen;
  for (auto& g : s.gpus) {
    for (auto& p : g.processes) {
      ++reported;
      seen.insert(p.pid);
      const platform::ProcInfo* info = known_process(p.pid);
      if (!info) {
        ++invisible;
        continue;
      }
      if (!info->name.empty()) p.name = info->name;
      p.user = info->user;
      p.command = info->command;
      p.container = info->container;
      if (info->nspid.size() > 1) p.container_pid = info->nspid.back();
    }
  }
  std::erase_if(proc_cache_, [&](const auto& kv) {
    if (seen.contains(kv.first)) return false;
    if (kv.second.handle.valid()) --held_;
    return true;
  });
  std::string why;
  if (in_child_pid_ns_) {
    why =
        "gpufleet runs in a container's pid namespace: GPU processes outside it are not visible; run it with the "
        "host's pid namespace (docker --pid=host, Kubernetes hostPID: true) to see them";
  } else if (invisible > 0) {
    why = std::to_string(invisible) + " of " + std::to_string(reported) +
          " GPU processes reported by the driver are not visible in " + proc_.root() +
          " (they ended, or live in another pid namespace)";
  }
  if (!why.empty()) {
    auto& v = s.process_visibility;
    v.complete = false;
    v.message = v.message.empty() ? why : v.message + "; " + why;  // keep what the backend said
  }
}

Result<std::optional<Monitor::XidsCleared>> Monitor::clear_xids(std::string_view which,
                                                                std::chrono::system_clock::time_point at) {
  std::lock_guard lock(query_mu_);
  auto s = refresh_locked();
  if (!s) return s.error();
  const auto index = core::parse_uint(which, 0, 999999);
  for (const auto& g : (*s)->gpus) {
    if (index ? g.index != *index : g.uuid.empty() || g.uuid != which) continue;
    auto cleared = clears_.clear(g, at);
    if (!cleared) return cleared.error();
    XidsCleared out{g, g, std::move(*cleared)};
    // The same rule the next readings apply (the cached one keeps its XIDs until the next query).
    core::apply_xid_clear(core::xid_clear_of(g, at), out.after);
    return std::optional<XidsCleared>(std::move(out));
  }
  return std::optional<XidsCleared>();
}

Result<std::optional<core::GpuReading>> Monitor::gpu(unsigned index, bool use_cache) {
  auto s = snapshot(use_cache);
  if (!s) return s.error();
  for (const auto& g : (*s)->gpus)
    if (g.index == index) return std::optional<core::GpuReading>(g);
  return std::optional<core::GpuReading>();
}

}  // namespace gf::sampler
