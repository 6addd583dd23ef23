#include "wire/json_field.hpp"

#include <fmt/format.h>

#include <cmath>

namespace gf::wire {

Result<std::int64_t> json_int(const nlohmann::json& j, const char* key, std::int64_t def, std::int64_t lo,
                              std::int64_t hi) {
  auto invalid = [](std::string msg) { return make_error(ErrorKind::Invalid, std::move(msg)); };
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

}  // namespace gf::wire
