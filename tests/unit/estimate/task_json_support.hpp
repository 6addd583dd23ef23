#pragma once
// Test adapters for the estimate's tests, which state their tasks as nlohmann::json literals: each
// turns the literal into a TaskValue, exactly as parse_task would read the same document, and calls
// the JSON-free API; expand_grid's experiments come back as JSON for the assertions.
#include <nlohmann/json.hpp>

#include "estimate/estimate.hpp"
#include "estimate/estimate_engine.hpp"
#include "estimate/estimate_params.hpp"
#include "estimate/task.hpp"

namespace gf::estimate {

inline TaskValue task_value(const nlohmann::json& j) {
  using nlohmann::json;
  switch (j.type()) {
    case json::value_t::boolean: return TaskValue(j.get<bool>());
    case json::value_t::number_unsigned: return TaskValue(j.get<std::uint64_t>());
    case json::value_t::number_integer: return TaskValue(j.get<std::int64_t>());
    case json::value_t::number_float: return TaskValue(j.get<double>());
    case json::value_t::string: return TaskValue(j.get<std::string>());
    case json::value_t::array: {
      TaskValue::List l;
      for (const auto& e : j) l.push_back(task_value(e));
      return TaskValue(std::move(l));
    }
    case json::value_t::object: {
      TaskValue::Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.push_back({it.key(), task_value(it.value())});
      return TaskValue::object(std::move(o));
    }
    default: return TaskValue();
  }
}

inline Result<Estimate> estimate(const nlohmann::json& j, const EstimateOptions& o = {}) {
  return estimate(task_value(j), o);
}

inline Result<std::vector<nlohmann::json>> expand_grid(const nlohmann::json& j, std::size_t max = 100000) {
  auto g = expand_grid(task_value(j), max);
  if (!g) return g.error();
  std::vector<nlohmann::json> out;
  for (const auto& e : *g) out.push_back(nlohmann::json::parse(to_json_text(e)));
  return out;
}

inline Result<ParallelSizes> read_parallel_sizes(const nlohmann::json& j) { return read_parallel_sizes(task_value(j)); }
inline Result<std::optional<Param<double>>> read_fraction(const nlohmann::json& j,
                                                          std::span<const std::string_view> k) {
  return read_fraction(task_value(j), k);
}
inline Result<std::optional<Param<bool>>> read_switch(const nlohmann::json& j, std::span<const std::string_view> k) {
  return read_switch(task_value(j), k);
}
inline Result<std::optional<Param<std::uint64_t>>> read_positive(const nlohmann::json& j,
                                                                 std::span<const std::string_view> k,
                                                                 std::uint64_t max_value) {
  return read_positive(task_value(j), k, max_value);
}
inline Result<std::optional<Param<std::vector<std::string>>>> read_strings(const nlohmann::json& j,
                                                                           std::span<const std::string_view> k) {
  return read_strings(task_value(j), k);
}
inline Result<EngineChoice> choose_engine(const nlohmann::json& j, std::string_view option) {
  return choose_engine(task_value(j), option);
}
inline Result<WorldSize> world_size(EngineKind e, const ParallelSizes& s, const nlohmann::json& j) {
  return world_size(e, s, task_value(j));
}
inline Result<MemoryFraction> memory_fraction(EngineKind e, const nlohmann::json& j, double vllm_default) {
  return memory_fraction(e, task_value(j), vllm_default);
}
inline std::optional<std::uint64_t> json_natural(const nlohmann::json& j) { return natural(task_value(j)); }
inline std::string describe_json(const nlohmann::json& j) { return describe_value(task_value(j)); }

}  // namespace gf::estimate
