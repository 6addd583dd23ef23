#pragma once
// Arbiter: the node's one writer of leases, the wait queue and job records while the agent runs
// (issue 12). Every user's CLI talks to it through a transport (server/agent_socket) that tells it who
// is asking (a Peer, from the kernel's peer credentials); the arbiter fills every owner from the peer,
// never from the request, and lets only the owner or an admin release, cancel or change a thing.
//
// Waiting is event-driven: queued acquires are served in order (priority, then arrival; a waiter ahead
// that cannot be served blocks those behind, except a waiter held back only by its own user's quota)
// whenever something may have changed — a request, a release, a disconnect, a published reading — and
// on tick(), which the transport calls on a short timer: tick() also ends expired waits, sends each
// waiter's progress at least once a second and ends leases whose watched process is gone.
//
// Decisions read only the agent's latest published reading (ReadingSource); the arbiter never queries
// the driver, so a slow or hung nvidia-smi never holds its lock (and with it every release, listing
// and other user's request). When that reading is older than reading_max_age, nothing is granted: a
// queued acquire waits for the next reading, a now-or-never one is refused NotReady naming the age.
//
// Job records are bounded (issue 20, finding 4): a non-admin's whole job document (job_put) is at most
// kMaxUserRecordBytes, an admin's kMaxRecordBytes; a uid keeps at most max_jobs_per_user records (a new
// one pushes out its oldest finished ones, and is refused when none has finished; admins have no cap);
// finished records last written more than job_retention ago are pruned on tick(), every prune_every.
//
// Transport-free and on a core::Clock, so tests drive it on a fake clock.
// Thread-safety: every public member may be called from any thread (one lock). ConnectionSink methods
// are called with that lock held: they must only queue what they are given, never call the arbiter.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/job.hpp"
#include "core/policy.hpp"
#include "core/ports/clock.hpp"
#include "core/ports/job_store.hpp"
#include "core/ports/lease_store.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/topology.hpp"
#include "platform/clock.hpp"
#include "platform/pidfd.hpp"
#include "scheduler/node_allocator.hpp"
#include "wire/agent_protocol.hpp"

namespace gf::node {

// Who is asking, as the kernel says (SO_PEERCRED) and the transport resolved it.
struct Peer {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t pid = 0;  // in the agent's PID namespace
  std::string user;       // the uid's name (or the number when it has none)
  bool admin = false;     // root, a member of the admin group, or the HTTP token holder
};

using ConnectionId = std::uint64_t;

// An acquire as the agent socket decodes it: a core::GpuNeed (with a MIG profile, gpus must be 1), the
// lease's name and job id (empty: the arbiter makes one), priority, wait (0: now or never) and tie.
using AcquireRequest = wire::AcquireArgs;

// Progress of a queued acquire.
struct WaitingEvent {
  std::chrono::milliseconds waited{0};
  std::string why;
  std::size_t ahead = 0;
  std::vector<core::Lease> holders;
};

// What the arbiter tells one connection. Called with the arbiter's lock held: queue and return.
class ConnectionSink {
 public:
  virtual ~ConnectionSink() = default;
  // The answer to a queued acquire (one of the two, once).
  virtual void granted(std::int64_t request_id, const scheduler::Allocation& a) = 0;
  virtual void refused(std::int64_t request_id, const Error& e) = 0;
  virtual void waiting(std::int64_t request_id, const WaitingEvent& e) = 0;
  virtual void lease_ended(const std::string& lease_id, const std::string& reason) = 0;
  virtual void lease_warning(const std::string& lease_id, const std::string& message) = 0;
};

struct ArbiterOptions {
  int max_user_priority = 0;                        // above: admins only
  unsigned max_gpus_per_user = 0;                   // 0: no quota
  std::chrono::milliseconds reading_max_age{2000};  // older: no decision until the next published reading
  std::chrono::milliseconds progress_every{1000};
  std::chrono::milliseconds recheck{2000};  // re-serve the queue for load from outside gpufleet
  std::string proc_root = "/proc";          // where a peer's parent and start times are read
  // Job records (the header comment): per non-admin uid (0: no cap), how long a finished one is kept
  // after it was last written (0: for ever), and how often tick() prunes them.
  std::uint64_t max_jobs_per_user = 10000;
  std::chrono::milliseconds job_retention = std::chrono::days(90);
  std::chrono::milliseconds prune_every = std::chrono::hours(1);
};

// Where decisions get their reading. latest: the agent's last published snapshot and when it was
// taken, on the arbiter's clock (a null snapshot before the first one). It must return at once: it
// is called under the arbiter's lock, so it reads what the agent's loop published, never the driver.
struct ReadingSource {
  std::function<std::pair<core::SnapshotPtr, std::chrono::steady_clock::time_point>()> latest;
  core::Topology topology;
};

class Arbiter {
 public:
  // The clock outlives the arbiter.
  Arbiter(std::unique_ptr<core::JobStore> store, ReadingSource source, ArbiterOptions options = {},
          const core::Clock& clock = platform::system_clock());
  ~Arbiter();
  Arbiter(const Arbiter&) = delete;
  Arbiter& operator=(const Arbiter&) = delete;

  // At start: ends the active leases tied to a connection of a previous run ("agent restarted") and
  // watches again those tied to a process that still runs (else "owner gone"). How many it ended.
  Result<std::size_t> recover();

  // A client connected / went away. disconnect() ends its connection-tied leases at once ("owner
  // gone") and drops its waiters (no answer is sent to them).
  ConnectionId connect(const Peer& peer, std::shared_ptr<ConnectionSink> sink);
  void disconnect(ConnectionId c);

  // The lease now, or nullopt: queued (the answer comes later through the sink). Errors: Invalid,
  // Permission (a priority above the ceiling), Unavailable (no GPUs now, or the quota), Failed.
  Result<std::optional<scheduler::Allocation>> acquire(ConnectionId c, std::int64_t request_id,
                                                       const AcquireRequest& r);
  // For the HTTP API: now or never, tied to the process `owner` (pid and start time). owner.uid and
  // owner.user, when set (the pid's user), own the lease and are charged its quota; else the peer's.
  Result<scheduler::Allocation> acquire_for(const Peer& peer, const AcquireRequest& r, core::LeaseOwner owner);
  // Drops a waiting acquire of this connection (it gets an Unavailable "cancelled" answer).
  Result<void> cancel(ConnectionId c, std::int64_t request_id);
  // Only the owner's uid or an admin: Permission naming the owner; NotFound when not active.
  Result<void> release(const Peer& peer, const std::string& lease_id);
  // For the reclaimer: by_admin skips the owner check (false: refuse nothing, release nothing).
  // True when it ended an active lease. The owner's connections hear lease_ended with the reason.
  Result<bool> release(const std::string& lease_id, bool by_admin, const std::string& reason);
  // Sends lease_warning to the owner's connections; false when the lease is not active.
  bool warn(const std::string& lease_id, const std::string& message);

  // Active leases (all: ended ones too, newest first, at most 200), with owners.
  Result<std::vector<core::Lease>> leases(bool all);
  // Queued acquires in serving order.
  std::vector<core::Waiter> waiting() const;
  // How many acquires are queued, without taking the arbiter's lock (which is held through store
  // transactions): for /metrics, which runs on the I/O thread and must never wait.
  std::size_t waiting_count() const noexcept { return queued_.load(std::memory_order_relaxed); }

  // Inserts (id empty: the arbiter makes one) or updates a job; the peer becomes its owner. Only the
  // owner's uid or an admin may update. Returns the id. Errors: Invalid (a document larger than the
  // peer's limit, wire::job_document_bytes), Permission (another's job; a new record while the uid is at
  // max_jobs_per_user with none finished), Failed (the store). An update never counts as a new record.
  Result<std::string> job_put(const Peer& peer, core::Job job);
  Result<std::vector<core::Job>> jobs(std::size_t limit);
  Result<core::JobPage> jobs_page(const core::JobQuery& q);
  Result<std::optional<core::Job>> job(const std::string& id);

  // A reading was published: serve the queue against it.
  void reading_published();
  // Timer work at the clock's now (see the header comment). Returns when it wants to run again.
  std::chrono::steady_clock::time_point tick();
  // Deletes the finished job records last written more than job_retention ago (serve calls it at start;
  // tick() every prune_every). How many it deleted.
  Result<std::size_t> prune_jobs();

  static constexpr std::size_t kMaxRecordBytes = 1 << 20;       // an admin's job document
  static constexpr std::size_t kMaxUserRecordBytes = 16 << 10;  // anyone else's

 private:
  struct Connection {
    Peer peer;
    std::shared_ptr<ConnectionSink> sink;
    std::optional<unsigned long long> start_time;  // the peer process's, read at its first acquire
  };
  struct Waiting {
    std::uint64_t seq = 0;
    ConnectionId conn = 0;
    std::int64_t request_id = 0;
    AcquireRequest req;
    core::Waiter shown;  // what `leases` lists
    std::chrono::steady_clock::time_point start{}, deadline{}, next_progress{};
    WaitingEvent last;
    bool quota_held = false;  // held back only by its own user's quota: blocks no one behind it
  };
  struct Live {             // an active lease the arbiter granted or watches
    ConnectionId conn = 0;  // connection-tied: the connection; else 0
    std::optional<std::uint32_t> uid;
    std::optional<platform::PidWatch> watch;  // process-tied
  };

  // One decision now: the lease, or why not and who holds what.
  struct Attempt {
    std::optional<scheduler::Allocation> granted;
    Error refusal;  // when not granted: Unavailable (too few GPUs qualify), NotReady (no recent reading)
    std::vector<core::Lease> holders;
  };

  // Who owns a lease the peer asks for: the peer's own process for a connection tie; for a process tie
  // its parent (the calling shell, which must be the peer's own), with a watch on it when one opens.
  // Errors: Invalid (no parent, orphaned, gone), Permission (another user's process).
  using TiedOwner = std::pair<core::LeaseOwner, std::optional<platform::PidWatch>>;
  Result<TiedOwner> owner_of(const Peer& peer, core::LeaseTie tie) const;
  // Checks the request against the rules that never change while it waits (sizes, the priority
  // ceiling, a request larger than the quota) and builds it. Errors: Invalid, Permission, Unavailable.
  Result<scheduler::AllocationRequest> prepare(const Peer& peer, const AcquireRequest& r,
                                               const core::LeaseOwner& owner) const;
  // Unavailable, naming the quota, when the peer's user would hold more than max_gpus_per_user with
  // `gpus` more; Failed when the store cannot say.
  Result<void> within_quota(const Peer& peer, unsigned gpus);
  // Invalid when no set of this node's GPUs (by the latest reading) could ever meet the request.
  Result<void> meetable(const scheduler::AllocationRequest& ar);
  // An error only when the store failed.
  Result<Attempt> try_now(const scheduler::AllocationRequest& ar);
  // GPUs held by uid in active leases, counted from the store's kept list without a look at /proc per
  // owner. Only when that count and `more` pass the quota is it counted again after a dead-owner sweep
  // (unless `swept` says one already ran), so a lease whose owner just died refuses no one.
  Result<unsigned> held_by(std::uint32_t uid, unsigned more, bool& swept);
  // Room for one more job record of the peer's uid under max_jobs_per_user: prunes its oldest finished
  // records when it is at the cap; Permission when none of them has finished.
  Result<void> room_for_job(const Peer& peer);
  Result<std::size_t> prune_jobs_locked();
  void track(const core::Lease& lease, ConnectionId conn, std::optional<platform::PidWatch> watch);
  bool end_lease(const std::string& id, const std::string& reason);  // store + live_ + owner told
  void tell_owner(const std::optional<std::uint32_t>& uid, ConnectionId conn,
                  const std::function<void(ConnectionSink&)>& f);
  void serve_queue();
  // The latest published reading when it is younger than reading_max_age; else NotReady saying why.
  Result<core::SnapshotPtr> reading() const;

  std::unique_ptr<core::JobStore> store_;
  ReadingSource source_;
  ArbiterOptions options_;
  const core::Clock& clock_;
  std::unique_ptr<scheduler::NodeAllocator> allocator_;

  mutable std::mutex mu_;
  ConnectionId next_conn_ = 1;
  std::uint64_t next_seq_ = 1;
  std::map<ConnectionId, Connection> conns_;
  std::vector<Waiting> queue_;          // serving order: priority (higher first), then seq
  std::atomic<std::size_t> queued_{0};  // queue_.size(), for readers that must not wait for mu_
  std::map<std::string, Live> live_;
  std::chrono::steady_clock::time_point next_recheck_{};
  std::chrono::steady_clock::time_point next_prune_{};
};

}  // namespace gf::node
