#pragma once
// The seed's record of a GPU allocation, shared by the CLI (`alloc --json`, job records) and the agent.
#include <nlohmann/json.hpp>

#include "scheduler/node_allocator.hpp"

namespace gf::scheduler {

// {model, count, device_ids, world_size, gpu_info: {count, indices, allocation_method, why,
// details: [{index, name, uuid, memory_free_mb, utilization_percent, availability_score}]}}.
nlohmann::json gpu_info_json(const Allocation& a, unsigned world_size);

}  // namespace gf::scheduler
