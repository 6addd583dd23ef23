#include "node/arbiter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "allocator/mig_select.hpp"
#include "platform/log.hpp"
#include "platform/procfs.hpp"
#include "platform/users.hpp"
#include "wire/agent_docs.hpp"

namespace gf::node {
namespace {

using std::chrono::steady_clock;

std::string random_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:012x}", rng() & 0xFFFFFFFFFFFFULL);
}

std::int64_t wall_ms(const core::Clock& c) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(c.wall_now().time_since_epoch()).count();
}

std::string owner_text(const core::LeaseOwner& o) {
  if (!o.uid) return fmt::format("{} (written without the agent; only an admin may change it)", o.user);
  return fmt::format("{} (uid {})", o.user.empty() ? platform::user_name(*o.uid) : o.user, *o.uid);
}

using scheduler::holders_text;

bool serves_before(const core::Waiter& a, std::uint64_t seq_a, const core::Waiter& b, std::uint64_t seq_b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return seq_a < seq_b;
}

}  // namespace

Arbiter::Arbiter(std::unique_ptr<core::JobStore> store, ReadingSource source, ArbiterOptions options,
                 const core::Clock& clock)
    : store_(std::move(store)), source_(std::move(source)), options_(std::move(options)), clock_(clock) {
  // The allocator decides on the reading try_now() hands it; it never asks the driver.
  allocator_ = std::make_unique<scheduler::NodeAllocator>(*store_, source_.topology, clock_);
  next_recheck_ = clock_.now() + options_.recheck;
  next_prune_ = clock_.now() + options_.prune_every;  // serve prunes once at start itself
}

Arbiter::~Arbiter() = default;

Result<core::SnapshotPtr> Arbiter::reading() const {
  if (!source_.latest) return make_error(ErrorKind::NotReady, "the agent has no reading of the GPUs to decide on");
  auto [snap, taken] = source_.latest();
  if (!snap)
    return make_error(ErrorKind::NotReady,
                      "no reading of the GPUs yet: the agent's first driver query has not "
                      "finished");
  const auto age = clock_.now() - taken;
  if (age > options_.reading_max_age)
    return make_error(ErrorKind::NotReady,
                      fmt::format("the agent's latest reading of the GPUs is {:.1f} s old and decisions need one "
                                  "younger than {:.1f} s: the driver is slow or not answering",
                                  std::chrono::duration<double>(age).count(),
                                  std::chrono::duration<double>(options_.reading_max_age).count()));
  return snap;
}

Result<std::size_t> Arbiter::recover() {
  std::lock_guard lock(mu_);
  auto active = store_->active();
  if (!active) return with_context("cannot read the leases: ", active.error());
  std::size_t ended = 0;
  for (const auto& l : *active) {
    if (l.tie == core::LeaseTie::Connection) {
      if (auto r = store_->release(l.id, "agent restarted"); !r) return r.error();
      ++ended;
    } else if (l.tie == core::LeaseTie::Process) {
      auto w = platform::PidWatch::open(l.owner.pid, l.owner.start_time, options_.proc_root);
      if (w) {
        track(l, 0, std::move(*w));
      } else if (w.error().kind == ErrorKind::NotFound) {
        if (auto r = store_->release(l.id, "owner gone"); !r) return r.error();
        ++ended;
      } else {
        track(l, 0, std::nullopt);  // no pidfd here: the store's own liveness check still ends it
      }
    }
  }
  return ended;
}

ConnectionId Arbiter::connect(const Peer& peer, std::shared_ptr<ConnectionSink> sink) {
  std::lock_guard lock(mu_);
  const ConnectionId id = next_conn_++;
  conns_[id] = Connection{peer, std::move(sink), std::nullopt};
  return id;
}

void Arbiter::disconnect(ConnectionId c) {
  std::lock_guard lock(mu_);
  conns_.erase(c);
  std::erase_if(queue_, [c](const Waiting& w) { return w.conn == c; });
  queued_.store(queue_.size(), std::memory_order_relaxed);
  std::vector<std::string> tied;
  for (const auto& [id, l] : live_)
    if (l.conn == c) tied.push_back(id);
  for (const auto& id : tied) end_lease(id, "owner gone");
  serve_queue();
}

void Arbiter::track(const core::Lease& lease, ConnectionId conn, std::optional<platform::PidWatch> watch) {
  Live l;
  l.conn = conn;
  l.uid = lease.owner.uid;
  l.watch = std::move(watch);
  live_[lease.id] = std::move(l);
}

void Arbiter::tell_owner(const std::optional<std::uint32_t>& uid, ConnectionId conn,
                         const std::function<void(ConnectionSink&)>& f) {
  if (conn != 0) {
    if (auto it = conns_.find(conn); it != conns_.end() && it->second.sink) f(*it->second.sink);
    return;
  }
  if (!uid) return;
  for (auto& [id, c] : conns_)
    if (c.peer.uid == *uid && c.sink) f(*c.sink);
}

bool Arbiter::end_lease(const std::string& id, const std::string& reason) {
  auto r = store_->release(id, reason);
  std::optional<std::uint32_t> uid;
  ConnectionId conn = 0;
  if (auto it = live_.find(id); it != live_.end()) {
    uid = it->second.uid;
    conn = it->second.conn;
    live_.erase(it);
  }
  if (!r || !*r) return false;
  tell_owner(uid, conn, [&](ConnectionSink& s) { s.lease_ended(id, reason); });
  return true;
}

Result<unsigned> Arbiter::held_by(std::uint32_t uid, unsigned more, bool& swept) {
  auto n = store_->gpus_held_by(uid);
  if (!n || swept || *n + more <= options_.max_gpus_per_user) return n;
  swept = true;
  if (auto active = store_->active(); !active) return active.error();  // ends dead owners' leases
  return store_->gpus_held_by(uid);
}

Result<scheduler::AllocationRequest> Arbiter::prepare(const Peer& peer, const AcquireRequest& r,
                                                      const core::LeaseOwner& owner) const {
  const core::GpuNeed& need = r.need;
  if (need.gpus < 1 || need.gpus > 1024) return make_error(ErrorKind::Invalid, "gpus must be from 1 to 1024");
  if (need.max_utilization_pct > 100) return make_error(ErrorKind::Invalid, "max_utilization_pct must be 0 to 100");
  if (!need.mig_profile.empty() && !allocator::valid_mig_profile(need.mig_profile))
    return make_error(ErrorKind::Invalid, "a MIG profile is written like 1g.10gb or 3g.40gb");
  if (!need.mig_profile.empty() && need.gpus != 1)
    return make_error(ErrorKind::Invalid, "a MIG lease is one instance: ask for --gpus 1 with --mig");
  if (r.priority > options_.max_user_priority && !peer.admin)
    return make_error(ErrorKind::Permission,
                      fmt::format("priority {} is above {}, the most a user may ask for (max_user_priority); only "
                                  "root or the admin group may",
                                  r.priority, options_.max_user_priority));
  if (options_.max_gpus_per_user > 0 && need.gpus > options_.max_gpus_per_user)
    return make_error(ErrorKind::Unavailable, fmt::format("{} GPU(s) is more than the quota of {} per user "
                                                          "(max_gpus_per_user)",
                                                          need.gpus, options_.max_gpus_per_user));
  // Another user's job id is theirs (issue 20, finding 10): a lease under it would be counted as
  // their job's. Refused when a job record with that id belongs to another uid (admins may).
  if (!r.job_id.empty() && !peer.admin) {
    auto job = store_->job(r.job_id);
    if (!job) return job.error();
    if (*job && (*job)->owner.uid && *(*job)->owner.uid != peer.uid)
      return make_error(ErrorKind::Permission,
                        fmt::format("job {} belongs to {}", r.job_id, owner_text((*job)->owner)));
  }
  scheduler::AllocationRequest ar;
  ar.need = need;
  ar.job_id = r.job_id.empty() ? "a-" + random_id() : r.job_id;
  ar.name = r.name;
  ar.priority = r.priority;
  ar.owner = owner;  // pid and start time from the kernel's view; uid and user from the peer
  if (!ar.owner.uid) ar.owner.uid = peer.uid;
  if (ar.owner.user.empty()) ar.owner.user = peer.user;
  ar.tie = r.tie;
  return ar;
}

Result<void> Arbiter::meetable(const scheduler::AllocationRequest& ar) {
  // A request no set of this node's GPUs could ever meet would wait at the head of the queue forever
  // and hold everyone behind it: it is refused at once instead.
  if (!source_.latest) return {};
  const auto snap = source_.latest().first;
  if (!snap || snap->gpus.empty()) return {};
  const core::GpuNeed& need = ar.need;
  if (!need.mig_profile.empty()) {
    if (allocator::has_mig_profile(*snap, need.mig_profile)) return {};
    return make_error(ErrorKind::Invalid, fmt::format("no MIG instance of profile {} on this node (its MIG "
                                                      "instances: {})",
                                                      need.mig_profile, allocator::mig_profiles_text(*snap)));
  }
  std::size_t big_enough = 0;
  for (const auto& g : snap->gpus)
    if (!g.memory_total_mib || *g.memory_total_mib >= need.min_free_memory_mib) ++big_enough;
  if (need.gpus > snap->gpus.size())
    return make_error(ErrorKind::Invalid,
                      fmt::format("{} GPU(s) asked for; this node has {}", need.gpus, snap->gpus.size()));
  if (need.gpus > big_enough)
    return make_error(ErrorKind::Invalid, fmt::format("{} GPU(s) with {} MiB asked for; {} of this node's GPUs "
                                                      "have that much memory in all",
                                                      need.gpus, need.min_free_memory_mib, big_enough));
  return {};
}

Result<Arbiter::Attempt> Arbiter::try_now(const scheduler::AllocationRequest& ar) {
  Attempt out;
  auto snap = reading();
  if (!snap) {
    out.refusal = snap.error();
    return out;
  }
  auto got = allocator_->attempt(ar, "", *snap);
  if (!got) return got.error();
  out.holders = std::move(got->holders);
  if (got->granted)
    out.granted = std::move(got->granted);
  else
    out.refusal = make_error(ErrorKind::Unavailable, got->why_not);
  return out;
}

namespace {
std::string quota_text(const Peer& p, unsigned max) {
  return fmt::format("{} would hold more than {} GPU(s), the quota per user (max_gpus_per_user)", p.user, max);
}
}  // namespace

Result<void> Arbiter::within_quota(const Peer& peer, unsigned gpus) {
  if (options_.max_gpus_per_user == 0) return {};
  bool swept = false;
  auto held = held_by(peer.uid, gpus, swept);
  if (!held) return held.error();
  if (*held + gpus > options_.max_gpus_per_user)
    return make_error(ErrorKind::Unavailable, quota_text(peer, options_.max_gpus_per_user));
  return {};
}

Result<Arbiter::TiedOwner> Arbiter::owner_of(const Peer& peer, core::LeaseTie tie) const {
  // The owner: the client itself for a connection tie, its parent for a process tie (`alloc` exits
  // and leaves the lease to the shell that ran it). The kernel's pid, never one the client sent.
  const platform::ProcReader proc(options_.proc_root);
  TiedOwner out;
  core::LeaseOwner& owner = out.first;
  if (tie != core::LeaseTie::Process) {
    owner.pid = peer.pid;
    owner.start_time = proc.start_time(peer.pid).value_or(0);
    return out;
  }
  auto parent = platform::parent_pid(peer.pid, options_.proc_root);
  if (!parent || *parent == 0)
    return make_error(ErrorKind::Invalid, fmt::format("cannot read the parent of process {}", peer.pid));
  // A lease tied to init (an orphaned client) or to someone else's process would never end with the
  // user's session: the shell it is tied to must be the user's own.
  if (*parent == 1)
    return make_error(ErrorKind::Invalid,
                      "the calling process has no parent to tie the lease to (it was "
                      "orphaned): run it from the shell that should hold the lease");
  if (const auto puid = platform::process_uid(*parent, options_.proc_root); !peer.admin && puid != peer.uid)
    return make_error(
        ErrorKind::Permission,
        fmt::format("the parent process {} is not {}'s: a lease is tied to its owner's own shell", *parent, peer.user));
  owner.pid = *parent;
  owner.start_time = proc.start_time(*parent).value_or(0);
  auto w = platform::PidWatch::open(owner.pid, owner.start_time, options_.proc_root);
  if (!w && w.error().kind == ErrorKind::NotFound)
    return make_error(ErrorKind::Invalid, "the process to tie the lease to is gone: " + w.error().message);
  if (w) out.second = std::move(*w);
  return out;
}

Result<std::optional<scheduler::Allocation>> Arbiter::acquire(ConnectionId c, std::int64_t request_id,
                                                              const AcquireRequest& r) {
  std::lock_guard lock(mu_);
  auto conn = conns_.find(c);
  if (conn == conns_.end()) return make_error(ErrorKind::NotFound, "no such connection");
  const Peer& peer = conn->second.peer;
  for (const auto& w : queue_)
    if (w.conn == c && w.request_id == request_id)
      return make_error(ErrorKind::Invalid, fmt::format("request {} is already waiting", request_id));

  // A connection tie's owner is the peer's own process, whose start time never changes: read once.
  // A failed read (0) is not kept: the next acquire reads again.
  unsigned long long start_time = conn->second.start_time.value_or(0);
  if (r.tie != core::LeaseTie::Process && start_time == 0) {
    auto own = owner_of(peer, r.tie);
    start_time = own ? own->first.start_time : 0;
    if (start_time != 0) conn->second.start_time = start_time;
  }
  Result<TiedOwner> tied = TiedOwner{};
  if (r.tie == core::LeaseTie::Process) {
    tied = owner_of(peer, r.tie);
  } else {
    tied->first.pid = peer.pid;
    tied->first.start_time = start_time;
  }
  if (!tied) return tied.error();
  auto& [owner, watch] = *tied;
  auto ar = prepare(peer, r, owner);
  if (!ar) return ar.error();
  if (auto m = meetable(*ar); !m) return m.error();
  auto quota = within_quota(peer, r.need.gpus);
  if (!quota && quota.error().kind != ErrorKind::Unavailable) return quota.error();

  Waiting w;
  w.seq = next_seq_++;
  w.shown.id = ar->job_id;
  w.shown.name = r.name;
  w.shown.priority = r.priority;
  w.shown.gpus = r.need.gpus;
  w.shown.owner = ar->owner;
  w.shown.enqueued_at_ms = wall_ms(clock_);
  // Someone ahead in the queue (not held back only by their own quota) goes first.
  bool blocked = false;
  for (const auto& q : queue_)
    if (!q.quota_held && serves_before(q.shown, q.seq, w.shown, w.seq)) {
      blocked = true;
      w.last.why = fmt::format("waiting behind {} ({} GPU(s), priority {}) in the queue",
                               q.shown.name.empty() ? q.shown.id : q.shown.name, q.shown.gpus, q.shown.priority);
      w.last.ahead = 1;
      break;
    }
  if (!quota) {
    w.quota_held = true;
    w.last.why = quota.error().message;
    if (r.wait.count() <= 0) return with_context("quota: ", quota.error());
  } else if (!blocked) {
    auto got = try_now(*ar);
    if (!got) return got.error();
    if (got->granted) {
      track(got->granted->lease, r.tie == core::LeaseTie::Connection ? c : 0, std::move(watch));
      return std::move(got->granted);
    }
    // Not now: too few GPUs qualify (Unavailable), or no recent reading to decide on (NotReady).
    if (r.wait.count() <= 0) {
      const std::string held = holders_text(got->holders);
      return make_error(got->refusal.kind, got->refusal.message + (held.empty() ? "" : "\nholders: " + held));
    }
    w.last.why = got->refusal.message;
    w.last.holders = std::move(got->holders);
  }
  if (r.wait.count() <= 0) return make_error(ErrorKind::Unavailable, w.last.why);
  const auto now = clock_.now();
  const auto max_wait = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365 * 100));
  w.conn = c;
  w.request_id = request_id;
  w.req = r;
  w.start = now;
  w.deadline = now + std::min(r.wait, max_wait);
  w.next_progress = now;  // the first "waiting" event goes out on the next tick
  w.last.waited = std::chrono::milliseconds(0);
  (void)watch;  // watched again when granted (the parent may end while we wait: then the grant fails)
  auto pos = std::find_if(queue_.begin(), queue_.end(),
                          [&](const Waiting& q) { return serves_before(w.shown, w.seq, q.shown, q.seq); });
  queue_.insert(pos, std::move(w));
  queued_.store(queue_.size(), std::memory_order_relaxed);
  return std::optional<scheduler::Allocation>();
}

Result<scheduler::Allocation> Arbiter::acquire_for(const Peer& peer, const AcquireRequest& r, core::LeaseOwner owner) {
  std::lock_guard lock(mu_);
  AcquireRequest req = r;
  req.tie = core::LeaseTie::Process;
  auto w = platform::PidWatch::open(owner.pid, owner.start_time, options_.proc_root);
  if (!w && w.error().kind == ErrorKind::NotFound) return make_error(ErrorKind::Invalid, w.error().message);
  auto ar = prepare(peer, req, owner);
  if (!ar) return ar.error();
  if (auto m = meetable(*ar); !m) return m.error();
  // The quota of the lease's owner (the pid's uid when the caller named one), not of the caller.
  Peer charged = peer;
  charged.uid = ar->owner.uid.value_or(peer.uid);
  charged.user = ar->owner.user.empty() ? peer.user : ar->owner.user;
  if (auto quota = within_quota(charged, req.need.gpus); !quota)
    return quota.error().kind == ErrorKind::Unavailable ? with_context("quota: ", quota.error()) : quota.error();
  // The HTTP API takes no place in the queue: when others wait, they go first.
  if (!queue_.empty())
    return make_error(ErrorKind::Unavailable, fmt::format("{} acquire(s) are waiting in the queue", queue_.size()));
  auto got = try_now(*ar);
  if (!got) return got.error();
  if (!got->granted) {
    const std::string held = holders_text(got->holders);
    return make_error(got->refusal.kind, got->refusal.message + (held.empty() ? "" : "\nholders: " + held));
  }
  track(got->granted->lease, 0, w ? std::optional<platform::PidWatch>(std::move(*w)) : std::nullopt);
  return std::move(*got->granted);
}

Result<void> Arbiter::cancel(ConnectionId c, std::int64_t request_id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(queue_.begin(), queue_.end(),
                         [&](const Waiting& w) { return w.conn == c && w.request_id == request_id; });
  if (it == queue_.end())
    return make_error(ErrorKind::NotFound, fmt::format("no waiting acquire {} on this connection", request_id));
  const auto waited = std::chrono::duration<double>(clock_.now() - it->start).count();
  if (auto conn = conns_.find(c); conn != conns_.end() && conn->second.sink)
    conn->second.sink->refused(
        request_id, make_error(ErrorKind::Unavailable, fmt::format("Cancelled after waiting {:.0f} s", waited)));
  queue_.erase(it);
  queued_.store(queue_.size(), std::memory_order_relaxed);
  serve_queue();  // whoever it blocked may go now
  return {};
}

Result<void> Arbiter::release(const Peer& peer, const std::string& lease_id) {
  std::lock_guard lock(mu_);
  // A lease this arbiter granted to the peer's own uid: ended in one store write, without listing every
  // active lease. The store's answer says whether it was still active (it may have been ended meanwhile,
  // by the dead-owner sweep or another process).
  if (auto own = live_.find(lease_id); own != live_.end() && own->second.uid && *own->second.uid == peer.uid) {
    auto ended = store_->release(lease_id, "released");
    if (!ended) return ended.error();
    const auto uid = own->second.uid;
    const ConnectionId conn = own->second.conn;
    live_.erase(own);
    if (!*ended) return make_error(ErrorKind::NotFound, "no active lease " + lease_id + " (see gpufleet leases)");
    tell_owner(uid, conn, [&](ConnectionSink& s) { s.lease_ended(lease_id, "released"); });
    serve_queue();
    return {};
  }
  auto active = store_->active();
  if (!active) return active.error();
  auto it = std::find_if(active->begin(), active->end(), [&](const core::Lease& l) { return l.id == lease_id; });
  if (it == active->end())
    return make_error(ErrorKind::NotFound, "no active lease " + lease_id + " (see gpufleet leases)");
  const bool own = it->owner.uid && *it->owner.uid == peer.uid;
  if (!own && !peer.admin)
    return make_error(ErrorKind::Permission, fmt::format("lease {} belongs to {}", lease_id, owner_text(it->owner)));
  if (!live_.contains(lease_id)) track(*it, 0, std::nullopt);  // so the owner hears of it
  end_lease(lease_id, own ? "released" : "released by " + peer.user);
  serve_queue();
  return {};
}

Result<bool> Arbiter::release(const std::string& lease_id, bool by_admin, const std::string& reason) {
  if (!by_admin) return false;
  std::lock_guard lock(mu_);
  auto active = store_->active();
  if (!active) return active.error();
  auto it = std::find_if(active->begin(), active->end(), [&](const core::Lease& l) { return l.id == lease_id; });
  if (it == active->end()) return false;
  if (!live_.contains(lease_id)) track(*it, 0, std::nullopt);
  const bool done = end_lease(lease_id, reason);
  serve_queue();
  return done;
}

bool Arbiter::warn(const std::string& lease_id, const std::string& message) {
  std::lock_guard lock(mu_);
  std::optional<std::uint32_t> uid;
  ConnectionId conn = 0;
  if (auto it = live_.find(lease_id); it != live_.end()) {
    uid = it->second.uid;
    conn = it->second.conn;
  } else {
    auto active = store_->active();
    if (!active) return false;
    auto l = std::find_if(active->begin(), active->end(), [&](const core::Lease& x) { return x.id == lease_id; });
    if (l == active->end()) return false;
    uid = l->owner.uid;
  }
  tell_owner(uid, conn, [&](ConnectionSink& s) { s.lease_warning(lease_id, message); });
  return true;
}

Result<std::vector<core::Lease>> Arbiter::leases(bool all) {
  std::lock_guard lock(mu_);
  return all ? store_->history(200) : store_->active();
}

std::vector<core::Waiter> Arbiter::waiting() const {
  std::lock_guard lock(mu_);
  std::vector<core::Waiter> out;
  for (const auto& w : queue_) out.push_back(w.shown);
  return out;
}

namespace {
Error too_large(const Peer& peer, std::size_t bytes, std::size_t limit) {
  if (peer.admin)
    return make_error(ErrorKind::Invalid, fmt::format("the job document is {} bytes; a job record may hold at most {} "
                                                      "bytes (record, command, name and the rest, as served)",
                                                      bytes, limit));
  return make_error(ErrorKind::Invalid,
                    fmt::format("the job document is {} bytes; a user's job record may hold at most {} bytes "
                                "(record, command, name and the rest, as served; root and the admin group: {})",
                                bytes, limit, Arbiter::kMaxRecordBytes));
}
}  // namespace

Result<void> Arbiter::room_for_job(const Peer& peer) {
  const std::uint64_t cap = options_.max_jobs_per_user;
  if (peer.admin || cap == 0) return {};
  auto n = store_->count_jobs(peer.uid);
  if (!n) return n.error();
  if (*n < cap) return {};
  // At the cap (or past it, when the cap was lowered): the oldest finished records make room.
  const std::uint64_t excess = *n - cap + 1;
  auto pruned = store_->prune_oldest_finished(peer.uid, static_cast<std::size_t>(excess));
  if (!pruned) return pruned.error();
  if (*pruned >= excess) return {};
  return make_error(ErrorKind::Permission,
                    fmt::format("{} (uid {}) keeps {} job records, the most one user may keep (max_jobs_per_user), "
                                "and too few of them have finished to make room: wait for a run to end",
                                peer.user, peer.uid, *n - *pruned));
}

Result<std::string> Arbiter::job_put(const Peer& peer, core::Job job) {
  const std::size_t limit = peer.admin ? kMaxRecordBytes : kMaxUserRecordBytes;
  // The plain text alone over the limit: refused before anything parses it.
  if (const std::size_t text = job.record.size() + job.command.size() + job.name.size(); text > limit)
    return too_large(peer, text, limit);
  if (job.id.size() > 64) return make_error(ErrorKind::Invalid, "job id too long (at most 64 characters)");
  std::lock_guard lock(mu_);
  std::optional<core::Job> existing;
  if (job.id.empty()) {
    job.id = random_id();
  } else {
    auto e = store_->job(job.id);
    if (!e) return e.error();
    existing = std::move(*e);
  }
  if (existing) {
    const bool own = existing->owner.uid && *existing->owner.uid == peer.uid;
    if (!own && !peer.admin)
      return make_error(ErrorKind::Permission,
                        fmt::format("job {} belongs to {}", job.id, owner_text(existing->owner)));
    job.owner = existing->owner;
  } else {
    const platform::ProcReader proc(options_.proc_root);
    job.owner = core::LeaseOwner{peer.pid, proc.start_time(peer.pid).value_or(0), peer.user, peer.uid};
  }
  // Measured as it will be stored and served, owner included; an update is bounded the same way.
  if (const std::size_t bytes = wire::job_document_bytes(job); bytes > limit) return too_large(peer, bytes, limit);
  if (!existing)
    if (auto room = room_for_job(peer); !room) return room.error();
  if (auto r = store_->put_job(job); !r) return r.error();
  return job.id;
}

Result<std::size_t> Arbiter::prune_jobs_locked() {
  if (options_.job_retention.count() <= 0) return std::size_t{0};
  return store_->prune_finished_older_than(options_.job_retention);
}

Result<std::size_t> Arbiter::prune_jobs() {
  std::lock_guard lock(mu_);
  return prune_jobs_locked();
}

Result<std::vector<core::Job>> Arbiter::jobs(std::size_t limit) {
  std::lock_guard lock(mu_);
  return store_->jobs(limit);
}

Result<core::JobPage> Arbiter::jobs_page(const core::JobQuery& q) {
  std::lock_guard lock(mu_);
  return store_->jobs_page(q);
}

Result<std::optional<core::Job>> Arbiter::job(const std::string& id) {
  std::lock_guard lock(mu_);
  return store_->job(id);
}

void Arbiter::serve_queue() {
  if (queue_.empty()) return;
  // No recent reading: nobody is served until the agent's loop publishes one; tick() comes back here
  // at every recheck (in serve: the collection interval, at least 250 ms). The waiters are told why.
  if (auto r = reading(); !r) {
    for (auto& w : queue_)
      if (!w.quota_held) {
        w.last.why = r.error().message;
        w.last.ahead = 0;
      }
    return;
  }
  std::map<std::uint32_t, unsigned> held;  // per uid, read once per pass when there is a quota
  bool swept = false;                      // at most one dead-owner sweep per pass for the quota
  bool blocked = false;
  std::string blocker;
  for (std::size_t i = 0; i < queue_.size();) {
    Waiting& w = queue_[i];
    auto conn = conns_.find(w.conn);
    if (conn == conns_.end()) {
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      queued_.store(queue_.size(), std::memory_order_relaxed);
      continue;
    }
    const Peer& peer = conn->second.peer;
    if (options_.max_gpus_per_user > 0) {
      if (!held.contains(peer.uid)) {
        auto h = held_by(peer.uid, w.req.need.gpus, swept);
        held[peer.uid] = h ? *h : options_.max_gpus_per_user;  // unreadable: assume full, try again later
      }
      if (held[peer.uid] + w.req.need.gpus > options_.max_gpus_per_user) {
        // Waiting on its own user's leases only: it does not hold back other users.
        w.last.why = quota_text(peer, options_.max_gpus_per_user);
        w.last.ahead = 0;
        w.quota_held = true;
        ++i;
        continue;
      }
    }
    w.quota_held = false;
    if (blocked) {
      w.last.why = blocker;  // made once per pass: assigned into each waiter's string, not rebuilt
      w.last.ahead = 1;
      ++i;
      continue;
    }
    core::LeaseOwner owner = w.shown.owner;
    std::optional<platform::PidWatch> watch;
    if (w.req.tie == core::LeaseTie::Process) {
      auto pw = platform::PidWatch::open(owner.pid, owner.start_time, options_.proc_root);
      if (!pw && pw.error().kind == ErrorKind::NotFound) {
        if (conn->second.sink)
          conn->second.sink->refused(w.request_id, make_error(ErrorKind::Invalid, pw.error().message));
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
        queued_.store(queue_.size(), std::memory_order_relaxed);
        continue;
      }
      if (pw) watch = std::move(*pw);
    }
    auto ar = prepare(peer, w.req, owner);
    if (ar) ar->job_id = w.shown.id;
    auto got = ar ? try_now(*ar) : Result<Attempt>(ar.error());
    if (!got || got->granted) {
      if (conn->second.sink) {
        if (!got)
          conn->second.sink->refused(w.request_id, got.error());
        else
          conn->second.sink->granted(w.request_id, *got->granted);
      }
      if (got) {
        held[peer.uid] += w.req.need.gpus;
        track(got->granted->lease, w.req.tie == core::LeaseTie::Connection ? w.conn : 0, std::move(watch));
      }
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
      queued_.store(queue_.size(), std::memory_order_relaxed);
      continue;
    }
    w.last.why = got->refusal.message;
    w.last.holders = std::move(got->holders);
    w.last.ahead = 0;
    blocked = true;
    blocker = fmt::format("waiting behind {} ({} GPU(s), priority {}) in the queue",
                          w.shown.name.empty() ? w.shown.id : w.shown.name, w.shown.gpus, w.shown.priority);
    ++i;
  }
}

void Arbiter::reading_published() {
  std::lock_guard lock(mu_);
  serve_queue();
}

steady_clock::time_point Arbiter::tick() {
  std::lock_guard lock(mu_);
  const auto now = clock_.now();
  bool changed = false;
  std::vector<std::string> gone;
  for (const auto& [id, l] : live_)
    if (l.watch && l.watch->exited()) gone.push_back(id);
  for (const auto& id : gone) changed = end_lease(id, "owner gone") || changed;

  for (std::size_t i = 0; i < queue_.size();) {
    Waiting& w = queue_[i];
    if (now < w.deadline) {
      ++i;
      continue;
    }
    if (auto conn = conns_.find(w.conn); conn != conns_.end() && conn->second.sink) {
      const std::string held = holders_text(w.last.holders);
      conn->second.sink->refused(
          w.request_id, make_error(ErrorKind::Unavailable,
                                   fmt::format("Insufficient GPUs after waiting {:.0f} s for {} GPU(s): {}{}",
                                               std::chrono::duration<double>(now - w.start).count(), w.req.need.gpus,
                                               w.last.why, held.empty() ? "" : "\nholders: " + held)));
    }
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    queued_.store(queue_.size(), std::memory_order_relaxed);
    changed = true;
  }
  if (changed || now >= next_recheck_) {
    serve_queue();
    next_recheck_ = now + options_.recheck;
  }
  if (now >= next_prune_) {
    next_prune_ = now + options_.prune_every;
    auto pruned = prune_jobs_locked();
    if (!pruned)
      platform::log_line("arbiter", "cannot prune old job records: " + pruned.error().message);
    else if (*pruned > 0)
      platform::log_line("arbiter", fmt::format("pruned {} finished job record(s) older than the retention", *pruned));
  }
  auto next = next_recheck_;
  for (auto& w : queue_) {
    if (now >= w.next_progress) {
      w.last.waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.start);
      if (auto conn = conns_.find(w.conn); conn != conns_.end() && conn->second.sink)
        conn->second.sink->waiting(w.request_id, w.last);
      w.next_progress = now + options_.progress_every;
    }
    next = std::min({next, w.next_progress, w.deadline});
  }
  return next;
}

}  // namespace gf::node
