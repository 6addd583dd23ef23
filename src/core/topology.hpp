#pragma once
// How the GPUs of a node are connected: the closest common ancestor of each pair on the PCIe tree
// (NVML's topology levels) and the NVLink links between them. Pure data.
#include <cstdint>
#include <string_view>
#include <vector>

namespace gf::core {

// NVML's nvmlGpuTopologyLevel_t values; lower is closer.
enum class LinkLevel : int {
  SameBoard = 0,      // NVML_TOPOLOGY_INTERNAL
  SingleSwitch = 10,  // one PCIe switch
  MultiSwitch = 20,   // several PCIe switches, no host bridge
  HostBridge = 30,    // same host bridge
  NumaNode = 40,      // same NUMA node / CPU socket
  CrossSocket = 50,   // across CPU sockets (SMP interconnect)
  Unknown = -1,
};
std::string_view to_string(LinkLevel l) noexcept;

class Topology {
 public:
  Topology() = default;
  // n GPUs, every pair Unknown with no NVLink.
  explicit Topology(unsigned n)
      : n_(n),
        level_(static_cast<std::size_t>(n) * n, LinkLevel::Unknown),
        nvlinks_(static_cast<std::size_t>(n) * n, 0) {}

  unsigned size() const noexcept { return n_; }
  // True when at least one pair has a known level or an NVLink.
  bool known() const noexcept;
  LinkLevel level(unsigned a, unsigned b) const noexcept;
  unsigned nvlinks(unsigned a, unsigned b) const noexcept;
  void set_level(unsigned a, unsigned b, LinkLevel l);   // symmetric
  void set_nvlinks(unsigned a, unsigned b, unsigned n);  // symmetric

 private:
  unsigned n_ = 0;
  std::vector<LinkLevel> level_;
  std::vector<unsigned> nvlinks_;
};

}  // namespace gf::core
