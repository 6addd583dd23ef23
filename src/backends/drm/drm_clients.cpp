#include "backends/drm/drm_clients.hpp"

#include <algorithm>
#include <utility>

namespace gf::backends::drm {

DrmClientTally::DrmClientTally(std::vector<std::string> drivers, std::size_t max_clients)
    : drivers_(std::move(drivers)), max_clients_(max_clients) {}

void DrmClientTally::add(std::uint32_t pid, const DrmFdinfo& info) {
  if (info.pdev.empty() || !info.client_id) return;
  if (std::find(drivers_.begin(), drivers_.end(), info.driver) == drivers_.end()) return;
  auto key = std::make_tuple(info.pdev, pid, *info.client_id);
  if (clients_.contains(key)) return;
  if (clients_.size() >= max_clients_) {
    ++dropped_;
    return;
  }
  clients_.emplace(std::move(key), info);
}

std::vector<ProcessClients> DrmClientTally::processes_on(std::string_view pdev) const {
  std::vector<ProcessClients> out;
  const auto first = clients_.lower_bound(std::make_tuple(std::string(pdev), std::uint32_t{0}, std::uint64_t{0}));
  for (auto it = first; it != clients_.end() && std::get<0>(it->first) == pdev; ++it) {
    const std::uint32_t pid = std::get<1>(it->first);
    if (out.empty() || out.back().pid != pid) out.push_back({pid, {}});
    out.back().clients.push_back(&it->second);
  }
  return out;
}

std::vector<std::string> DrmClientTally::pdevs() const {
  std::vector<std::string> out;
  for (const auto& [key, info] : clients_)
    if (out.empty() || out.back() != std::get<0>(key)) out.push_back(std::get<0>(key));
  return out;
}

}  // namespace gf::backends::drm
