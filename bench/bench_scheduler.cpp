// The queue under load: dispatching the head of a 10 000-job queue, and how long a waiting job takes
// to start after a release on the node (the seed polls every 30 s; an average wait of 15 s).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>

#include "scheduler/node_allocator.hpp"
#include "store/node_store.hpp"

namespace {

using namespace gf;
namespace fs = std::filesystem;

fs::path fresh_dir(const char* name) {
  auto d = fs::temp_directory_path() / (std::string("gf-bench-") + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

core::SnapshotPtr two_idle_gpus() {
  auto s = std::make_shared<core::Snapshot>();
  for (unsigned i = 0; i < 2; ++i) {
    core::GpuReading g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.name = "Bench GPU";
    g.memory_total_mib = 81559;
    g.memory_used_mib = 0;
    g.memory_free_mib = 81559;
    g.utilization_pct = 0;
    g.availability_score = 1.0;
    s->gpus.push_back(g);
  }
  return s;
}

std::unique_ptr<store::NodeStore> open_store(const fs::path& dir) {
  auto s = store::NodeStore::open((dir / "gf.db").string(), [](const core::LeaseOwner&) { return true; });
  if (!s) {
    std::fprintf(stderr, "%s\n", s.error().message.c_str());
    std::exit(1);
  }
  return std::move(*s);
}

// The head of a queue of 10 000 waiting jobs takes a GPU, runs, releases, and queues again at the back.
void BM_DispatchHeadOf10000Waiting(benchmark::State& state) {
  const auto dir = fresh_dir("dispatch");
  auto st = open_store(dir);
  const int n = static_cast<int>(state.range(0));
  for (int i = 0; i < n; ++i)
    (void)st->enqueue({"w" + std::to_string(i), "job", 0, 1000 + i, 1, {static_cast<std::uint32_t>(1000 + i), 1, "u"}});
  std::int64_t t = 1000 + n;
  int head = 0;
  for (auto _ : state) {
    const std::string id = "w" + std::to_string(head);
    core::LeaseRequest lr;
    lr.job_id = id;
    lr.name = "job";
    lr.owner.pid = static_cast<std::uint32_t>(1000 + head);
    lr.owner.start_time = 1;
    lr.owner.user = "u";
    lr.waiter_id = id;
    auto got = st->acquire(
        lr, [&](const auto& active, const auto& ahead) -> Result<std::optional<std::vector<core::LeasedGpu>>> {
          if (!ahead.empty() || !active.empty()) return std::optional<std::vector<core::LeasedGpu>>();
          return std::optional<std::vector<core::LeasedGpu>>(std::vector<core::LeasedGpu>{{0, "GPU-0"}});
        });
    if (!got || !*got) {
      state.SkipWithError("the head of the queue did not get its GPU");
      break;
    }
    (void)st->release((**got).id, "done");
    (void)st->enqueue({id, "job", 0, ++t, 1, {static_cast<std::uint32_t>(1000 + head), 1, "u"}});
    head = (head + 1) % n;
  }
  state.counters["queued"] = n;
  st.reset();
  fs::remove_all(dir);
}
BENCHMARK(BM_DispatchHeadOf10000Waiting)->Arg(10000)->Unit(benchmark::kMicrosecond);

// Time from release() by one connection to wait_and_allocate() returning in another thread (its
// own connection, woken through the store's change file), with the 2 s external-load re-check.
void BM_ReleaseToNextJobStart(benchmark::State& state) {
  const auto dir = fresh_dir("wake");
  auto holder = open_store(dir);
  auto snap = two_idle_gpus();
  for (auto _ : state) {
    core::LeaseRequest hold;
    hold.job_id = "hold";
    hold.owner.pid = 1;
    auto lease =
        holder->acquire(hold, [](const auto&, const auto&) -> Result<std::optional<std::vector<core::LeasedGpu>>> {
          return std::optional<std::vector<core::LeasedGpu>>(std::vector<core::LeasedGpu>{{0, "GPU-0"}, {1, "GPU-1"}});
        });
    std::atomic<bool> queued{false};
    std::chrono::steady_clock::time_point started;
    std::thread waiter([&] {
      auto st = open_store(dir);
      scheduler::NodeAllocator alloc(*st, core::Topology{});
      scheduler::AllocationRequest req;
      req.need.gpus = 1;
      req.need.min_free_memory_mib = 1000;
      req.job_id = store::new_id();
      req.owner = {2, 1, "u"};
      scheduler::WaitOptions wo;
      wo.timeout = std::chrono::seconds(60);
      wo.progress = [&](const scheduler::WaitProgress&) { queued.store(true); };
      auto got = alloc.wait_and_allocate(
          req, [snap] { return Result<core::SnapshotPtr>(snap); }, wo);
      started = std::chrono::steady_clock::now();
      if (got) (void)st->release(got->lease.id, "done");
    });
    while (!queued.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it block in the wait
    const auto released = std::chrono::steady_clock::now();
    (void)holder->release((**lease).id, "done");
    waiter.join();
    state.SetIterationTime(std::chrono::duration<double>(started - released).count());
  }
  state.counters["seed_poll_mean_s"] = 15.0;  // the seed re-checks every 30 s: 15 s on average
  holder.reset();
  fs::remove_all(dir);
}
BENCHMARK(BM_ReleaseToNextJobStart)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
