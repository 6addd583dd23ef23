#include "cluster/pod_spec.hpp"

#include <fmt/format.h>

#include "cluster/pod_yaml.hpp"

namespace gf::cluster {
namespace {

using namespace pod_yaml;

unsigned read_replicas(const YAML::Node& map, std::string_view key, const std::string& path, Result<void>& status) {
  auto v = get(map, key);
  if (!v || v->IsNull()) return 1;
  auto n = whole_number(*v, path, "a whole number", 1u << 20);
  if (!n) {
    status = n.error();
    return 1;
  }
  return std::max<unsigned>(1, static_cast<unsigned>(*n));
}

Result<std::vector<PodContainer>> read_containers(const YAML::Node& pod, const std::string& pod_path, bool required) {
  std::vector<PodContainer> out;
  const auto path = pod_path + ".containers";
  auto list = get(pod, "containers");
  if (!list || list->IsNull()) {
    if (required) return make_error(fmt::format("{}: missing; a pod spec needs its containers", path));
    return out;
  }
  if (!list->IsSequence()) return wrong_type(path, "a list of containers", *list);
  std::size_t i = 0;
  for (const auto& c : *list) {
    const auto item_path = fmt::format("{}[{}]", path, i++);
    if (!c.IsMap()) return wrong_type(item_path, "a container (a mapping)", c);
    out.push_back(PodContainer{item_path, c});
  }
  if (required && out.empty()) return make_error(fmt::format("{}: empty; a pod spec needs a container", path));
  return out;
}

// OME's engine and decoder inline a pod spec; `runner` is the main container, `containers` any others.
Result<std::optional<PodSpecRef>> inference_component(const YAML::Node& spec, std::string_view key) {
  const auto path = fmt::format("spec.{}", key);
  auto comp = optional_map(spec, key, path);
  if (!comp) return comp.error();
  if (!*comp) return std::optional<PodSpecRef>{};
  PodSpecRef ref;
  ref.path = path;
  ref.pod = **comp;
  ref.inference_component = true;
  ref.multi_node = get(ref.pod, "leader").has_value() || get(ref.pod, "worker").has_value();
  Result<void> status;
  ref.replicas = read_replicas(ref.pod, "minReplicas", path + ".minReplicas", status);
  if (!status) return status.error();
  auto runner = optional_map(ref.pod, "runner", path + ".runner");
  if (!runner) return runner.error();
  if (*runner) ref.containers.push_back(PodContainer{path + ".runner", **runner});
  auto more = read_containers(ref.pod, path, false);
  if (!more) return more.error();
  for (auto& c : *more) ref.containers.push_back(std::move(c));
  return std::optional<PodSpecRef>{std::move(ref)};
}

std::string_view api_group(std::string_view api_version) {
  const auto slash = api_version.find('/');
  return slash == std::string_view::npos ? std::string_view{} : api_version.substr(0, slash);
}

}  // namespace

Result<PodSpecs> find_pod_specs(const YAML::Node& doc, const std::string& api_version, const std::string& kind) {
  PodSpecs out;
  const auto group = api_group(api_version);
  auto other_group = [&](std::string_view expected) {
    if (group == expected) return false;
    out.notes.push_back(fmt::format("kind {} of apiVersion {} is not the one gpufleet places ({}); left as it is",
                                    describe_yaml(YAML::Node(kind)), describe_yaml(YAML::Node(api_version)),
                                    expected.empty() ? "v1" : expected));
    return true;
  };
  if (kind == "Deployment" || kind == "StatefulSet" || kind == "Job") {
    if (other_group(kind == "Job" ? "batch" : "apps")) return out;
    auto spec = required_map(doc, "spec", "spec");
    if (!spec) return spec.error();
    auto tmpl = required_map(*spec, "template", "spec.template");
    if (!tmpl) return tmpl.error();
    auto pod = required_map(*tmpl, "spec", "spec.template.spec");
    if (!pod) return pod.error();
    PodSpecRef ref{"spec.template.spec", *pod, {}, 1, false, false, false};
    Result<void> status;
    const auto replicas_key = kind == "Job" ? "parallelism" : "replicas";
    ref.replicas = read_replicas(*spec, replicas_key, fmt::format("spec.{}", replicas_key), status);
    if (!status) return status.error();
    auto containers = read_containers(*pod, ref.path, true);
    if (!containers) return containers.error();
    ref.containers = std::move(*containers);
    out.specs.push_back(std::move(ref));
  } else if (kind == "Pod") {
    if (other_group("")) return out;
    auto pod = required_map(doc, "spec", "spec");
    if (!pod) return pod.error();
    PodSpecRef ref{"spec", *pod, {}, 1, false, false, false};
    auto containers = read_containers(*pod, ref.path, true);
    if (!containers) return containers.error();
    ref.containers = std::move(*containers);
    out.specs.push_back(std::move(ref));
  } else if (kind == "InferenceService") {
    if (other_group("ome.io")) return out;
    auto spec = required_map(doc, "spec", "spec");
    if (!spec) return spec.error();
    auto engine = inference_component(*spec, "engine");
    if (!engine) return engine.error();
    if (*engine) {
      out.specs.push_back(std::move(**engine));
    } else {
      // No engine: the ServingRuntime supplies it. A pin needs somewhere to live, so an engine that
      // holds only the affinity is added when pinning; OME merges it with the runtime's.
      PodSpecRef ref{"spec.engine", YAML::Node(YAML::NodeType::Map), {}, 1, true, false, true};
      out.specs.push_back(std::move(ref));
    }
    auto decoder = inference_component(*spec, "decoder");
    if (!decoder) return decoder.error();
    if (*decoder) out.specs.push_back(std::move(**decoder));
  }
  return out;
}

}  // namespace gf::cluster
