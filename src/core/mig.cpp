#include "core/mig.hpp"

namespace gf::core {

const MigInstance* mig_instance_of(const GpuReading& g, const GpuProcess& p) noexcept {
  if (!p.gpu_instance_id) return nullptr;
  for (const auto& m : g.mig_instances)
    if (m.gpu_instance_id == *p.gpu_instance_id &&
        (!p.compute_instance_id || m.compute_instance_id == *p.compute_instance_id))
      return &m;
  return nullptr;
}

}  // namespace gf::core
