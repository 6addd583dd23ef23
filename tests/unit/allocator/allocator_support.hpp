#pragma once
// Snapshots and topologies for the allocator tests: GPUs with just the readings the allocator reads.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/snapshot.hpp"
#include "core/topology.hpp"

namespace gf::allocator::test {

inline constexpr std::uint64_t kTotalMib = 81559;

// A healthy GPU with `free_mib` free and `util_pct` busy; availability is left for the allocator to
// compute unless a test sets it.
inline core::GpuReading gpu(unsigned index, std::uint64_t free_mib = 80000, unsigned util_pct = 0) {
  core::GpuReading g;
  g.index = index;
  g.uuid = "GPU-test-" + std::to_string(index);
  g.name = "Test GPU";
  g.memory_total_mib = kTotalMib;
  g.memory_free_mib = free_mib;
  g.memory_used_mib = kTotalMib - free_mib;
  g.utilization_pct = util_pct;
  return g;
}

// n healthy idle GPUs, with GPU i's free memory lowered by `step_mib * i`: lower indices score higher.
inline core::Snapshot idle_gpus(unsigned n, std::uint64_t step_mib = 0) {
  core::Snapshot s;
  s.backend = "test";
  for (unsigned i = 0; i < n; ++i) s.gpus.push_back(gpu(i, 80000 - step_mib * i));
  return s;
}

inline core::Snapshot snapshot_of(std::vector<core::GpuReading> gpus) {
  core::Snapshot s;
  s.backend = "test";
  s.gpus = std::move(gpus);
  return s;
}

// Every pair at `level`.
inline core::Topology uniform(unsigned n, core::LinkLevel level) {
  core::Topology t(n);
  for (unsigned a = 0; a < n; ++a)
    for (unsigned b = a + 1; b < n; ++b) t.set_level(a, b, level);
  return t;
}

// Four GPUs: 0-1 and 2-3 NVLink pairs (4 links), each pair on one NUMA node, the pairs across sockets.
inline core::Topology two_pairs() {
  core::Topology t = uniform(4, core::LinkLevel::CrossSocket);
  t.set_level(0, 1, core::LinkLevel::NumaNode);
  t.set_level(2, 3, core::LinkLevel::NumaNode);
  t.set_nvlinks(0, 1, 4);
  t.set_nvlinks(2, 3, 4);
  return t;
}

// DGX-1 (V100) hybrid cube-mesh, as `nvidia-smi topo -m` shows it: 0-3 and 4-7 are fully NVLinked
// quads (NV1/NV2), plus 0-4, 1-5, 2-6, 3-7; PCIe switch pairs 0-1, 2-3, 4-5, 6-7; two sockets.
inline core::Topology dgx1() {
  core::Topology t(8);
  for (unsigned a = 0; a < 8; ++a)
    for (unsigned b = a + 1; b < 8; ++b)
      t.set_level(a, b, (a < 4) == (b < 4) ? core::LinkLevel::NumaNode : core::LinkLevel::CrossSocket);
  for (unsigned a : {0u, 2u, 4u, 6u}) t.set_level(a, a + 1, core::LinkLevel::SingleSwitch);
  const unsigned links[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
                               {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  for (const auto& l : links) t.set_nvlinks(l[0], l[1], l[2]);
  return t;
}

// A large synthetic node: NVLink pairs (2i, 2i+1) with 4 links; quads behind one PCIe switch;
// blocks of 8 on one host bridge; halves of 32 on one NUMA node; across sockets otherwise.
inline core::Topology big_node(unsigned n = 64) {
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

}  // namespace gf::allocator::test
