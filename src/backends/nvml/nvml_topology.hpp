#pragma once
// How the GPUs NVML sees are connected: the PCIe common ancestor of every pair and the active NvLink
// links between them.
//
// Every part is optional. A driver without a topology or NvLink symbol, a device that answers
// NOT_SUPPORTED, or a GPU without a handle (lost) leaves its pairs Unknown / without NvLink — never
// an error, because the allocator treats missing topology as "no preference".
// Cost: n·(n−1)/2 common-ancestor calls plus up to 18 link-state and 18 remote-PCI calls per GPU;
// callers that place often may cache the result (it changes only when a GPU or a link fails).
// Not thread-safe in the sense of the backend: call it from the thread that owns the backend.
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "core/topology.hpp"

namespace gf::backends::nvml {

// NVML's topology level value as our LinkLevel; values NVML may add later are Unknown.
core::LinkLevel link_level_from_nvml(int level) noexcept;

// `devices[i]` is the handle of NVML index i, or nullptr when the GPU has none (it is then Unknown to
// every other GPU and has no NvLink). The result has devices.size() GPUs.
core::Topology read_topology(const Api& api, const std::vector<Device>& devices);

}  // namespace gf::backends::nvml
