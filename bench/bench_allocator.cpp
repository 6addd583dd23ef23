// GPU selection cost: the allocator on an 8-GPU node (DGX-1 hybrid cube-mesh, exhaustive search)
// and on a 64-GPU synthetic node (NVLink pairs, switch quads, host-bridge blocks of 8, two sockets),
// where choosing 8 takes the greedy path. Snapshots are synthetic and idle, with availability that
// varies per GPU, so no shortcut makes the search trivial.
#include <benchmark/benchmark.h>

#include "allocator/select.hpp"
#include "unit/allocator/allocator_support.hpp"  // the tests' DGX-1 and 64-GPU topologies

namespace {

using namespace gf;
using allocator::test::big_node;
using allocator::test::dgx1;

core::Snapshot node(unsigned n) {
  core::Snapshot s;
  for (unsigned i = 0; i < n; ++i) {
    core::GpuReading g;
    g.index = i;
    g.memory_total_mib = std::uint64_t{81559};
    g.memory_free_mib = std::uint64_t{70000 + (i * 7919) % 10000};
    g.memory_used_mib = std::uint64_t{81559} - *g.memory_free_mib;
    g.utilization_pct = (i * 13) % 40;
    s.gpus.push_back(std::move(g));
  }
  return s;
}

void run(benchmark::State& state, const core::Snapshot& s, const core::Topology& t) {
  allocator::SelectRequest r;
  r.need.gpus = static_cast<unsigned>(state.range(0));
  std::string method;
  for (auto _ : state) {
    auto sel = allocator::select_gpus(s, t, r);
    if (!sel) {
      state.SkipWithError(sel.error().message.c_str());
      return;
    }
    method = sel->method;
    benchmark::DoNotOptimize(sel);
  }
  state.SetLabel(method);
}

void BM_Select8(benchmark::State& state) { run(state, node(8), dgx1()); }
BENCHMARK(BM_Select8)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMicrosecond);

void BM_Select64(benchmark::State& state) { run(state, node(64), big_node(64)); }
BENCHMARK(BM_Select64)->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
