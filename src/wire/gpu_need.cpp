#include "wire/gpu_need.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "allocator/mig_select.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

Error invalid(std::string msg) { return make_error(ErrorKind::Invalid, std::move(msg)); }

// An integer (a JSON integer, or a float with no fraction) within [lo, hi]; def when absent.
Result<std::int64_t> int_of(const json& j, const char* key, std::int64_t def, std::int64_t lo, std::int64_t hi) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  std::int64_t n = 0;
  if (it->is_number_unsigned()) {
    const auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) return invalid(fmt::format("{} must be from {} to {}", key, lo, hi));
    n = static_cast<std::int64_t>(u);
  } else if (it->is_number_integer()) {
    n = it->get<std::int64_t>();
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
      return invalid(fmt::format("{} must be an integer from {} to {}", key, lo, hi));
    n = static_cast<std::int64_t>(d);
  } else {
    return invalid(fmt::format("{} must be an integer", key));
  }
  if (n < lo || n > hi) return invalid(fmt::format("{} must be from {} to {} (got {})", key, lo, hi, n));
  return n;
}

}  // namespace

bool is_gpu_need_key(std::string_view key, const GpuNeedKeys& keys) {
  for (const char* k : keys.all())
    if (key == k) return true;
  return false;
}

Result<core::GpuNeed> gpu_need_from_json(const json& j, const GpuNeedKeys& keys) {
  core::GpuNeed n;
  if (!j.is_object()) return invalid("a GPU need must be a JSON object");
  auto gpus = int_of(j, keys.gpus, n.gpus, 1, 1024);
  if (!gpus) return gpus.error();
  auto mem = int_of(j, keys.min_free_memory_mib, static_cast<std::int64_t>(n.min_free_memory_mib), 0, 1LL << 40);
  if (!mem) return mem.error();
  auto util = int_of(j, keys.max_utilization_pct, n.max_utilization_pct, 0, 100);
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
