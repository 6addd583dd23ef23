// Lease round trip on 8 simulated GPUs: acquire one GPU and release it, N times, timing each pair.
//   gf_bench_agent_lease agent SOCKET [N]   through the node's agent: one connection, tie "connection"
//   gf_bench_agent_lease direct DB [N]      today's direct path: NodeAllocator over NodeStore in this
//                                           process, a fresh (simulated) driver read per decision
//   gf_bench_agent_lease contend SOCKET CLIENTS SECONDS NAME [HOLD_MS]
//                                           CLIENTS connections at once, each acquiring 1 GPU (queued: wait_s 60)
//                                           and releasing it after HOLD_MS (0), for SECONDS; an independent ledger
//                                           of who holds which GPU catches a GPU granted twice
//   gf_bench_agent_lease direct-contend DB CLIENTS SECONDS GPUS [RATE]
//                                           the same on the direct path: a store connection per client
//   RATE (acquires per second per client, 0: closed loop): paced, open loop; latencies count from the
//   time each acquire was due (class Pace)
// Prints N, p50, p99 and max in milliseconds. Not a Google Benchmark: the numbers wanted are the tail
// of one long series, the way a CLI sees them.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.hpp"
#include "core/text.hpp"
#include "platform/unix_socket.hpp"
#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace gf;

void report(const char* what, std::vector<double>& ms) {
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, static_cast<std::size_t>(p * ms.size()))]; };
  std::printf("%-15s N=%zu  p50 %.3f ms  p99 %.3f ms  max %.3f ms\n", what, ms.size(), pct(0.50), pct(0.99), ms.back());
}

int agent(const std::string& path, int n) {
  auto s = platform::UnixLineSocket::connect(path, std::chrono::seconds(3));
  if (!s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    return 1;
  }
  const auto limit = [] { return Clock::now() + std::chrono::seconds(5); };
  if (!s->read_line(limit(), 1 << 20)) return 1;  // the greeting
  // The reply to `id`, skipping events.
  auto reply = [&](std::int64_t id) -> nlohmann::json {
    for (;;) {
      auto line = s->read_line(limit(), 64 << 20);
      if (!line) return nullptr;
      auto j = nlohmann::json::parse(*line, nullptr, false);
      if (j.is_object() && !j.contains("event") && j.value("id", std::int64_t{-1}) == id) return j;
    }
  };
  std::vector<double> ms, acquire_ms;
  std::int64_t id = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    nlohmann::json acq{{"id", ++id},          {"op", "acquire"}, {"gpus", 1},      {"min_memory_mib", 1000},
                       {"tie", "connection"}, {"wait_s", 0},     {"name", "bench"}};
    if (!s->write_all(acq.dump() + "\n", limit())) return 1;
    auto got = reply(id);
    if (!got.is_object() || !got.value("ok", false)) {
      std::fprintf(stderr, "acquire failed: %s\n", got.dump().c_str());
      return 1;
    }
    acquire_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    nlohmann::json rel{{"id", ++id}, {"op", "release"}, {"lease", got["lease"]["id"]}};
    if (!s->write_all(rel.dump() + "\n", limit())) return 1;
    auto done = reply(id);
    if (!done.is_object() || !done.value("ok", false)) {
      std::fprintf(stderr, "release failed: %s\n", done.dump().c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  report("agent", ms);
  report("  acquire alone", acquire_ms);
  return 0;
}

int direct(const std::string& db, int n) {
  auto opts = backends::BackendOptions::from_environment();
  opts.sim_gpus = 8;
  auto opened = backends::open_backend("sim", opts);
  if (!opened.backend) return 1;
  auto st = store::NodeStore::open(db);
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return 1;
  }
  backends::Backend* b = opened.backend.get();
  scheduler::NodeAllocator alloc(**st, core::Topology{});
  auto query = [b]() -> Result<core::SnapshotPtr> {
    auto s = b->snapshot();
    if (!s) return s.error();
    return core::SnapshotPtr(std::make_shared<core::Snapshot>(std::move(*s)));
  };
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    scheduler::AllocationRequest req;
    req.need.gpus = 1;
    req.need.min_free_memory_mib = 1000;
    req.job_id = store::new_id();
    req.owner = {static_cast<std::uint32_t>(::getpid()), 0, "bench"};
    auto got = alloc.allocate(req, query());
    if (!got) {
      std::fprintf(stderr, "allocate failed: %s\n", got.error().message.c_str());
      return 1;
    }
    (void)(*st)->release(got->lease.id, "done");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  report("direct", ms);
  return 0;
}

// The load tool's own record of who holds which GPU: a grant of a GPU that a client of this tool still
// holds (its release not yet sent) is a double grant, whatever the agent believes.
class Ledger {
 public:
  // False when `gpu` is held by another client of ours.
  bool grant(const std::string& gpu, int client) {
    std::lock_guard lock(mu_);
    ++grants_;
    auto [it, fresh] = holder_.try_emplace(gpu, client);
    if (!fresh) {
      ++double_grants_;
      return false;
    }
    return true;
  }
  // Before the release is sent: from now on the agent may grant it again. Returns when it was let go.
  Clock::time_point let_go(const std::string& gpu) {
    std::lock_guard lock(mu_);
    holder_.erase(gpu);
    return released_[gpu] = Clock::now();
  }
  // How long ago `gpu` was last let go (the hand-over to a queued client); nullopt: never.
  std::optional<double> since_let_go_ms(const std::string& gpu, Clock::time_point now) const {
    std::lock_guard lock(mu_);
    const auto it = released_.find(gpu);
    if (it == released_.end()) return std::nullopt;
    return std::chrono::duration<double, std::milli>(now - it->second).count();
  }
  std::uint64_t grants() const {
    std::lock_guard lock(mu_);
    return grants_;
  }
  std::uint64_t double_grants() const {
    std::lock_guard lock(mu_);
    return double_grants_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> holder_;
  std::map<std::string, Clock::time_point> released_;
  std::uint64_t grants_ = 0, double_grants_ = 0;
};

struct ClientTimes {
  std::vector<double> immediate, queued, handover, release;  // ms
  std::uint64_t released = 0;
  std::string error;
};

// When a client sends its requests. Closed (rate 0): the next acquire the moment the last release is
// answered. Paced (rate R per second): acquires at fixed times, one every 1/R s from a phase of its own
// (open loop: a late answer does not delay the schedule), and each latency is counted from the time the
// acquire was due, not from when it could be sent, so time lost behind a slow answer is counted.
class Pace {
 public:
  Pace(double rate, int me, Clock::time_point start) : rate_(rate) {
    if (rate_ <= 0) return;
    period_ = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate_));
    next_ = start + period_ * (me % 97) / 97;  // spread the clients' phases over one period
  }
  // Waits for the next due time (paced) and returns it; closed: now.
  Clock::time_point due() {
    if (rate_ <= 0) return Clock::now();
    const auto at = next_;
    next_ += period_;
    std::this_thread::sleep_until(at);
    return at;
  }

 private:
  double rate_;
  Clock::duration period_{};
  Clock::time_point next_{};
};

// One client: acquire, note the grant, let go, release, until `end`.
void contend_client(const std::string& path, int me, const std::string& name, std::chrono::milliseconds hold,
                    double rate, Clock::time_point end, Ledger& ledger, ClientTimes& out) {
  auto s = platform::UnixLineSocket::connect(path, std::chrono::seconds(10));
  if (!s) {
    out.error = s.error().message;
    return;
  }
  const auto limit = [] { return Clock::now() + std::chrono::seconds(90); };
  if (!s->read_line(limit(), 1 << 20)) {
    out.error = "no greeting";
    return;
  }
  std::int64_t id = 0;
  // The reply to `id`; `waited` tells whether a "waiting" event came first (the acquire was queued).
  auto reply = [&](std::int64_t want, bool* waited) -> nlohmann::json {
    for (;;) {
      auto line = s->read_line(limit(), 64 << 20);
      if (!line) return nullptr;
      auto j = nlohmann::json::parse(*line, nullptr, false);
      if (j.is_object() && j.contains("event")) {
        if (waited && j["event"] == "waiting") *waited = true;
        continue;
      }
      if (j.is_object() && j.value("id", std::int64_t{-1}) == want) return j;
    }
  };
  Pace pace(rate, me, Clock::now());
  while (Clock::now() < end) {
    const auto t0 = pace.due();
    if (t0 >= end) break;
    const nlohmann::json acq{{"id", ++id},          {"op", "acquire"}, {"gpus", 1},
                             {"tie", "connection"}, {"wait_s", 60},    {"name", name}};
    if (!s->write_all(acq.dump() + "\n", limit())) return void(out.error = "write failed");
    bool waited = false;
    auto got = reply(id, &waited);
    const auto t1 = Clock::now();
    if (!got.is_object() || !got.value("ok", false)) return void(out.error = "acquire failed: " + got.dump());
    const auto& lease = got["lease"];
    const std::string gpu = lease["gpus"].at(0).value("uuid", std::string());
    const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    (waited ? out.queued : out.immediate).push_back(ms);
    if (auto h = ledger.since_let_go_ms(gpu, t1); h && waited) out.handover.push_back(*h);
    if (!ledger.grant(gpu, me)) return void(out.error = "GPU " + gpu + " granted while another client holds it");
    if (hold.count() > 0) std::this_thread::sleep_for(hold);
    const auto t2 = ledger.let_go(gpu);
    const nlohmann::json rel{{"id", ++id}, {"op", "release"}, {"lease", lease["id"]}};
    if (!s->write_all(rel.dump() + "\n", limit())) return void(out.error = "write failed");
    auto done = reply(id, nullptr);
    if (!done.is_object() || !done.value("ok", false)) return void(out.error = "release failed: " + done.dump());
    out.release.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t2).count());
    ++out.released;
  }
}

using ClientFn = std::function<void(int me, Clock::time_point end, Ledger&, ClientTimes&)>;
int contend(const ClientFn& client, int clients, int seconds) {
  Ledger ledger;
  std::vector<ClientTimes> times(static_cast<std::size_t>(clients));
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  {
    std::vector<std::jthread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back(client, c, end, std::ref(ledger), std::ref(times[static_cast<std::size_t>(c)]));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  ClientTimes all;
  std::size_t failed = 0;
  for (auto& t : times) {
    for (auto v : {&ClientTimes::immediate, &ClientTimes::queued, &ClientTimes::handover, &ClientTimes::release})
      (all.*v).insert((all.*v).end(), (t.*v).begin(), (t.*v).end());
    all.released += t.released;
    if (!t.error.empty() && failed++ < 3) std::fprintf(stderr, "client: %s\n", t.error.c_str());
  }
  std::printf(
      "contend: %d clients, %.1f s: %llu grants (%.0f/s), %llu released, %zu clients failed, %llu double grants\n",
      clients, wall, static_cast<unsigned long long>(ledger.grants()), ledger.grants() / wall,
      static_cast<unsigned long long>(all.released), failed, static_cast<unsigned long long>(ledger.double_grants()));
  if (!all.immediate.empty()) report("  acquire, free GPU", all.immediate);
  if (!all.queued.empty()) report("  acquire, queued (wait)", all.queued);
  if (!all.handover.empty()) report("  hand-over (let go -> next grant)", all.handover);
  if (!all.release.empty()) report("  release", all.release);
  // The ledger line the script compares with the agent's store.
  std::printf("ledger grants %llu\n", static_cast<unsigned long long>(ledger.grants()));
  return failed == 0 && ledger.double_grants() == 0 ? 0 : 1;
}

// The direct path under the same load: each client its own store connection (as each CLI process
// has), allocating on a fresh simulated reading and waiting in the store's queue when none is free.
void direct_client(const std::string& db, unsigned gpus, double rate, int me, Clock::time_point end, Ledger& ledger,
                   ClientTimes& out) {
  auto opts = backends::BackendOptions::from_environment();
  opts.sim_gpus = gpus;
  auto opened = backends::open_backend("sim", opts);
  auto st = store::NodeStore::open(db);
  if (!opened.backend || !st) return void(out.error = "cannot open the backend or the store");
  backends::Backend* b = opened.backend.get();
  scheduler::NodeAllocator alloc(**st, core::Topology{});
  const scheduler::ReadingQuery query = [b]() -> Result<core::SnapshotPtr> {
    auto s = b->snapshot();
    if (!s) return s.error();
    return core::SnapshotPtr(std::make_shared<core::Snapshot>(std::move(*s)));
  };
  scheduler::WaitOptions wait;
  wait.timeout = std::chrono::seconds(60);
  Pace pace(rate, me, Clock::now());
  while (Clock::now() < end) {
    scheduler::AllocationRequest req;
    req.need.gpus = 1;
    req.job_id = store::new_id();
    req.name = "direct-contend";
    req.owner = {static_cast<std::uint32_t>(::getpid()), 0, "bench"};
    const auto t0 = pace.due();
    if (t0 >= end) break;
    bool waited = false;
    auto got = alloc.allocate(req, query());
    if (!got && got.error().kind == ErrorKind::Unavailable) {
      waited = true;
      got = alloc.wait_and_allocate(req, query, wait);
    }
    const auto t1 = Clock::now();
    if (!got) return void(out.error = "allocate failed: " + got.error().message);
    (waited ? out.queued : out.immediate).push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const std::string gpu = got->lease.gpus.at(0).uuid;
    if (!ledger.grant(gpu, me)) return void(out.error = "GPU " + gpu + " granted while another client holds it");
    const auto t2 = ledger.let_go(gpu);
    if (auto r = (*st)->release(got->lease.id, "done"); !r) return void(out.error = r.error().message);
    out.release.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t2).count());
    ++out.released;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s agent SOCKET [N] | direct DB [N] | contend SOCKET CLIENTS SECONDS NAME [HOLD_MS [RATE]] | "
                 "direct-contend DB CLIENTS SECONDS GPUS [RATE]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "contend") {
    const auto clients = argc > 3 ? gf::core::parse_uint(argv[3], 1, 4000) : gf::Result<std::uint64_t>(200);
    const auto seconds = argc > 4 ? gf::core::parse_uint(argv[4], 1, 3600) : gf::Result<std::uint64_t>(60);
    if (!clients || !seconds) return 2;
    const std::string path = argv[2], name = argc > 5 ? argv[5] : "contend";
    const auto hold = argc > 6 ? gf::core::parse_uint(argv[6], 0, 600000) : gf::Result<std::uint64_t>(0);
    if (!hold) return 2;
    const auto rate = argc > 7 ? gf::core::parse_uint(argv[7], 0, 1000) : gf::Result<std::uint64_t>(0);
    if (!rate) return 2;
    const std::chrono::milliseconds held(*hold);
    const auto per_s = static_cast<double>(*rate);
    return contend([&](int me, Clock::time_point end, Ledger& l,
                       ClientTimes& t) { contend_client(path, me, name, held, per_s, end, l, t); },
                   static_cast<int>(*clients), static_cast<int>(*seconds));
  }
  if (mode == "direct-contend") {
    const auto clients = argc > 3 ? gf::core::parse_uint(argv[3], 1, 4000) : gf::Result<std::uint64_t>(200);
    const auto seconds = argc > 4 ? gf::core::parse_uint(argv[4], 1, 3600) : gf::Result<std::uint64_t>(60);
    const auto gpus = argc > 5 ? gf::core::parse_uint(argv[5], 1, 4096) : gf::Result<std::uint64_t>(8);
    const auto rate = argc > 6 ? gf::core::parse_uint(argv[6], 0, 1000) : gf::Result<std::uint64_t>(0);
    if (!clients || !seconds || !gpus || !rate) return 2;
    const std::string db = argv[2];
    const auto per_s = static_cast<double>(*rate);
    return contend([&](int me, Clock::time_point end, Ledger& l,
                       ClientTimes& t) { direct_client(db, static_cast<unsigned>(*gpus), per_s, me, end, l, t); },
                   static_cast<int>(*clients), static_cast<int>(*seconds));
  }
  const auto count = argc > 3 ? gf::core::parse_uint(argv[3], 1, 100000000) : gf::Result<std::uint64_t>(2000);
  if (!count) return 2;
  const int n = static_cast<int>(*count);
  return mode == "agent" ? agent(argv[2], n) : mode == "direct" ? direct(argv[2], n) : 2;
}
