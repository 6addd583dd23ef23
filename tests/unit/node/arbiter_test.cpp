// node::Arbiter on a fake clock (issue 12): owners come from the peer, only the owner or an admin
// releases, the priority ceiling and the quota, strict FIFO, disconnect and process ties end leases,
// restart recovery, job ownership.
#include "node/arbiter.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "node/agent.hpp"
#include "sampler/hub.hpp"
#include "sampler/monitor.hpp"
#include "store/node_store.hpp"
#include "support/agent_rig.hpp"
#include "support/fake_clock.hpp"
#include "support/scripted_backend.hpp"

namespace gf::node {
namespace {

using namespace std::chrono_literals;

struct Recorder final : ConnectionSink {
  std::vector<std::pair<std::int64_t, std::string>> granted_ids;  // request id, lease id
  std::vector<std::pair<std::int64_t, Error>> refusals;
  std::vector<std::pair<std::int64_t, WaitingEvent>> waits;
  std::vector<std::pair<std::string, std::string>> ended, warnings;
  void granted(std::int64_t id, const scheduler::Allocation& a) override { granted_ids.emplace_back(id, a.lease.id); }
  void refused(std::int64_t id, const Error& e) override { refusals.emplace_back(id, e); }
  void waiting(std::int64_t id, const WaitingEvent& e) override { waits.emplace_back(id, e); }
  void lease_ended(const std::string& l, const std::string& r) override { ended.emplace_back(l, r); }
  void lease_warning(const std::string& l, const std::string& m) override { warnings.emplace_back(l, m); }
};

const Peer kAlice{1001, 1001, 4001, "alice", false};
const Peer kBob{1002, 1002, 4002, "bob", false};
const Peer kRoot{0, 0, 4000, "root", true};

struct ArbiterTest : ::testing::Test {
  test::TempDir dir;
  test::FakeClock clock;
  core::SnapshotPtr snap;
  // When the "published" reading was taken; nullopt: just now (an agent whose loop keeps publishing).
  std::optional<std::chrono::steady_clock::time_point> taken;
  ArbiterOptions options;
  std::unique_ptr<Arbiter> arb;

  void SetUp() override {
    auto s = std::make_shared<core::Snapshot>();
    for (unsigned i = 0; i < 2; ++i) s->gpus.push_back(test::make_gpu(i, 0, 1000));
    s->backend = "scripted";
    snap = s;
  }
  void make(bool store_always_alive = true) {
    store::NodeStore::Alive alive;
    if (store_always_alive) alive = [](const core::LeaseOwner&) { return true; };
    auto st = store::NodeStore::open((dir.path() / "gf.db").string(), alive, clock);
    ASSERT_TRUE(st) << st.error().message;
    ReadingSource rs;
    rs.latest = [this] { return std::pair{snap, taken.value_or(clock.now())}; };
    arb = std::make_unique<Arbiter>(std::move(*st), std::move(rs), options, clock);
  }
  static AcquireRequest one(unsigned gpus = 1) {
    AcquireRequest r;
    r.need.gpus = gpus;
    r.need.min_free_memory_mib = 1000;
    return r;
  }
};

// Review of issue 12 ("fresh driver reads never on the path of a lease decision"): the arbiter decides
// on the published reading only. When it is older than reading_max_age, a now-or-never acquire is
// refused NotReady saying how old it is, a waiting one is queued and told why, and the next published
// reading serves it.
TEST_F(ArbiterTest, AStaleReadingQueuesOrRefusesNotReadyAndTheNextOneServes) {
  make();
  auto rec = std::make_shared<Recorder>();
  auto c = arb->connect(kAlice, rec);
  auto got = arb->acquire(c, 1, one());
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(*got);

  taken = clock.now();
  clock.advance(5s);  // the loop published nothing since: the reading is 5 s old (the limit is 2 s)
  got = arb->acquire(c, 2, one());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().kind, ErrorKind::NotReady);
  EXPECT_NE(got.error().message.find("5.0 s old"), std::string::npos) << got.error().message;
  AcquireRequest patient = one();
  patient.wait = 1h;
  got = arb->acquire(c, 3, patient);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_FALSE(*got) << "queued, not granted on a stale reading";
  ASSERT_EQ(arb->waiting().size(), 1u);
  arb->tick();
  ASSERT_FALSE(rec->waits.empty());
  EXPECT_NE(rec->waits.back().second.why.find("s old"), std::string::npos) << rec->waits.back().second.why;
  EXPECT_TRUE(rec->granted_ids.empty());

  taken = clock.now();  // the loop publishes again
  arb->reading_published();
  ASSERT_EQ(rec->granted_ids.size(), 1u);
  EXPECT_EQ(rec->granted_ids[0].first, 3);
  EXPECT_TRUE(arb->waiting().empty());
}

// The same through the real agent on a fake clock, its driver hung at a gate: the loop's query and a
// `?fresh=1` request are both stuck in the driver, and the arbiter still answers at once (a queued
// acquire, a NotReady refusal, a release and a listing) without ever querying the driver itself. Once
// the driver answers, the loop's reading serves the queue.
TEST_F(ArbiterTest, AHungDriverNeverHoldsUpTheArbiter) {
  auto st = std::make_shared<test::ScriptedBackend::State>();
  {
    std::lock_guard lock(st->mu);
    st->next.gpus = {test::make_gpu(0, 0), test::make_gpu(1, 0)};
    st->next.backend = "scripted";
  }
  sampler::MonitorOptions mo;
  mo.cache_ttl = 0ms;
  sampler::Monitor monitor(std::make_unique<test::ScriptedBackend>(st), clock, mo);
  sampler::SampleHub hub(monitor, clock, sampler::SampleHub::Drive::Manual);
  AgentOptions ao;
  ao.interval = 1s;
  ao.writer_thread = false;
  ao.alert_rules = {};
  Agent agent(monitor, hub, nullptr, nullptr, ao, clock);
  agent.start();  // the first reading, published now
  ASSERT_TRUE(agent.latest());

  auto store =
      store::NodeStore::open((dir.path() / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
  ASSERT_TRUE(store) << store.error().message;
  ReadingSource rs;
  rs.latest = [&agent]() -> std::pair<core::SnapshotPtr, std::chrono::steady_clock::time_point> {
    auto p = agent.latest();
    if (!p) return {nullptr, {}};
    return {p->snapshot, p->taken};
  };
  Arbiter arbiter(std::move(*store), std::move(rs), options, clock);
  auto rec = std::make_shared<Recorder>();
  auto c = arbiter.connect(kAlice, rec);
  auto first = arbiter.acquire(c, 1, one());
  ASSERT_TRUE(first && *first) << (first ? "queued" : first.error().message);
  const std::string lease = (*first)->lease.id;

  st->close_gate();
  const int queries_before = st->queries.load();
  clock.advance(3s);
  std::thread loop([&] { hub.step(clock.now()); });  // the loop's collection, stuck in the driver
  std::thread fresh([&] { (void)agent.fresh(); });   // a ?fresh=1 request, stuck behind it
  struct Release {                                   // whatever happens below, the threads end
    std::function<void()> f;
    ~Release() { f(); }
  } release_driver{[&] {
    st->open_gate();
    if (loop.joinable()) loop.join();
    if (fresh.joinable()) fresh.join();
  }};
  ASSERT_TRUE(test::eventually([&] { return st->held.load() == 1; })) << "the driver was never asked";

  // Each call runs on its own thread, bounded: a call stuck behind the driver fails the test (the gate
  // is then opened so that the call, and the test, end) instead of hanging it.
  auto bounded = [&](auto f) {
    auto fut = std::async(std::launch::async, std::move(f));
    const bool answered = fut.wait_for(10s) == std::future_status::ready;
    if (!answered) st->open_gate();
    return answered;
  };
  Result<std::optional<scheduler::Allocation>> now_or_never = make_error("not called");
  EXPECT_TRUE(bounded([&] { now_or_never = arbiter.acquire(c, 2, one()); })) << "acquire waited on the driver";
  ASSERT_FALSE(now_or_never);
  EXPECT_EQ(now_or_never.error().kind, ErrorKind::NotReady) << now_or_never.error().message;
  AcquireRequest patient = one();
  patient.wait = 1h;
  Result<std::optional<scheduler::Allocation>> queued = make_error("not called");
  EXPECT_TRUE(bounded([&] { queued = arbiter.acquire(c, 3, patient); }));
  ASSERT_TRUE(queued) << queued.error().message;
  EXPECT_FALSE(*queued);
  EXPECT_TRUE(bounded([&] { EXPECT_TRUE(arbiter.leases(false)); }));
  EXPECT_TRUE(bounded([&] { EXPECT_TRUE(arbiter.release(kAlice, lease)); }));
  EXPECT_TRUE(bounded([&] { arbiter.tick(); }));
  EXPECT_TRUE(rec->granted_ids.empty()) << "nothing is granted on a 3 s old reading";
  EXPECT_EQ(st->queries.load() - queries_before, 1) << "only the loop's collection reached the driver";

  release_driver.f();
  arbiter.reading_published();
  ASSERT_EQ(rec->granted_ids.size(), 1u) << "the loop's new reading serves the queue";
  EXPECT_EQ(rec->granted_ids[0].first, 3);
  agent.stop();
}

// Finding "user B releases user A's lease": the owner is the peer, and another uid is refused.
TEST_F(ArbiterTest, OwnerComesFromThePeerAndAnotherUserCannotRelease) {
  make();
  auto ra = std::make_shared<Recorder>(), rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  arb->connect(kBob, rb);
  AcquireRequest req = one();
  auto got = arb->acquire(a, 1, req);
  ASSERT_TRUE(got && *got);
  const auto lease = (*got)->lease;
  EXPECT_EQ(lease.owner.uid, 1001u);
  EXPECT_EQ(lease.owner.user, "alice");
  EXPECT_EQ(lease.owner.pid, 4001u);
  EXPECT_EQ(lease.tie, core::LeaseTie::Connection);

  auto r = arb->release(kBob, lease.id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Permission);
  EXPECT_NE(r.error().message.find("belongs to alice (uid 1001)"), std::string::npos) << r.error().message;
  auto active = arb->leases(false);
  ASSERT_TRUE(active);
  EXPECT_EQ(active->size(), 1u) << "bob's attempt left the lease alone";

  ASSERT_TRUE(arb->release(kRoot, lease.id)) << "an admin may";
  active = arb->leases(false);
  ASSERT_TRUE(active);
  EXPECT_TRUE(active->empty());
  ASSERT_EQ(ra->ended.size(), 1u) << "the owner hears that its lease ended";
  EXPECT_EQ(ra->ended[0].second, "released by root");
}

// A release of one's own lease is one store write (no listing of every lease); a lease another process
// ended meanwhile through the store answers NotFound, and a release of it again too.
TEST_F(ArbiterTest, AnOwnReleaseEndsTheLeaseOnceAndOneEndedElsewhereIsNotFound) {
  make();
  auto ra = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto first = arb->acquire(a, 1, one());
  auto second = arb->acquire(a, 2, one());
  ASSERT_TRUE(first && *first && second && *second);
  ASSERT_TRUE(arb->release(kAlice, (*first)->lease.id));
  ASSERT_EQ(ra->ended.size(), 1u);
  EXPECT_EQ(ra->ended[0], std::make_pair((*first)->lease.id, std::string("released")));
  auto twice = arb->release(kAlice, (*first)->lease.id);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().kind, ErrorKind::NotFound);

  auto other =
      store::NodeStore::open((dir.path() / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
  ASSERT_TRUE(other) << other.error().message;
  ASSERT_TRUE(*(*other)->release((*second)->lease.id, "ended elsewhere"));
  auto gone = arb->release(kAlice, (*second)->lease.id);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::NotFound);
  auto active = arb->leases(false);
  ASSERT_TRUE(active);
  EXPECT_TRUE(active->empty());
  // Both GPUs are free again for the next acquire.
  auto next = arb->acquire(a, 3, one(2));
  ASSERT_TRUE(next && *next);
}

// Review of issue 12: a request no set of this node's GPUs could ever meet (more GPUs than it has, a
// memory floor above every GPU's total) would wait at the head of the queue for ever and hold back
// everyone behind it. It is refused at once, and the next user is served.
TEST_F(ArbiterTest, ARequestTheNodeCanNeverMeetIsRefusedNotQueued) {
  make();
  auto rb = std::make_shared<Recorder>(), ra = std::make_shared<Recorder>();
  auto b = arb->connect(kBob, rb);
  AcquireRequest too_many = one(3);  // the node has 2
  too_many.wait = 1h;
  auto r = arb->acquire(b, 1, too_many);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Invalid);
  EXPECT_NE(r.error().message.find("this node has 2"), std::string::npos) << r.error().message;
  AcquireRequest too_big = one();
  too_big.need.min_free_memory_mib = 200000;  // every GPU has 80000 MiB in all
  too_big.wait = 1h;
  r = arb->acquire(b, 2, too_big);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Invalid);
  EXPECT_TRUE(arb->waiting().empty());
  auto a = arb->connect(kAlice, ra);
  auto got = arb->acquire(a, 1, one());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(*got) << "nothing holds the queue";
}

// Finding "any user may also set any --priority".
TEST_F(ArbiterTest, PriorityAboveTheCeilingNeedsAnAdmin) {
  options.max_user_priority = 5;
  make();
  auto a = arb->connect(kAlice, std::make_shared<Recorder>());
  auto root = arb->connect(kRoot, std::make_shared<Recorder>());
  AcquireRequest req = one();
  req.priority = 6;
  auto r = arb->acquire(a, 1, req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Permission);
  req.priority = 5;
  EXPECT_TRUE(arb->acquire(a, 2, req));
  req.priority = 100;
  EXPECT_TRUE(arb->acquire(root, 3, req));
}

// Issue 20, finding 12: an HTTP lease for a pid belongs to the pid's uid (not the agent's), so that
// user may release it, and it counts against that user's quota.
TEST_F(ArbiterTest, ApiLeaseForAPidIsOwnedByAndChargedToThePidsUser) {
  options.max_gpus_per_user = 1;
  make();
  core::LeaseOwner owner{static_cast<std::uint32_t>(::getpid()), 0, "alice", kAlice.uid};
  auto got = arb->acquire_for(kRoot, one(), owner);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->lease.owner.uid, kAlice.uid);
  auto again = arb->acquire_for(kRoot, one(), owner);
  ASSERT_FALSE(again) << "alice's quota is spent";
  EXPECT_NE(again.error().message.find("quota"), std::string::npos);
  auto a = arb->connect(kAlice, std::make_shared<Recorder>());
  EXPECT_FALSE(arb->acquire(a, 1, one())) << "the API lease counts for alice on the socket too";
  EXPECT_TRUE(arb->release(kAlice, got->lease.id)) << "alice owns it, so she may release it";
}

TEST_F(ArbiterTest, QuotaRefusesNowOrQueuesUntilItFits) {
  options.max_gpus_per_user = 1;
  make();
  auto rec = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, rec);
  auto first = arb->acquire(a, 1, one());
  ASSERT_TRUE(first && *first);
  auto now = arb->acquire(a, 2, one());
  ASSERT_FALSE(now) << "a second GPU now would break the quota";
  EXPECT_EQ(now.error().kind, ErrorKind::Unavailable);
  EXPECT_NE(now.error().message.find("quota"), std::string::npos);
  EXPECT_FALSE(arb->acquire(a, 3, one(2))) << "more than the quota can never fit";

  AcquireRequest waiting = one();
  waiting.wait = 60s;
  auto q = arb->acquire(a, 4, waiting);
  ASSERT_TRUE(q);
  EXPECT_FALSE(*q) << "queued";
  // Bob is not held back by alice's quota.
  auto b = arb->connect(kBob, std::make_shared<Recorder>());
  auto bob = arb->acquire(b, 1, one());
  ASSERT_TRUE(bob) << bob.error().message;
  ASSERT_TRUE(*bob);
  ASSERT_TRUE(arb->release(kBob, (*bob)->lease.id));
  EXPECT_TRUE(rec->granted_ids.empty()) << "a free GPU, but alice still holds her quota";
  ASSERT_TRUE(arb->release(kAlice, (*first)->lease.id));
  ASSERT_EQ(rec->granted_ids.size(), 1u);
  EXPECT_EQ(rec->granted_ids[0].first, 4);
}

TEST_F(ArbiterTest, StrictFifoAndPriorityOrder) {
  make();
  auto ra = std::make_shared<Recorder>(), rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto b = arb->connect(kBob, rb);
  auto held = arb->acquire(a, 1, one());
  ASSERT_TRUE(held && *held);
  AcquireRequest two = one(2);
  two.wait = 60s;
  ASSERT_TRUE(arb->acquire(b, 1, two));  // needs both GPUs: waits
  AcquireRequest small = one();
  small.wait = 60s;
  auto s = arb->acquire(a, 2, small);
  ASSERT_TRUE(s);
  EXPECT_FALSE(*s) << "one GPU is free, but bob is ahead and cannot be served: strict FIFO";
  AcquireRequest urgent = one();
  urgent.wait = 60s;
  urgent.priority = 0;
  auto waiting = arb->waiting();
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_EQ(waiting[0].owner.user, "bob");

  ASSERT_TRUE(arb->release(kAlice, (*held)->lease.id));
  ASSERT_EQ(rb->granted_ids.size(), 1u) << "bob first";
  EXPECT_TRUE(ra->granted_ids.empty());
  clock.advance(3s);
  arb->tick();
  ASSERT_FALSE(ra->waits.empty()) << "alice hears progress while she waits";
  EXPECT_EQ(ra->waits.back().second.ahead, 0u);
}

TEST_F(ArbiterTest, HigherPriorityQueuedLaterIsServedFirst) {
  options.max_user_priority = 10;
  make();
  auto ra = std::make_shared<Recorder>(), rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto b = arb->connect(kBob, rb);
  auto held = arb->acquire(a, 1, one(2));
  ASSERT_TRUE(held && *held);
  AcquireRequest low = one();
  low.wait = 60s;
  ASSERT_TRUE(arb->acquire(a, 2, low));
  AcquireRequest high = one();
  high.wait = 60s;
  high.priority = 5;
  ASSERT_TRUE(arb->acquire(b, 1, high));
  ASSERT_EQ(arb->waiting().front().owner.user, "bob");
  ASSERT_TRUE(arb->release(kAlice, (*held)->lease.id));
  ASSERT_EQ(rb->granted_ids.size(), 1u);
  ASSERT_EQ(ra->granted_ids.size(), 1u) << "two GPUs free: both served, bob first";
}

TEST_F(ArbiterTest, DisconnectEndsConnectionLeasesAtOnceAndDropsWaiters) {
  make();
  auto ra = std::make_shared<Recorder>(), rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto b = arb->connect(kBob, rb);
  auto held = arb->acquire(a, 1, one(2));
  ASSERT_TRUE(held && *held);
  AcquireRequest w = one();
  w.wait = 60s;
  ASSERT_TRUE(arb->acquire(a, 2, w));
  ASSERT_TRUE(arb->acquire(b, 1, w));
  arb->disconnect(a);  // no tick: at once
  auto hist = arb->leases(true);
  ASSERT_TRUE(hist);
  std::string reason = "(not found)";
  for (const auto& l : *hist)
    if (l.id == (*held)->lease.id) reason = l.release_reason;
  EXPECT_EQ(reason, "owner gone");
  ASSERT_EQ(rb->granted_ids.size(), 1u) << "alice's waiter went with her; bob is served";
  EXPECT_TRUE(arb->waiting().empty());
}

TEST_F(ArbiterTest, AWaitEndsAtItsDeadlineWithTheHolders) {
  make();
  auto ra = std::make_shared<Recorder>(), rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto b = arb->connect(kBob, rb);
  ASSERT_TRUE(arb->acquire(a, 1, one(2)));
  AcquireRequest w = one();
  w.wait = 3s;
  ASSERT_TRUE(arb->acquire(b, 7, w));
  for (int i = 0; i < 4; ++i) {
    clock.advance(1s);
    arb->tick();
  }
  ASSERT_EQ(rb->refusals.size(), 1u);
  EXPECT_EQ(rb->refusals[0].first, 7);
  EXPECT_EQ(rb->refusals[0].second.kind, ErrorKind::Unavailable);
  EXPECT_NE(rb->refusals[0].second.message.find("alice (uid 1001)"), std::string::npos)
      << rb->refusals[0].second.message;
  EXPECT_GE(rb->waits.size(), 2u) << "progress at least once a second (at 1 s and 2 s; 3 s is the deadline)";
}

TEST_F(ArbiterTest, CancelAnswersTheWaiterAndFreesTheQueue) {
  make();
  auto rb = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, std::make_shared<Recorder>());
  auto b = arb->connect(kBob, rb);
  ASSERT_TRUE(arb->acquire(a, 1, one(2)));
  AcquireRequest w = one();
  w.wait = 60s;
  ASSERT_TRUE(arb->acquire(b, 3, w));
  EXPECT_FALSE(arb->cancel(a, 3)) << "another connection's waiter";
  ASSERT_TRUE(arb->cancel(b, 3));
  ASSERT_EQ(rb->refusals.size(), 1u);
  EXPECT_TRUE(arb->waiting().empty());
}

// Finding "a lease taken for a process": the `alloc` tie follows the client's parent through a pidfd.
TEST_F(ArbiterTest, ProcessTiedLeaseEndsWhenTheParentDies) {
  make();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      ::_exit(0);
    }
    std::int32_t v = child;
    (void)!::write(fds[1], &v, sizeof v);
    ::pause();
    ::_exit(0);
  }
  std::int32_t child = 0;
  ASSERT_EQ(::read(fds[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(fds[0]);
  ::close(fds[1]);
  // Review of issue 12: the parent must be the peer's own process; someone else's (here: alice's client
  // under a parent of the test's uid) would keep the lease alive beyond the user's session.
  Peer alice = kAlice;
  alice.pid = static_cast<std::uint32_t>(child);
  auto ca = arb->connect(alice, std::make_shared<Recorder>());
  AcquireRequest req = one();
  req.tie = core::LeaseTie::Process;
  auto refused = arb->acquire(ca, 1, req);
  EXPECT_FALSE(refused);
  if (!refused) {
    EXPECT_EQ(refused.error().kind, ErrorKind::Permission);
  }
  arb->disconnect(ca);

  Peer p{static_cast<std::uint32_t>(::getuid()), static_cast<std::uint32_t>(::getgid()), 0, "tester", false};
  p.pid = static_cast<std::uint32_t>(child);  // the client; its parent holds the lease
  auto c = arb->connect(p, std::make_shared<Recorder>());
  auto got = arb->acquire(c, 1, req);
  if (!got || !*got) {  // never leave the forked processes behind
    ::kill(parent, SIGKILL);
    ::kill(child, SIGKILL);
    ::waitpid(parent, nullptr, 0);
  }
  ASSERT_TRUE(got && *got) << (got ? "" : got.error().message);
  EXPECT_EQ((*got)->lease.owner.pid, static_cast<std::uint32_t>(parent));
  arb->disconnect(c);  // `alloc` exits: the lease stays
  arb->tick();
  auto active = arb->leases(false);
  ASSERT_TRUE(active);
  EXPECT_EQ(active->size(), 1u);

  ::kill(parent, SIGKILL);
  ::waitpid(parent, nullptr, 0);
  EXPECT_TRUE(test::eventually([&] {
    arb->tick();
    auto l = arb->leases(false);
    return l && l->empty();
  }));
  ::kill(child, SIGKILL);
  auto hist = arb->leases(true);
  ASSERT_TRUE(hist && !hist->empty());
  EXPECT_EQ(hist->front().release_reason, "owner gone");
}

TEST_F(ArbiterTest, RestartEndsConnectionLeasesAndKeepsLiveProcessOnes) {
  make();
  auto c = arb->connect(kAlice, std::make_shared<Recorder>());
  auto conn_lease = arb->acquire(c, 1, one());
  ASSERT_TRUE(conn_lease && *conn_lease);
  // The test's own uid: a process tie needs a parent of the peer's uid.
  Peer self{static_cast<std::uint32_t>(::getuid()), static_cast<std::uint32_t>(::getgid()), 0, "tester", false};
  self.pid = static_cast<std::uint32_t>(::getpid());  // its parent (the test runner's) outlives the test
  auto c2 = arb->connect(self, std::make_shared<Recorder>());
  AcquireRequest req = one();
  req.tie = core::LeaseTie::Process;
  auto proc_lease = arb->acquire(c2, 1, req);
  ASSERT_TRUE(proc_lease && *proc_lease) << (proc_lease ? "" : proc_lease.error().message);
  arb.reset();  // the agent stops (without disconnects)

  make();
  auto ended = arb->recover();
  ASSERT_TRUE(ended) << ended.error().message;
  EXPECT_EQ(*ended, 1u);
  auto active = arb->leases(false);
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ(active->front().id, (*proc_lease)->lease.id);
  auto hist = arb->leases(true);
  ASSERT_TRUE(hist);
  bool restarted = false;
  for (const auto& l : *hist)
    restarted = restarted || (l.id == (*conn_lease)->lease.id && l.release_reason == "agent restarted");
  EXPECT_TRUE(restarted);
}

// Finding "anyone can forge job states": a job belongs to its first putter.
TEST_F(ArbiterTest, OnlyTheOwnerOrAnAdminUpdatesAJob) {
  make();
  core::Job j;
  j.status = "running";
  j.command = "[\"train\"]";
  auto id = arb->job_put(kAlice, j);
  ASSERT_TRUE(id) << id.error().message;
  j.id = *id;
  j.status = "failed";
  auto forged = arb->job_put(kBob, j);
  ASSERT_FALSE(forged);
  EXPECT_EQ(forged.error().kind, ErrorKind::Permission);
  EXPECT_NE(forged.error().message.find("(uid 1001)"), std::string::npos) << forged.error().message;
  j.status = "succeeded";
  ASSERT_TRUE(arb->job_put(kAlice, j));
  auto back = arb->job(*id);
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->status, "succeeded");
  EXPECT_EQ((*back)->owner.uid, 1001u);
  j.record = std::string(Arbiter::kMaxRecordBytes + 1, 'x');
  EXPECT_FALSE(arb->job_put(kAlice, j)) << "records are bounded";
}

// Issue 20, finding 4: a user's job document is at most 16 KiB in all (record, command, name, …, as
// served), an update included; an admin's 1 MiB.
TEST_F(ArbiterTest, AUsersJobDocumentIsCappedAt16KiBAndAnAdminsAt1MiB) {
  make();
  core::Job j;
  j.status = "succeeded";
  j.command = "[\"train\"]";
  j.record = nlohmann::json{{"note", std::string(17 * 1024, 'x')}}.dump();
  auto big = arb->job_put(kAlice, j);
  ASSERT_FALSE(big) << "a 17 KiB document from a user";
  EXPECT_EQ(big.error().kind, ErrorKind::Invalid);
  EXPECT_NE(big.error().message.find("at most 16384 bytes"), std::string::npos) << big.error().message;
  auto admin = arb->job_put(kRoot, j);
  ASSERT_TRUE(admin) << admin.error().message;

  // The whole document counts: a record under the limit with a long command line is over it.
  j.record = nlohmann::json{{"note", std::string(9 * 1024, 'x')}}.dump();
  j.command = nlohmann::json(std::vector<std::string>(80, std::string(100, 'a'))).dump();
  EXPECT_FALSE(arb->job_put(kAlice, j)) << "9 KiB of record and 8 KiB of command";
  // Nor does the record's text escape the count by not parsing (the store keeps it as it is).
  j.command = "[]";
  j.record = std::string(17 * 1024, '{');
  EXPECT_FALSE(arb->job_put(kAlice, j));

  // An update is bounded the same way; the record stays as it was.
  j.record = "{}";
  auto id = arb->job_put(kAlice, j);
  ASSERT_TRUE(id) << id.error().message;
  j.id = *id;
  j.record = nlohmann::json{{"note", std::string(16 * 1024, 'x')}}.dump();
  EXPECT_FALSE(arb->job_put(kAlice, j)) << "an update past 16 KiB";
  EXPECT_EQ((*arb->job(*id))->record, "{}");
  j.record = nlohmann::json{{"note", std::string(15 * 1024, 'x')}}.dump();
  EXPECT_TRUE(arb->job_put(kAlice, j)) << "15 KiB in all fits";

  core::Job huge;
  huge.status = "succeeded";
  huge.record = nlohmann::json{{"note", std::string(Arbiter::kMaxRecordBytes, 'x')}}.dump();
  auto root_big = arb->job_put(kRoot, huge);
  ASSERT_FALSE(root_big) << "an admin's is bounded too";
  EXPECT_NE(root_big.error().message.find("at most 1048576 bytes"), std::string::npos) << root_big.error().message;
}

// Issue 20, finding 4: a uid keeps at most max_jobs_per_user records. A new one pushes out the uid's
// least recently written finished records, never a running one nor another user's; with none finished
// it is refused. Updating one's own record is not a new one. Admins have no cap.
TEST_F(ArbiterTest, TheJobCountCapPrunesTheOldestFinishedAndRefusesWhenNoneHas) {
  options.max_jobs_per_user = 3;
  make();
  auto put = [&](const Peer& p, const std::string& status, const std::string& id = "") {
    core::Job j;
    j.id = id;
    j.status = status;
    j.command = "[]";
    j.record = "{}";
    clock.advance(1min);
    return arb->job_put(p, j);
  };
  ASSERT_TRUE(put(kBob, "succeeded"));
  auto first = put(kAlice, "succeeded");
  auto running = put(kAlice, "running");
  auto second = put(kAlice, "failed");
  ASSERT_TRUE(first && running && second);
  // An update of her own record at the cap: no new record, nothing pruned.
  ASSERT_TRUE(put(kAlice, "succeeded", *running)) << "an update is not a new record";
  EXPECT_TRUE(*arb->job(*first));

  auto fourth = put(kAlice, "running");
  ASSERT_TRUE(fourth) << fourth.error().message;
  EXPECT_FALSE(*arb->job(*first)) << "her oldest finished record made room";
  EXPECT_TRUE(*arb->job(*second));
  EXPECT_TRUE(*arb->job(*running));
  auto all = arb->jobs(100);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 4u) << "bob's record is his";

  // Three records, none finished: a fourth is refused, saying why.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(put(kBob, "running"));
  ASSERT_TRUE(put(kBob, "succeeded"));
  const auto bobs_last = put(kBob, "running");
  ASSERT_TRUE(bobs_last) << "his finished one made room";
  auto refused = put(kBob, "waiting");
  ASSERT_FALSE(refused) << "three running records and no room";
  EXPECT_EQ(refused.error().kind, ErrorKind::Permission);
  EXPECT_NE(refused.error().message.find("max_jobs_per_user"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("bob (uid 1002)"), std::string::npos) << refused.error().message;

  for (int i = 0; i < 5; ++i) ASSERT_TRUE(put(kRoot, "running")) << "admins have no cap";
}

// Issue 20, finding 4: finished records last written more than job_retention ago are pruned by tick(),
// every prune_every, and by prune_jobs(); running and recent ones stay.
TEST_F(ArbiterTest, RetentionPrunesOldFinishedJobsOnTheClock) {
  options.job_retention = 24h;
  options.prune_every = 1h;
  make();
  core::Job j;
  j.command = "[]";
  j.record = "{}";
  j.status = "succeeded";
  auto old_done = arb->job_put(kAlice, j);
  j.status = "running";
  auto old_running = arb->job_put(kAlice, j);
  ASSERT_TRUE(old_done && old_running);
  clock.advance(23h);
  arb->tick();
  EXPECT_TRUE(*arb->job(*old_done)) << "23 h old: kept";
  clock.advance(2h);
  j.status = "failed";
  auto fresh = arb->job_put(kAlice, j);
  ASSERT_TRUE(fresh);
  arb->tick();
  EXPECT_FALSE(*arb->job(*old_done)) << "25 h old and finished: pruned by the tick";
  EXPECT_TRUE(*arb->job(*old_running)) << "a running record stays, however old";
  EXPECT_TRUE(*arb->job(*fresh));

  clock.advance(25h);
  auto pruned = arb->prune_jobs();
  ASSERT_TRUE(pruned) << pruned.error().message;
  EXPECT_EQ(*pruned, 1u);
  EXPECT_TRUE(*arb->job(*old_running));
}

// Issue 20, finding 10: bob cannot take a lease under alice's job id (it would count as her job's);
// alice can, and so can an admin.
TEST_F(ArbiterTest, AcquireRefusesAnotherUsersJobId) {
  make();
  core::Job j;
  j.status = "running";
  auto id = arb->job_put(kAlice, j);
  ASSERT_TRUE(id) << id.error().message;
  AcquireRequest req = one();
  req.job_id = *id;
  auto b = arb->connect(kBob, std::make_shared<Recorder>());
  auto forged = arb->acquire(b, 1, req);
  ASSERT_FALSE(forged) << "bob's lease under alice's job";
  EXPECT_EQ(forged.error().kind, ErrorKind::Permission);
  EXPECT_NE(forged.error().message.find("(uid 1001)"), std::string::npos) << forged.error().message;
  auto a = arb->connect(kAlice, std::make_shared<Recorder>());
  auto own = arb->acquire(a, 1, req);
  ASSERT_TRUE(own && *own) << (own ? "queued" : own.error().message);
  req.job_id = "no-such-job";
  EXPECT_TRUE(arb->acquire(b, 2, req)) << "an id with no job record is anyone's";
}

TEST_F(ArbiterTest, ReclaimerHooksWarnAndReleaseReachTheOwner) {
  make();
  auto ra = std::make_shared<Recorder>();
  auto a = arb->connect(kAlice, ra);
  auto got = arb->acquire(a, 1, one());
  ASSERT_TRUE(got && *got);
  EXPECT_TRUE(arb->warn((*got)->lease.id, "idle for 30 min"));
  ASSERT_EQ(ra->warnings.size(), 1u);
  EXPECT_EQ(ra->warnings[0].second, "idle for 30 min");
  auto not_admin = arb->release((*got)->lease.id, false, "idle");
  ASSERT_TRUE(not_admin);
  EXPECT_FALSE(*not_admin);
  auto r = arb->release((*got)->lease.id, true, "reclaimed: idle");
  ASSERT_TRUE(r && *r);
  ASSERT_EQ(ra->ended.size(), 1u);
  EXPECT_EQ(ra->ended[0].second, "reclaimed: idle");
}

}  // namespace
}  // namespace gf::node
