// GPU selection cost: the allocator on an 8-GPU node (DGX-1 hybrid cube-mesh, exhaustive search)
// and on a 64-GPU synthetic node (NVLink pairs, switch quads, host-bridge blocks of 8, two sockets),
// where choosing 8 takes the greedy path. Snapshots are synthetic and idle, with availability that
// varies per GPU, so no shortcut makes the search trivial.
#include <benchmark/benchmark.h>

#include "allocator/select.hpp"

namespace {

using namespace gf;

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

core::Topology dgx1() {
  core::Topology t(8);
  for (unsigned a = 0; a < 8; ++a)
    for (unsigned b = a + 1; b < 8; ++b)
      t.set_level(a, b, (a < 4) == (b < 4) ? core::LinkLevel::NumaNode : core::LinkLevel::CrossSocket);
  const unsigned links[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2},
                               {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2},
                               {5, 7, 1}, {6, 7, 2}};
  for (const auto& l : links) t.set_nvlinks(l[0], l[1], l[2]);
  return t;
}

core::Topology big_node(unsigned n) {
  core::Topology t(n);
  for (unsigned a = 0; a < n; ++a)
    for (unsigned b = a + 1; b < n; ++b) {
      core::LinkLevel l = core::LinkLevel::CrossSocket;
      if (a / 4 == b / 4)
        l = core::LinkLevel::SingleSwitch;
      else if (a / 8 == b / 8)
        l = core::LinkLevel::HostBridge;
      else if (a / 32 == b / 32)
        l = core::LinkLevel::NumaNode;
      t.set_level(a, b, l);
      if (a / 2 == b / 2) t.set_nvlinks(a, b, 4);
    }
  return t;
}

void run(benchmark::State& state, const core::Snapshot& s, const core::Topology& t) {
  allocator::SelectRequest r;
  r.count = static_cast<unsigned>(state.range(0));
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
