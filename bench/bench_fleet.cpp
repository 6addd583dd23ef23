// Fleet ranking (the pure allocator/node_rank): summaries of 10 000 nodes × 8 GPUs from Kubernetes facts
// and metrics, and the choice of one node. Goal: under 10 ms for the whole ranking.
#include <benchmark/benchmark.h>

#include "allocator/node_rank.hpp"

namespace {

using namespace gf;

// A deterministic fleet: loads spread over 0..99 % so that idle counts differ between nodes.
core::FleetFacts fleet(unsigned nodes, unsigned gpus_per_node) {
  core::FleetFacts f;
  f.kube.emplace();
  f.kube->reserve(nodes);
  f.metrics.reserve(nodes);
  const auto now = std::chrono::system_clock::now();
  unsigned seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u, (seed >> 16) % 100; };
  for (unsigned n = 0; n < nodes; ++n) {
    core::KubeNode k;
    k.name = "node-" + std::to_string(n);
    k.gpu_resource = "nvidia.com/gpu";
    k.gpu_capacity = k.gpu_allocatable = gpus_per_node;
    k.gpu_requested = next() % (gpus_per_node + 1) / 2;
    k.ready = next() > 2;
    f.kube->push_back(std::move(k));
    core::NodeMetrics m;
    m.node = f.kube->back().name;
    m.source = "prometheus";
    m.observed = now;
    for (unsigned g = 0; g < gpus_per_node; ++g) {
      core::FleetGpu x;
      x.node = m.node;
      x.index = g;
      x.utilization_pct = next();
      x.memory_total_mib = 81559;
      x.memory_used_mib = 81559.0 * next() / 100.0;
      m.gpus.push_back(std::move(x));
    }
    f.metrics.push_back(std::move(m));
  }
  return f;
}

void BM_RankFleet(benchmark::State& state) {
  const auto f = fleet(static_cast<unsigned>(state.range(0)), 8);
  allocator::RankOptions o;
  o.now = std::chrono::system_clock::now();
  for (auto _ : state) {
    const auto s = allocator::summarize(f, o);
    const auto c = allocator::select_node(s, 4);
    benchmark::DoNotOptimize(c.node);
  }
  state.SetLabel("summaries + selection, 8 GPUs per node");
}
BENCHMARK(BM_RankFleet)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_SelectOnly(benchmark::State& state) {
  const auto f = fleet(static_cast<unsigned>(state.range(0)), 8);
  allocator::RankOptions o;
  o.now = std::chrono::system_clock::now();
  const auto s = allocator::summarize(f, o);
  for (auto _ : state) {
    const auto c = allocator::select_node(s, 4);
    benchmark::DoNotOptimize(c.node);
  }
  state.SetLabel("selection from ready summaries");
}
BENCHMARK(BM_SelectOnly)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
