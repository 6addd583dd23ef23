#include "scheduler/allocation_json.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace gf::scheduler {

nlohmann::json gpu_info_json(const Allocation& a, unsigned world_size) {
  nlohmann::json details = nlohmann::json::array();
  std::vector<std::string> ids;
  std::string model;
  for (unsigned i : a.selection.indices) {
    ids.push_back(std::to_string(i));
    for (const auto& g : a.snapshot->gpus) {
      if (g.index != i) continue;
      if (model.empty()) model = g.name;
      details.push_back({{"index", g.index},
                         {"name", g.name},
                         {"uuid", g.uuid},
                         {"memory_free_mb", g.memory_free_mib ? nlohmann::json(*g.memory_free_mib) : nlohmann::json(nullptr)},
                         {"utilization_percent", g.utilization_pct ? nlohmann::json(*g.utilization_pct) : nlohmann::json(nullptr)},
                         {"availability_score", g.availability_score ? nlohmann::json(std::round(*g.availability_score * 1e4) / 1e4)
                                                                     : nlohmann::json(nullptr)}});
    }
  }
  return {{"model", model},
          {"count", a.selection.indices.size()},
          {"device_ids", ids},
          {"world_size", world_size},
          {"gpu_info",
           {{"count", a.selection.indices.size()},
            {"indices", a.selection.indices},
            {"allocation_method", a.selection.method},
            {"why", a.selection.why},
            {"details", details}}}};
}

}  // namespace gf::scheduler
