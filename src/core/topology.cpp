#include "core/topology.hpp"

namespace gf::core {

std::string_view to_string(LinkLevel l) noexcept {
  switch (l) {
    case LinkLevel::SameBoard: return "same board";
    case LinkLevel::SingleSwitch: return "one PCIe switch";
    case LinkLevel::MultiSwitch: return "several PCIe switches";
    case LinkLevel::HostBridge: return "same host bridge";
    case LinkLevel::NumaNode: return "same NUMA node";
    case LinkLevel::CrossSocket: return "across CPU sockets";
    case LinkLevel::Unknown: break;
  }
  return "unknown";
}

bool Topology::known() const noexcept {
  for (auto l : level_)
    if (l != LinkLevel::Unknown) return true;
  for (auto n : nvlinks_)
    if (n > 0) return true;
  return false;
}

LinkLevel Topology::level(unsigned a, unsigned b) const noexcept {
  if (a >= n_ || b >= n_) return LinkLevel::Unknown;
  return level_[static_cast<std::size_t>(a) * n_ + b];
}

unsigned Topology::nvlinks(unsigned a, unsigned b) const noexcept {
  if (a >= n_ || b >= n_) return 0;
  return nvlinks_[static_cast<std::size_t>(a) * n_ + b];
}

void Topology::set_level(unsigned a, unsigned b, LinkLevel l) {
  if (a >= n_ || b >= n_) return;
  level_[static_cast<std::size_t>(a) * n_ + b] = l;
  level_[static_cast<std::size_t>(b) * n_ + a] = l;
}

void Topology::set_nvlinks(unsigned a, unsigned b, unsigned n) {
  if (a >= n_ || b >= n_) return;
  nvlinks_[static_cast<std::size_t>(a) * n_ + b] = n;
  nvlinks_[static_cast<std::size_t>(b) * n_ + a] = n;
}

}  // namespace gf::core
