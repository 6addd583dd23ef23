#pragma once
// Reading and editing a manifest's YAML by path, for the pod spec code (pod_spec.cpp, pod_gpus.cpp,
// pod_pin.cpp): every error names the path inside the document, and text from the document is shown
// through describe_yaml. Internal to gf_cluster.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "core/result.hpp"

namespace gf::cluster {

// A short description of a node for messages: `"text"` (cut at 40 bytes), "a mapping", "a list", "null".
std::string describe_yaml(const YAML::Node& n);

namespace pod_yaml {

// The value under key in a mapping (nullopt when absent, or when `map` is not a mapping).
std::optional<YAML::Node> get(const YAML::Node& map, std::string_view key);
// The scalar under key (nullopt when absent or not a scalar).
std::optional<std::string> get_scalar(const YAML::Node& map, std::string_view key);
// "<path>: expected <expected>, got <what it is>".
Error wrong_type(const std::string& path, std::string_view expected, const YAML::Node& got);
// The mapping under key: nullopt when absent or null; an error for anything but a mapping.
Result<std::optional<YAML::Node>> optional_map(const YAML::Node& parent, std::string_view key, const std::string& path);
// The mapping under key; an error when absent (a pod spec needs it).
Result<YAML::Node> required_map(const YAML::Node& parent, std::string_view key, const std::string& path);
// The mapping under key, created (and attached) when absent or null.
Result<YAML::Node> ensure_map(YAML::Node parent, const std::string& key, const std::string& path);
// A count of whole objects (replicas, GPUs): a plain or quoted whole number up to max_value.
Result<std::uint64_t> whole_number(const YAML::Node& v, const std::string& path, std::string_view what,
                                   std::uint64_t max_value);

}  // namespace pod_yaml
}  // namespace gf::cluster
