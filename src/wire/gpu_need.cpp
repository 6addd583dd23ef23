#include "wire/gpu_need.hpp"

#include <fmt/format.h>

#include "allocator/mig_select.hpp"
#include "wire/json_field.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

Error invalid(std::string msg) { return make_error(ErrorKind::Invalid, std::move(msg)); }

}  // namespace

bool is_gpu_need_key(std::string_view key, const GpuNeedKeys& keys) {
  for (const char* k : keys.all())
    if (key == k) return true;
  return false;
}

Result<core::GpuNeed> gpu_need_from_json(const json& j, const GpuNeedKeys& keys) {
  core::GpuNeed n;
  if (!j.is_object()) return invalid("a GPU need must be a JSON object");
  auto gpus = json_int(j, keys.gpus, n.gpus, 1, 1024);
  if (!gpus) return gpus.error();
  auto mem = json_int(j, keys.min_free_memory_mib, static_cast<std::int64_t>(n.min_free_memory_mib), 0, 1LL << 40);
  if (!mem) return mem.error();
  auto util = json_int(j, keys.max_utilization_pct, n.max_utilization_pct, 0, 100);
  if (!util) return util.error();
  n.gpus = static_cast<unsigned>(*gpus);
  n.min_free_memory_mib = static_cast<std::uint64_t>(*mem);
  n.max_utilization_pct = static_cast<unsigned>(*util);
  if (auto it = j.find(keys.allow_busy); it != j.end()) {
    if (!it->is_boolean()) return invalid(fmt::format("{} must be true or false", keys.allow_busy));
    n.allow_busy = it->get<bool>();
  }
  if (auto it = j.find(keys.mig_profile); it != j.end()) {
    // Checked before it reaches an error message or the store: at most 32 characters of [0-9a-z.+].
    if (!it->is_string() || !allocator::valid_mig_profile(it->get<std::string>()))
      return invalid(fmt::format("{} must be a MIG profile such as 1g.10gb", keys.mig_profile));
    n.mig_profile = it->get<std::string>();
  }
  return n;
}

json gpu_need_json(const core::GpuNeed& need, const GpuNeedKeys& keys) {
  json j{{keys.gpus, need.gpus},
         {keys.min_free_memory_mib, need.min_free_memory_mib},
         {keys.max_utilization_pct, need.max_utilization_pct},
         {keys.allow_busy, need.allow_busy}};
  if (!need.mig_profile.empty()) j[keys.mig_profile] = need.mig_profile;
  return j;
}

}  // namespace gf::wire
