#include "store/node_store.hpp"
#include "store/sqlite.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"

namespace gf::store {
namespace {

// Built member by member: GCC 12 at -O3 reports a false "may be used uninitialized" on the string
// inside a nested brace-initialised temporary LeaseRequest.
core::LeaseRequest request(const std::string& job_id, const std::string& name, std::uint32_t pid,
                           unsigned long long start_time, const std::string& user, const std::string& waiter_id) {
  core::LeaseRequest r;
  r.job_id = job_id;
  r.name = name;
  r.owner.pid = pid;
  r.owner.start_time = start_time;
  r.owner.user = user;
  r.waiter_id = waiter_id;
  return r;
}

namespace fs = std::filesystem;
using Gpus = std::vector<core::LeasedGpu>;

// A job record field by field (GCC -O3 warns maybe-uninitialized on the brace-initialised owner of a
// Job aggregate with its trailing task).
Job job_of(std::string id, std::string name, std::string status, std::string command, std::optional<int> exit_code,
           std::int64_t started, std::optional<std::int64_t> ended, std::string lease, std::string record,
           core::LeaseOwner owner = {}) {
  Job j;
  j.id = std::move(id);
  j.name = std::move(name);
  j.status = std::move(status);
  j.command = std::move(command);
  j.exit_code = exit_code;
  j.started_at_ms = started;
  j.ended_at_ms = ended;
  j.lease_id = std::move(lease);
  j.record = std::move(record);
  j.owner = std::move(owner);
  return j;
}

struct StoreTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp / "d";  // made by the code under test
  std::set<std::uint32_t> dead;                 // owners the test declares gone
  std::unique_ptr<NodeStore> open() {
    auto s =
        NodeStore::open((dir / "gf.db").string(), [this](const core::LeaseOwner& o) { return !dead.contains(o.pid); });
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return s ? std::move(*s) : nullptr;
  }
  static core::LeaseRequest req(std::uint32_t pid, std::string job = "job") {
    return core::LeaseRequest{std::move(job), "name", core::LeaseOwner{pid, 1, "alice"}, ""};
  }
  static core::LeaseStore::Decide take(Gpus g) {
    return [g](const auto&, const auto&) -> Result<std::optional<Gpus>> { return std::optional<Gpus>(g); };
  }
};

TEST_F(StoreTest, AcquireListRelease) {
  auto s = open();
  auto l = s->acquire(req(100), take({{0, "GPU-a"}, {1, "GPU-b"}}));
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->gpus.size(), 2u);
  EXPECT_EQ((*l)->id.size(), 12u);
  auto act = s->active();
  ASSERT_TRUE(act);
  ASSERT_EQ(act->size(), 1u);
  EXPECT_EQ((*act)[0].owner.user, "alice");
  EXPECT_EQ((*act)[0].gpus[1].uuid, "GPU-b");
  auto rel = s->release((*l)->id, "released");
  ASSERT_TRUE(rel);
  EXPECT_TRUE(*rel);
  EXPECT_FALSE(*s->release((*l)->id, "again"));  // already released
  EXPECT_TRUE(s->active()->empty());
  auto hist = s->history(10);
  ASSERT_EQ(hist->size(), 1u);
  EXPECT_EQ((*hist)[0].release_reason, "released");
  EXPECT_TRUE((*hist)[0].released_at_ms);
}

TEST_F(StoreTest, DeciderSeesActiveLeasesAndNotNowTakesNothing) {
  auto s = open();
  ASSERT_TRUE(*s->acquire(req(100), take({{0, "GPU-a"}})));
  std::size_t seen = 0;
  auto r =
      s->acquire(req(101), [&](const std::vector<core::Lease>& active, const auto&) -> Result<std::optional<Gpus>> {
        seen = active.size();
        return std::optional<Gpus>();
      });
  ASSERT_TRUE(r);
  EXPECT_FALSE(*r);
  EXPECT_EQ(seen, 1u);
  EXPECT_EQ(s->active()->size(), 1u);
}

TEST_F(StoreTest, OneGpuNeverHasTwoActiveLeases) {
  auto s = open();
  ASSERT_TRUE(*s->acquire(req(100), take({{0, "GPU-a"}})));
  auto clash = s->acquire(req(101), take({{0, "GPU-a"}}));  // a buggy decider
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message.find("already leased"), std::string::npos);
  EXPECT_EQ(s->active()->size(), 1u);  // rolled back whole
}

TEST_F(StoreTest, DeadOwnersLoseTheirLeases) {
  auto s = open();
  auto l = s->acquire(req(4242), take({{0, "GPU-a"}}));
  ASSERT_TRUE(l && *l);
  dead.insert(4242);
  auto act = s->active();
  ASSERT_TRUE(act);
  EXPECT_TRUE(act->empty());
  EXPECT_EQ((*s->history(1))[0].release_reason, "owner gone");
  EXPECT_TRUE(*s->acquire(req(7), take({{0, "GPU-a"}})));  // free again
}

// The sweep before each decision looks at each owner once, however many leases it holds; a dead one
// loses them all.
TEST_F(StoreTest, TheSweepAsksAboutEachOwnerOnce) {
  std::map<std::uint32_t, int> asked;
  auto opened = NodeStore::open((dir / "gf.db").string(), [&](const core::LeaseOwner& o) {
    ++asked[o.pid];
    return !dead.contains(o.pid);
  });
  ASSERT_TRUE(opened) << opened.error().message;
  auto& s = *opened;
  for (unsigned i = 0; i < 4; ++i)
    ASSERT_TRUE(*s->acquire(req(i < 3 ? 500 : 600), take({{i, "GPU-" + std::to_string(i)}})));
  asked.clear();
  auto act0 = s->active();  // active() sweeps on every call
  ASSERT_TRUE(act0);
  EXPECT_EQ(asked[500], 1);  // three leases, one look
  EXPECT_EQ(asked[600], 1);
  dead.insert(500);
  auto act = s->active();
  ASSERT_TRUE(act);
  EXPECT_EQ(act->size(), 1u);  // 600's
  for (const auto& l : *act) EXPECT_NE(l.owner.pid, 500u);
}

// The store keeps its list of active leases between decisions; a lease another connection (another
// process: the direct path beside the agent) writes or ends is seen at the next decision all the same.
TEST_F(StoreTest, TheKeptListOfActiveLeasesSeesOtherConnectionsWrites) {
  auto a = open();
  auto b = open();
  ASSERT_TRUE(a && b);
  auto mine = a->acquire(req(100), take({{0, "GPU-0"}}));
  ASSERT_TRUE(mine && *mine);
  auto theirs = b->acquire(req(200), take({{1, "GPU-1"}}));
  ASSERT_TRUE(theirs && *theirs);
  std::set<std::string> seen;
  auto look = [&](const std::vector<core::Lease>& active, const auto&) -> Result<std::optional<Gpus>> {
    seen.clear();
    for (const auto& l : active)
      for (const auto& g : l.gpus) seen.insert(g.uuid);
    return std::optional<Gpus>();
  };
  ASSERT_TRUE(a->acquire(req(300), look));
  EXPECT_EQ(seen, (std::set<std::string>{"GPU-0", "GPU-1"}));
  // A decider that takes a GPU held by the other connection's lease: the store refuses it.
  auto clash = a->acquire(req(300), take({{1, "GPU-1"}}));
  ASSERT_FALSE(clash);
  ASSERT_TRUE(*b->release((*mine)->id, "released elsewhere"));
  ASSERT_TRUE(a->acquire(req(300), look));
  EXPECT_EQ(seen, (std::set<std::string>{"GPU-1"}));
  auto again = a->acquire(req(400), take({{0, "GPU-0"}}));
  ASSERT_TRUE(again && *again);
  auto act = a->active();
  ASSERT_TRUE(act);
  EXPECT_EQ(act->size(), 2u);
  ASSERT_TRUE(*a->release((*theirs)->id, "done"));
  ASSERT_TRUE(b->acquire(req(500), look));
  EXPECT_EQ(seen, (std::set<std::string>{"GPU-0"}));
}

// On the way to a grant the sweep runs at most once a second (a look at /proc per owner per acquire
// was most of an acquire under load); a "not now" sweeps first and asks again unless a sweep ran in
// the last 100 ms, so a dead owner's lease keeps its GPU from no one for longer than that.
TEST_F(StoreTest, AcquireSweepsAtMostOnceASecondAndBeforeNotNow) {
  test::FakeClock clock;
  std::map<std::uint32_t, int> asked;
  auto opened = NodeStore::open((dir / "gf.db").string(),
                                [&](const core::LeaseOwner& o) {
                                  ++asked[o.pid];
                                  return !dead.contains(o.pid);
                                },
                                clock);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& s = *opened;
  ASSERT_TRUE(*s->acquire(req(500), take({{0, "GPU-0"}})));  // the first acquire sweeps
  asked.clear();
  ASSERT_TRUE(*s->acquire(req(600), take({{1, "GPU-1"}})));
  EXPECT_EQ(asked[500], 0);  // within the second: no look
  clock.advance(std::chrono::milliseconds(1001));
  ASSERT_TRUE(*s->acquire(req(601), take({{2, "GPU-2"}})));
  EXPECT_EQ(asked[500], 1);  // due again

  // 500 dies; GPU-0 is wanted at once, within 100 ms of the last sweep: not now, no sweep.
  dead.insert(500);
  int decisions = 0;
  auto wants_gpu0 = [&](const std::vector<core::Lease>& active, const auto&) -> Result<std::optional<Gpus>> {
    ++decisions;
    for (const auto& l : active)
      for (const auto& g : l.gpus)
        if (g.uuid == "GPU-0") return std::optional<Gpus>();
    return std::optional<Gpus>(Gpus{{0, "GPU-0"}});
  };
  auto early = s->acquire(req(700), wants_gpu0);
  ASSERT_TRUE(early);
  EXPECT_FALSE(*early);
  EXPECT_EQ(decisions, 1);
  // Past the gap, within the second: the decider first sees 500's lease, says not now, the store sweeps
  // and asks again, and the GPU is granted.
  clock.advance(std::chrono::milliseconds(101));
  decisions = 0;
  auto got = s->acquire(req(700), wants_gpu0);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_TRUE(*got);
  EXPECT_EQ((*got)->owner.pid, 700u);
  EXPECT_EQ(decisions, 2);
  auto hist = s->history(10);
  ASSERT_TRUE(hist);
  bool ended = false;
  for (const auto& h : *hist) ended = ended || (h.owner.pid == 500 && h.release_reason == "owner gone");
  EXPECT_TRUE(ended);

  // A real "not now" (the holder lives) is asked once more only when the sweep found something.
  clock.advance(std::chrono::milliseconds(101));
  decisions = 0;
  auto no = s->acquire(req(800), [&](const auto&, const auto&) -> Result<std::optional<Gpus>> {
    ++decisions;
    return std::optional<Gpus>();
  });
  ASSERT_TRUE(no);
  EXPECT_FALSE(*no);
  EXPECT_EQ(decisions, 1);
}

TEST_F(StoreTest, DefaultLivenessUsesPidAndStartTime) {
  auto s = NodeStore::open((dir / "real.db").string());
  ASSERT_TRUE(s);
  const auto me = static_cast<std::uint32_t>(::getpid());
  // Our own pid with a wrong start time: a reused pid must not keep the lease.
  ASSERT_TRUE(*(*s)->acquire(request("j", "n", me, 1, "x", ""), take({{0, "GPU-a"}})));
  EXPECT_TRUE((*s)->active()->empty());
  ASSERT_TRUE(*(*s)->acquire(request("j", "n", me, 0, "x", ""), take({{1, "GPU-b"}})));
  EXPECT_EQ((*s)->active()->size(), 1u);  // start time 0 = unknown: the pid alone decides
}

TEST_F(StoreTest, QueueOrderIsPriorityThenArrival) {
  auto s = open();
  ASSERT_TRUE(s->enqueue({"a", "A", 0, 100, 1, {1, 1, "u"}}));
  ASSERT_TRUE(s->enqueue({"b", "B", 5, 200, 1, {2, 1, "u"}}));
  ASSERT_TRUE(s->enqueue({"c", "C", 0, 50, 1, {3, 1, "u"}}));
  auto first_ahead_of = [&](const std::string& id) {
    std::string first = "-";
    auto r = s->acquire(request(id, id, 9, 1, "u", id),
                        [&](const auto&, const std::vector<core::Waiter>& ahead) -> Result<std::optional<Gpus>> {
                          if (!ahead.empty()) first = ahead.front().id;
                          return std::optional<Gpus>();
                        });
    EXPECT_TRUE(r);
    return first;
  };
  EXPECT_EQ(first_ahead_of("a"), "b");  // higher priority first
  EXPECT_EQ(first_ahead_of("c"), "b");
  EXPECT_EQ(first_ahead_of("b"), "-");  // b is first in line
  EXPECT_EQ(s->waiters()->front().id, "b");
  // A dead waiter ahead does not block: it is dropped on the way.
  dead.insert(2);
  EXPECT_EQ(first_ahead_of("a"), "c");  // same priority, earlier arrival
  EXPECT_EQ(s->waiters()->size(), 2u);
  // A lease taken by a waiter removes it from the queue.
  ASSERT_TRUE(*s->acquire(request("c", "C", 3, 1, "u", "c"), take({{0, "GPU-a"}})));
  auto w = s->waiters();
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].id, "a");
  EXPECT_EQ(first_ahead_of("a"), "-");
}

TEST_F(StoreTest, ReleaseInAnotherConnectionWakesAWaiter) {
  auto waiter = open();
  auto other = open();
  auto l = other->acquire(req(1), take({{0, "GPU-a"}}));
  ASSERT_TRUE(l && *l);
  while (waiter->wait_for_change(std::chrono::milliseconds(20))) {
  }  // drain the first sweep's notification, if any
  // A grant to a caller that was not queued frees nothing and moves no queue: it wakes no one.
  ASSERT_TRUE(*other->acquire(req(2), take({{1, "GPU-b"}})));
  EXPECT_FALSE(waiter->wait_for_change(std::chrono::milliseconds(50)));
  // No delay before the release: whether it lands before the wait begins or during it, the waiter's
  // inotify watch (set when the store was opened) holds the event until wait_for_change reads it.
  std::thread t([&] { (void)other->release((*l)->id, "done"); });
  const auto t0 = std::chrono::steady_clock::now();
  const bool woke = waiter->wait_for_change(std::chrono::seconds(20));
  t.join();
  EXPECT_TRUE(woke);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_FALSE(waiter->wait_for_change(std::chrono::milliseconds(50)));  // nothing more happened
}

TEST_F(StoreTest, JobsRoundTrip) {
  auto s = open();
  Job e = job_of("e1", "bench", "running", "[\"sleep\",\"1\"]", std::nullopt, 1000, std::nullopt, "l1", "{}");
  ASSERT_TRUE(s->put_job(e));
  e.status = "succeeded";
  e.exit_code = 0;
  e.ended_at_ms = 2000;
  e.record = "{\"x\":1}";
  ASSERT_TRUE(s->put_job(e));
  auto got = s->job("e1");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->status, "succeeded");
  EXPECT_EQ((*got)->exit_code.value_or(-1), 0);
  EXPECT_EQ((*got)->record, "{\"x\":1}");
  ASSERT_TRUE(s->put_job(job_of("e2", "x", "failed", "[]", 3, 3000, 4000, "", "{}")));
  auto list = s->jobs(10);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, "e2");  // newest first
  EXPECT_FALSE(*s->job("nope"));
}

// Issue 20, finding 4: the bounds on job records go by when the store last wrote each row (its clock),
// never by the times the writer put in it; only finished rows (not waiting/running) are pruned, only the
// uid's own, least recently written first; an update moves a row to the back.
TEST_F(StoreTest, JobPruningGoesByWhenTheStoreWroteTheRowAndSparesRunningOnes) {
  test::FakeClock clock;
  auto opened = NodeStore::open((dir / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& s = *opened;
  const core::LeaseOwner alice{1, 0, "alice", 1001}, bob{2, 0, "bob", 1002};
  const std::int64_t far_future = 253402300799999;  // the writer claims it ended in year 9999
  ASSERT_TRUE(s->put_job(job_of("a-old", "x", "succeeded", "[]", 0, far_future, far_future, "", "{}", alice)));
  clock.advance(std::chrono::hours(24));
  ASSERT_TRUE(s->put_job(job_of("a-run", "x", "running", "[]", std::nullopt, 1, std::nullopt, "", "{}", alice)));
  ASSERT_TRUE(s->put_job(job_of("b-old", "x", "failed", "[]", 1, 1, 2, "", "{}", bob)));
  clock.advance(std::chrono::hours(24));
  ASSERT_TRUE(s->put_job(job_of("a-mid", "x", "failed", "[]", 1, 1, 2, "", "{}", alice)));
  clock.advance(std::chrono::hours(24));
  ASSERT_TRUE(s->put_job(job_of("a-new", "x", "lost", "[]", std::nullopt, 1, 2, "", "{}", alice)));

  auto n = s->count_jobs(1001);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 4u);
  EXPECT_EQ(*s->count_jobs(1002), 1u);
  EXPECT_EQ(*s->count_jobs(1003), 0u);

  // The oldest written finished row goes first, whatever its own times say; the running one never.
  auto p = s->prune_oldest_finished(1001, 1);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, 1u);
  EXPECT_FALSE(*s->job("a-old"));
  EXPECT_TRUE(*s->job("b-old")) << "another uid's rows are not touched";
  // An update is a fresh write: a-mid, rewritten now, is younger than a-new.
  clock.advance(std::chrono::hours(1));
  ASSERT_TRUE(s->put_job(job_of("a-mid", "x", "succeeded", "[]", 0, 1, 3, "", "{}", alice)));
  p = s->prune_oldest_finished(1001, 5);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, 2u) << "only finished rows: a-new and a-mid";
  EXPECT_TRUE(*s->job("a-run"));
  EXPECT_EQ(*s->count_jobs(1001), 1u);

  // Retention: b-old was written 3 days and an hour ago, a fresh row just now; running rows stay.
  ASSERT_TRUE(s->put_job(job_of("b-new", "x", "succeeded", "[]", 0, 1, 2, "", "{}", bob)));
  auto r = s->prune_finished_older_than(std::chrono::hours(48));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 1u);
  EXPECT_FALSE(*s->job("b-old"));
  EXPECT_TRUE(*s->job("b-new"));
  EXPECT_TRUE(*s->job("a-run")) << "a running job is never pruned, however old";
  clock.advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(*s->prune_finished_older_than(std::chrono::hours(48)), 1u);
  EXPECT_TRUE(*s->job("a-run"));
}

// A run of `task`, owned by `user`, holding `gpus` GPUs from started to ended (ms).
Job task_run(const std::string& id, const std::string& task, const std::string& user, const std::string& status,
             std::int64_t started, std::optional<std::int64_t> ended, int gpus) {
  Job j{id,
        id,
        status,
        "[]",
        std::nullopt,
        started,
        ended,
        "",
        fmt::format(R"({{"gpu_info":{{"count":{}}}}})", gpus),
        {0, 0, user, 1000},
        task};
  return j;
}

TEST_F(StoreTest, JobsPageFiltersAndCountsInSql) {
  auto s = open();
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(s->put_job(task_run(fmt::format("a{}", i), "grid", i % 2 ? "bob" : "alice",
                                    i < 5 ? "succeeded" : "failed", 1000 + i, 2000 + i, 1)));
  ASSERT_TRUE(s->put_job(task_run("lone", "", "alice", "running", 5000, std::nullopt, 0)));

  core::JobQuery q;
  q.limit = 3;
  auto p = s->jobs_page(q);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->total, 8u);
  ASSERT_EQ(p->jobs.size(), 3u);
  EXPECT_EQ(p->jobs[0].id, "lone");  // newest first
  EXPECT_EQ(p->jobs[1].id, "a6");
  EXPECT_EQ(p->jobs[0].owner.user, "alice");  // the new columns round-trip
  EXPECT_EQ(p->jobs[1].task, "grid");
  q.offset = 6;
  p = s->jobs_page(q);
  ASSERT_EQ(p->jobs.size(), 2u);  // the last page is short
  EXPECT_EQ(p->jobs[1].id, "a0");

  core::JobQuery f;
  f.status = "failed";
  EXPECT_EQ(s->jobs_page(f)->total, 2u);
  f = {};
  f.user = "bob";
  EXPECT_EQ(s->jobs_page(f)->total, 3u);
  f.task = "grid";
  f.status = "succeeded";
  EXPECT_EQ(s->jobs_page(f)->total, 2u);  // a1, a3
  f = {};
  f.uid = 1000;
  EXPECT_EQ(s->jobs_page(f)->total, 8u);
  f.uid = 1001;
  EXPECT_EQ(s->jobs_page(f)->total, 0u);
  f = {};
  f.user = "x' OR '1'='1";  // bound, not pasted into the SQL
  EXPECT_EQ(s->jobs_page(f)->total, 0u);
}

TEST_F(StoreTest, TaskTotalsSumEveryRunNotAPage) {
  auto s = open();
  // 1500 runs of one task: 2 GPUs for 36 s each → 1500 × 0.02 GPU-h = 30 GPU-h.
  for (int i = 0; i < 1500; ++i)
    ASSERT_TRUE(s->put_job(task_run(fmt::format("t{}", i), "sweep", "alice", i % 3 ? "succeeded" : "failed", 10000 + i,
                                    10000 + i + 36000, 2)));
  ASSERT_TRUE(s->put_job(task_run("o1", "other", "bob", "running", 5000, std::nullopt, 1)));
  ASSERT_TRUE(s->put_job(task_run("o2", "", "bob", "succeeded", 1, 2, 1)));                // no task: not a group
  ASSERT_TRUE(s->put_job(job_of("bad", "bad", "failed", "[]", 1, 2, 3, "", "not json")));  // a broken record
  core::JobQuery q;
  auto t = s->task_totals(q);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->total, 2u);
  ASSERT_EQ(t->tasks.size(), 2u);
  EXPECT_EQ(t->tasks[0].task, "sweep");  // the most recently started first
  EXPECT_EQ(t->tasks[0].runs, 1500u);
  EXPECT_EQ(t->tasks[0].failed, 500u);
  EXPECT_EQ(t->tasks[0].succeeded, 1000u);
  EXPECT_NEAR(t->tasks[0].gpu_hours, 30.0, 1e-9);
  EXPECT_EQ(t->tasks[1].task, "other");
  EXPECT_EQ(t->tasks[1].running, 1u);
  EXPECT_GT(t->tasks[1].gpu_hours, 0.0);  // counts up to now
  q.user = "bob";
  t = s->task_totals(q);
  ASSERT_EQ(t->tasks.size(), 1u);
  EXPECT_EQ(t->tasks[0].task, "other");
  // One task: its totals over every status (q.status is not a filter of the totals).
  q.user.clear();
  q.task = "sweep";
  q.status = "failed";
  t = s->task_totals(q);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->total, 1u);
  ASSERT_EQ(t->tasks.size(), 1u);
  EXPECT_EQ(t->tasks[0].runs, 1500u);
  q.task = "none such";
  EXPECT_EQ(s->task_totals(q)->total, 0u);
}

// Review of issue 14: two records with absurd times made SUM() overflow, and /api/v1/tasks failed for
// everyone; a user could also add runs (and negative GPU counts) to another user's task of the same name.
TEST_F(StoreTest, TaskTotalsSurviveAbsurdRecordsAndKeepOwnersApart) {
  auto s = open();
  const std::int64_t far = 253402300799999;  // the latest time the agent protocol accepts
  for (int i = 0; i < 10; ++i)               // 10 × 4096 GPUs × ~2.5e14 ms: past INT64_MAX as an integer sum
    ASSERT_TRUE(s->put_job(task_run(fmt::format("m{}", i), "sweep", "mallory", "succeeded", 0, far, 4096)));
  ASSERT_TRUE(s->put_job(task_run("neg", "sweep", "mallory", "succeeded", 0, 10, -100000)));
  ASSERT_TRUE(s->put_job(task_run("a1", "sweep", "alice", "succeeded", 1000, 1000 + 3600000, 2)));
  Job alice2 = task_run("a2", "sweep", "alice", "failed", 2000, 2000 + 3600000, 1);
  alice2.owner.uid = std::nullopt;  // written by a binary that did not know the owner's uid
  ASSERT_TRUE(s->put_job(alice2));
  core::JobQuery q;
  auto t = s->task_totals(q);
  ASSERT_TRUE(t) << t.error().message;
  // alice (uid 1000), alice (no uid: a row of an older binary) and mallory: three rows of "sweep".
  EXPECT_EQ(t->total, 3u);
  ASSERT_EQ(t->tasks.size(), 3u);
  for (const auto& row : t->tasks) {
    EXPECT_EQ(row.task, "sweep");
    EXPECT_GE(row.gpu_hours, 0.0) << row.owner_user;  // a negative count is no GPUs, not minus GPU-hours
    if (row.owner_user == "alice" && row.owner_uid) {
      EXPECT_EQ(row.runs, 1u);
      EXPECT_NEAR(row.gpu_hours, 2.0, 1e-9);
    } else if (row.owner_user == "alice") {
      EXPECT_EQ(row.runs, 1u);
      EXPECT_EQ(row.failed, 1u);
      EXPECT_NEAR(row.gpu_hours, 1.0, 1e-9);
    } else {
      EXPECT_EQ(row.owner_user, "mallory");
      EXPECT_EQ(row.runs, 11u);
      EXPECT_GT(row.gpu_hours, 1e9);  // large, summed without failing
    }
  }
}

// A store file of the previous release (node schema 2, before the jobs' owner and task columns): its
// runs get their owner's name from their lease and their GPU count from their record when it opens.
TEST_F(StoreTest, RunsOfAnOlderStoreGetTheirOwnerAndGpuCount) {
  {
    auto s = open();
    auto l = s->acquire(req(100), take({{0, "GPU-a"}}));
    ASSERT_TRUE(l && *l);
    Job j = task_run("old", "", "", "succeeded", 1000, 1000 + 3600000, 3);
    j.lease_id = (*l)->id;
    ASSERT_TRUE(s->put_job(j));
  }
  {
    // Take the file back to what the previous release wrote.
    auto db = store::Db::open((dir / "gf.db").string());
    ASSERT_TRUE(db) << db.error().message;
    for (const char* sql :
         {"DROP INDEX experiments_status", "DROP INDEX experiments_user", "DROP INDEX experiments_task",
          "ALTER TABLE experiments DROP COLUMN owner_user", "ALTER TABLE experiments DROP COLUMN task",
          "ALTER TABLE experiments DROP COLUMN gpu_count", "DELETE FROM gf_schema WHERE component = 'node_jobs'"})
      ASSERT_TRUE(db->exec(sql)) << sql;
  }
  auto s = open();
  ASSERT_TRUE(s);
  core::JobQuery q;
  q.user = "alice";  // the lease's owner (req() above)
  auto page = s->jobs_page(q);
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].id, "old");
  // gpu_count came from the record: a task run of it would count 3 GPU-hours.
  auto db = store::Db::open((dir / "gf.db").string());
  ASSERT_TRUE(db);
  auto st = db->prepare("SELECT gpu_count FROM experiments WHERE id = 'old'");
  ASSERT_TRUE(st);
  auto row = st->step();
  ASSERT_TRUE(row && *row);
  EXPECT_EQ(st->int64(0), 3);
}

TEST_F(StoreTest, JobsOfDeadOwnersBecomeLost) {
  auto s = open();
  Job e =
      job_of("e1", "job", "running", "[]", std::nullopt, 1000, std::nullopt, "", "{}", core::LeaseOwner{777, 1, "u"});
  ASSERT_TRUE(s->put_job(e));
  EXPECT_EQ((*s->job("e1"))->status, "running");
  dead.insert(777);  // gpufleet was SIGKILLed while the job ran
  auto got = s->job("e1");
  EXPECT_EQ((*got)->status, "lost");
  EXPECT_TRUE((*got)->ended_at_ms);
}

TEST_F(StoreTest, UnwritablePathIsOneClearError) {
  auto s = NodeStore::open("/proc/gpufleet/nope.db");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("/proc/gpufleet/nope.db"), std::string::npos);
}

// Lease and experiment-reaping times come from the store's clock: on a fake one they are exact.
TEST_F(StoreTest, LeaseTimesComeFromTheClock) {
  test::FakeClock clock;
  auto opened = NodeStore::open((dir / "gf.db").string(),
                                [this](const core::LeaseOwner& o) { return !dead.contains(o.pid); }, clock);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& s = *opened;
  const auto ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count();
  };
  const auto t_acquire = ms();
  auto l = s->acquire(req(100), take({{0, "GPU-a"}}));
  ASSERT_TRUE(l && *l);
  EXPECT_EQ((*l)->created_at_ms, t_acquire);
  EXPECT_EQ(s->now_ms(), t_acquire);

  clock.advance(std::chrono::seconds(90));
  ASSERT_TRUE(*s->release((*l)->id, "released"));
  auto hist = s->history(10);
  ASSERT_TRUE(hist);
  ASSERT_EQ(hist->size(), 1u);
  EXPECT_EQ((*hist)[0].created_at_ms, t_acquire);
  ASSERT_TRUE((*hist)[0].released_at_ms);
  EXPECT_EQ(*(*hist)[0].released_at_ms, t_acquire + 90'000);

  // A lease whose owner is gone is ended at the clock's time of the look that finds it.
  auto l2 = s->acquire(req(200), take({{1, "GPU-b"}}));
  ASSERT_TRUE(l2 && *l2);
  dead.insert(200);
  clock.advance(std::chrono::seconds(5));
  const auto t_reap = ms();
  ASSERT_TRUE(s->active());
  hist = s->history(10);
  ASSERT_TRUE(hist);
  bool found = false;
  for (const auto& h : *hist)
    if (h.id == (*l2)->id) {
      found = true;
      EXPECT_EQ(h.release_reason, "owner gone");
      ASSERT_TRUE(h.released_at_ms);
      EXPECT_EQ(*h.released_at_ms, t_reap);
    }
  EXPECT_TRUE(found);
}

TEST_F(StoreTest, EndedSinceIsTheHistoryFilteredByReleaseTime) {
  test::FakeClock clock;
  auto opened = NodeStore::open((dir / "gf.db").string(),
                                [this](const core::LeaseOwner& o) { return !dead.contains(o.pid); }, clock);
  ASSERT_TRUE(opened) << opened.error().message;
  auto& s = *opened;
  const auto ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.wall_now().time_since_epoch()).count();
  };
  // Four leases: ended at t0, at t0 + 10 s and at t0 + 20 s, and one still held.
  std::vector<std::string> ids;
  for (unsigned i = 0; i < 4; ++i) {
    auto l = s->acquire(req(100 + i), take({{i, "GPU-" + std::to_string(i)}}));
    ASSERT_TRUE(l && *l);
    ids.push_back((*l)->id);
  }
  const auto t0 = ms();
  for (unsigned i = 0; i < 3; ++i) {
    ASSERT_TRUE(*s->release(ids[i], "released"));
    clock.advance(std::chrono::seconds(10));
  }
  auto since = s->ended_since(t0 + 10'000, 100);
  ASSERT_TRUE(since) << since.error().message;
  std::set<std::string> got;
  for (const auto& l : *since) {
    got.insert(l.id);
    ASSERT_TRUE(l.released_at_ms);
    EXPECT_GE(*l.released_at_ms, t0 + 10'000);
    ASSERT_EQ(l.gpus.size(), 1u);  // with its GPUs, as history() gives them
  }
  EXPECT_EQ(got, (std::set<std::string>{ids[1], ids[2]}));
  // The same as the history filtered.
  std::set<std::string> filtered;
  auto all = s->history(100);
  ASSERT_TRUE(all);
  for (const auto& l : *all)
    if (l.released_at_ms && *l.released_at_ms >= t0 + 10'000) filtered.insert(l.id);
  EXPECT_EQ(got, filtered);
  EXPECT_EQ(s->ended_since(t0, 100)->size(), 3u);
  EXPECT_EQ(s->ended_since(t0, 2)->size(), 2u);  // the limit
  EXPECT_TRUE(s->ended_since(t0 + 30'000, 100)->empty());
}

}  // namespace
}  // namespace gf::store
