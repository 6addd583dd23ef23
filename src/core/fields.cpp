#include "core/fields.hpp"

#include <string>

namespace gf::core {

std::string_view to_string(MetricType t) noexcept { return t == MetricType::Counter ? "counter" : "gauge"; }

std::optional<Field> field_by_json_key(std::string_view key) noexcept {
  for (const auto& f : kFields)
    if (f.json_key == key) return f.id;
  return std::nullopt;
}

std::optional<Field> field_by_history_metric(std::string_view metric) noexcept {
  if (metric.empty()) return std::nullopt;  // "" marks the fields the history does not serve
  for (const auto& f : kFields)
    if (f.history_metric == metric) return f.id;
  return std::nullopt;
}

Result<Field> parse_history_metric(std::string_view name) {
  if (auto f = field_by_history_metric(name)) return *f;
  return make_error("unknown metric '" + std::string(name) + "' (expected one of " +
                    std::string(history_metric_list()) + ")");
}

std::string_view history_metric_list() noexcept {
  // Built once from the table; the table is constant, so this never changes after.
  static const std::string list = [] {
    std::string s;
    for (const auto& f : kFields) {
      if (f.history_metric.empty()) continue;
      if (!s.empty()) s += ", ";
      s += f.history_metric;
    }
    return s;
  }();
  return list;
}

}  // namespace gf::core
