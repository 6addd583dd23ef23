#include "cluster/pod_yaml.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace gf::cluster {

std::string describe_yaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: {
      const auto& s = n.Scalar();
      // ensure_ascii: control characters and non-ASCII come out escaped, safe for any terminal.
      auto quoted = nlohmann::json(s.substr(0, 40)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
      return s.size() > 40 ? quoted + "..." : quoted;
    }
    default: return "null";
  }
}

namespace pod_yaml {

std::optional<YAML::Node> get(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> get_scalar(const YAML::Node& map, std::string_view key) {
  auto v = get(map, key);
  if (!v || !v->IsScalar()) return std::nullopt;
  return v->Scalar();
}

Error wrong_type(const std::string& path, std::string_view expected, const YAML::Node& got) {
  return make_error(fmt::format("{}: expected {}, got {}", path, expected, describe_yaml(got)));
}

Result<std::optional<YAML::Node>> optional_map(const YAML::Node& parent, std::string_view key,
                                               const std::string& path) {
  auto v = get(parent, key);
  if (!v || v->IsNull()) return std::optional<YAML::Node>{};
  if (!v->IsMap()) return wrong_type(path, "a mapping", *v);
  return std::optional<YAML::Node>{*v};
}

Result<YAML::Node> required_map(const YAML::Node& parent, std::string_view key, const std::string& path) {
  auto v = optional_map(parent, key, path);
  if (!v) return v.error();
  if (!*v) return make_error(fmt::format("{}: missing; a {} needs it", path, "pod spec"));
  return **v;
}

Result<YAML::Node> ensure_map(YAML::Node parent, const std::string& key, const std::string& path) {
  auto v = optional_map(parent, key, path);
  if (!v) return v.error();
  if (*v) return **v;
  parent[key] = YAML::Node(YAML::NodeType::Map);
  return *get(parent, key);
}

Result<std::uint64_t> whole_number(const YAML::Node& v, const std::string& path, std::string_view what,
                                   std::uint64_t max_value) {
  if (!v.IsScalar()) return wrong_type(path, what, v);
  const std::string_view s = core::trim(v.Scalar());
  if (s.size() > 1 && s.front() == '-' && core::parse_uint(s.substr(1)))
    return make_error(fmt::format("{}: {} is negative; expected {}", path, describe_yaml(v), what));
  auto n = core::parse_uint(s.starts_with('+') ? s.substr(1) : s, 0, max_value);
  if (!n) return wrong_type(path, fmt::format("{} (at most {})", what, max_value), v);
  return *n;
}

}  // namespace pod_yaml
}  // namespace gf::cluster
