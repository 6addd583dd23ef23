// Lease round trip on 8 simulated GPUs: acquire one GPU and release it, N times, timing each pair.
//   gf_bench_agent_lease agent SOCKET [N]   through the node's agent: one connection, tie "connection"
//   gf_bench_agent_lease direct DB [N]      today's direct path: NodeAllocator over NodeStore in this
//                                           process, a fresh (simulated) driver read per decision
// Prints N, p50, p99 and max in milliseconds. Not a Google Benchmark: the numbers wanted are the tail
// of one long series, the way a CLI sees them.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s agent SOCKET [N] | direct DB [N]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const auto count = argc > 3 ? gf::core::parse_uint(argv[3], 1, 100000000) : gf::Result<std::uint64_t>(2000);
  if (!count) return 2;
  const int n = static_cast<int>(*count);
  return mode == "agent" ? agent(argv[2], n) : mode == "direct" ? direct(argv[2], n) : 2;
}
