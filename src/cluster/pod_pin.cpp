// The hostname pin of a placement: nodeAffinity that requires one node (see pod_spec.hpp).
#include <fmt/format.h>

#include "cluster/pod_spec.hpp"
#include "cluster/pod_yaml.hpp"
#include "cluster/yaml_text.hpp"

namespace gf::cluster {
namespace {

using namespace pod_yaml;

constexpr std::string_view kHostnameKey = "kubernetes.io/hostname";

bool is_our_expression(const YAML::Node& e, const std::string& node) {
  if (!e.IsMap() || get_scalar(e, "key") != kHostnameKey || get_scalar(e, "operator") != "In") return false;
  auto values = get(e, "values");
  return values && values->IsSequence() && values->size() == 1 && (*values)[0].IsScalar() &&
         (*values)[0].Scalar() == node;
}

// An existing hostname constraint that leaves `node` out: with the pin added, the term matches nothing.
std::optional<std::string> excludes_node(const YAML::Node& e, const std::string& node) {
  if (!e.IsMap() || get_scalar(e, "key") != kHostnameKey) return std::nullopt;
  const auto op = get_scalar(e, "operator");
  auto values = get(e, "values");
  bool listed = false;
  if (values && values->IsSequence()) {
    for (const auto& v : *values) listed = listed || (v.IsScalar() && v.Scalar() == node);
  }
  if ((op == "In" && !listed) || (op == "NotIn" && listed) || op == "DoesNotExist") {
    return op.value_or("?");
  }
  return std::nullopt;
}

YAML::Node hostname_expression(const std::string& node) {
  YAML::Node e(YAML::NodeType::Map);
  e["key"] = string_scalar(std::string(kHostnameKey));
  e["operator"] = YAML::Node("In");
  YAML::Node values(YAML::NodeType::Sequence);
  values.push_back(string_scalar(node));
  e["values"] = values;
  return e;
}

}  // namespace

Result<void> pin_to_node(PodSpecRef& spec, const std::string& node, std::vector<std::string>& changes,
                         std::vector<std::string>& notes) {
  const auto quoted_node = describe_yaml(YAML::Node(node));
  if (auto selector = get(spec.pod, "nodeSelector"); selector && selector->IsMap()) {
    if (auto host = get_scalar(*selector, kHostnameKey); host && *host != node) {
      notes.push_back(fmt::format("{}.nodeSelector already asks for {} {}: the pod cannot also run on {}", spec.path,
                                  kHostnameKey, describe_yaml(YAML::Node(*host)), quoted_node));
    }
  }
  auto affinity = ensure_map(spec.pod, "affinity", spec.path + ".affinity");
  if (!affinity) return affinity.error();
  auto node_affinity = ensure_map(*affinity, "nodeAffinity", spec.path + ".affinity.nodeAffinity");
  if (!node_affinity) return node_affinity.error();
  const auto required_path = spec.path + ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  auto required = ensure_map(*node_affinity, "requiredDuringSchedulingIgnoredDuringExecution", required_path);
  if (!required) return required.error();
  const auto terms_path = required_path + ".nodeSelectorTerms";
  auto terms = get(*required, "nodeSelectorTerms");
  if (terms && !terms->IsNull() && !terms->IsSequence()) return wrong_type(terms_path, "a list of terms", *terms);
  if (!terms || terms->IsNull() || terms->size() == 0) {
    YAML::Node list(YAML::NodeType::Sequence);
    YAML::Node term(YAML::NodeType::Map);
    YAML::Node expressions(YAML::NodeType::Sequence);
    expressions.push_back(hostname_expression(node));
    term["matchExpressions"] = expressions;
    list.push_back(term);
    (*required)["nodeSelectorTerms"] = list;
    changes.push_back(fmt::format("{}: required {} In [{}] (a new term)", required_path, kHostnameKey, quoted_node));
    return {};
  }
  // Required terms are ORed and the expressions inside one term ANDed: a pin holds only when every
  // term carries it, so it joins each term rather than becoming a term of its own.
  std::size_t added = 0, index = 0;
  for (auto term : *terms) {
    const auto term_path = fmt::format("{}[{}]", terms_path, index++);
    if (!term.IsMap()) return wrong_type(term_path, "a node selector term (a mapping)", term);
    auto expressions = get(term, "matchExpressions");
    if (expressions && !expressions->IsNull() && !expressions->IsSequence()) {
      return wrong_type(term_path + ".matchExpressions", "a list", *expressions);
    }
    bool present = false;
    if (expressions && expressions->IsSequence()) {
      for (const auto& e : *expressions) {
        present = present || is_our_expression(e, node);
        if (auto op = excludes_node(e, node)) {
          notes.push_back(
              fmt::format("{}.matchExpressions already has {} {}, which leaves {} out: this term "
                          "can no longer match",
                          term_path, kHostnameKey, *op, quoted_node));
        }
      }
    }
    if (present) continue;
    if (!expressions || expressions->IsNull()) {
      term["matchExpressions"] = YAML::Node(YAML::NodeType::Sequence);
      expressions = get(term, "matchExpressions");
    }
    expressions->push_back(hostname_expression(node));
    ++added;
  }
  if (added == 0) {
    notes.push_back(fmt::format("{}: already pinned to {}", required_path, quoted_node));
  } else {
    changes.push_back(fmt::format("{}: required {} In [{}] added to {} of {} term(s)", required_path, kHostnameKey,
                                  quoted_node, added, terms->size()));
  }
  return {};
}

}  // namespace gf::cluster
