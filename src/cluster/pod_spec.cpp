#include "cluster/pod_spec.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster/yaml_text.hpp"
#include "core/text.hpp"
#include "scheduler/estimate_engine.hpp"
#include "scheduler/estimate_params.hpp"

namespace gf::cluster {

namespace {

constexpr std::string_view kHostnameKey = "kubernetes.io/hostname";
constexpr std::array<std::string_view, 2> kGpuResources = {"nvidia.com/gpu", "amd.com/gpu"};

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

// The mapping under key: nullopt when absent or null; an error for anything but a mapping.
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

// The mapping under key, created (and attached) when absent or null.
Result<YAML::Node> ensure_map(YAML::Node parent, const std::string& key, const std::string& path) {
  auto v = optional_map(parent, key, path);
  if (!v) return v.error();
  if (*v) return **v;
  parent[key] = YAML::Node(YAML::NodeType::Map);
  return *get(parent, key);
}

// A count of whole objects (replicas, GPUs): a plain or quoted whole number up to max_value.
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

// --- GPU resources -------------------------------------------------------------------------------

struct ResourceGpus {
  std::optional<std::uint64_t> count;                        // summed over the GPU resource names present
  std::vector<std::string> found;                            // "path.nvidia.com/gpu = 4"
  std::vector<std::pair<std::string, std::uint64_t>> items;  // each resource name present, with its count
};

Result<ResourceGpus> read_gpu_resources(const YAML::Node& resources, std::string_view which, const std::string& path) {
  ResourceGpus out;
  auto map = optional_map(resources, which, path);
  if (!map) return map.error();
  if (!*map) return out;
  for (const auto name : kGpuResources) {
    auto v = get(**map, name);
    if (!v) continue;
    const auto item_path = fmt::format("{}.{}", path, name);
    auto n = whole_number(*v, item_path, "a whole number of GPUs", scheduler::kMaxWorldSize);
    if (!n) return n.error();
    out.count = out.count.value_or(0) + *n;
    out.found.push_back(fmt::format("{} = {}", item_path, *n));
    out.items.emplace_back(std::string(name), *n);
  }
  return out;
}

struct ContainerGpus {
  bool has_resources = false;
  ResourceGpus limits, requests;
};

Result<ContainerGpus> read_container_gpus(const PodContainer& c) {
  ContainerGpus out;
  const auto path = c.path + ".resources";
  auto resources = optional_map(c.node, "resources", path);
  if (!resources) return resources.error();
  if (!*resources) return out;
  out.has_resources = true;
  auto limits = read_gpu_resources(**resources, "limits", path + ".limits");
  if (!limits) return limits.error();
  auto requests = read_gpu_resources(**resources, "requests", path + ".requests");
  if (!requests) return requests.error();
  out.limits = std::move(*limits);
  out.requests = std::move(*requests);
  return out;
}

// --- parallel sizes in args and env ---------------------------------------------------------------

bool is_parallel_alias(std::string_view name, bool env_only) {
  for (const auto p : {scheduler::Parallel::Tp, scheduler::Parallel::Pp, scheduler::Parallel::Dp,
                       scheduler::Parallel::Cp, scheduler::Parallel::Dcp}) {
    for (const auto alias : scheduler::parallel_aliases(p)) {
      // In env only the spelled-out names count: a variable called DP or CP may mean anything.
      if (alias == name && (!env_only || alias.find("size") != std::string_view::npos)) return true;
    }
  }
  return false;
}

scheduler::TaskValue parallel_value(std::string_view text) {
  if (auto n = core::parse_uint(text)) return *n;
  return std::string(text);
}

// Words of a container's command and args. An item with blanks in it (`sh -c "python … --tp 4"`) is
// split at them, so flags inside a shell line are seen too; shell quoting is not interpreted.
std::vector<std::pair<std::string, std::string>> command_words(const PodContainer& c) {
  std::vector<std::pair<std::string, std::string>> words;  // (word, path of its item)
  for (const char* key : {"command", "args"}) {
    auto list = get(c.node, key);
    if (!list || !list->IsSequence()) continue;
    std::size_t i = 0;
    for (const auto& item : *list) {
      const auto path = fmt::format("{}.{}[{}]", c.path, key, i++);
      if (!item.IsScalar()) continue;
      std::string_view s = item.Scalar();
      std::size_t pos = 0;
      while (pos < s.size()) {
        const auto start = s.find_first_not_of(" \t\n\r", pos);
        if (start == std::string_view::npos) break;
        const auto stop = std::min(s.size(), s.find_first_of(" \t\n\r", start));
        words.emplace_back(std::string(s.substr(start, stop - start)), path);
        pos = stop;
      }
    }
  }
  return words;
}

struct ParallelParams {
  scheduler::TaskValue params = scheduler::TaskValue::object();
  std::vector<std::string> paths;  // where each was found
};

Result<ParallelParams> read_parallel_params(const PodContainer& c) {
  ParallelParams out;
  if (auto env = get(c.node, "env"); env && env->IsSequence()) {
    std::size_t i = 0;
    for (const auto& var : *env) {
      const auto path = fmt::format("{}.env[{}]", c.path, i++);
      const auto name = var.IsMap() ? get_scalar(var, "name") : std::nullopt;
      const auto value = var.IsMap() ? get_scalar(var, "value") : std::nullopt;
      if (!name || !value) continue;
      const std::string key = core::lower(*name);
      if (!is_parallel_alias(key, true)) continue;
      out.params.set(key, parallel_value(*value));
      out.paths.push_back(fmt::format("{} ({}={})", path, *name, *value));
    }
  }
  const auto words = command_words(c);
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string_view w = words[i].first;
    if (w.size() < 2 || w.front() != '-') continue;
    const auto name_start = w.find_first_not_of('-');
    if (name_start > 2) continue;  // also npos: only dashes
    std::string_view name = w.substr(name_start);
    std::optional<std::string_view> value;
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!is_parallel_alias(name, false)) continue;
    if (!value) {
      if (i + 1 >= words.size() || words[i + 1].first.empty()) {
        return make_error(
            fmt::format("{}: {} has no value", words[i].second, describe_yaml(YAML::Node(std::string(w)))));
      }
      value = words[++i].first;
    }
    out.params.set(std::string(name), parallel_value(*value));
    out.paths.push_back(fmt::format("{} ({} {})", words[i].second, name, *value));
  }
  return out;
}

}  // namespace

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

namespace {

// What the manifest's own GPU resources add up to, over every container: limits where set, else
// requests (and then the limit that Kubernetes requires for an extended resource goes in plan.adds).
struct ManifestGpus {
  std::uint64_t total = 0;
  bool any_limit = false, any_gpu = false;
  std::vector<std::string> found;  // where each count was read
};

ManifestGpus manifest_gpus(const std::vector<ContainerGpus>& gpus, GpuPlan& plan) {
  ManifestGpus m;
  for (const auto& g : gpus)
    for (const auto* items : {&g.limits.items, &g.requests.items})
      for (const auto& item : *items)
        if (std::find(plan.resources.begin(), plan.resources.end(), item.first) == plan.resources.end())
          plan.resources.push_back(item.first);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const auto& g = gpus[i];
    if (g.limits.count) {
      m.any_limit = m.any_gpu = true;
      m.total += *g.limits.count;
      m.found.insert(m.found.end(), g.limits.found.begin(), g.limits.found.end());
    } else if (g.requests.count) {
      m.any_gpu = true;
      m.total += *g.requests.count;
      m.found.insert(m.found.end(), g.requests.found.begin(), g.requests.found.end());
      for (const auto& [name, n] : g.requests.items) {
        plan.adds.push_back(GpuPlan::Add{i, name, static_cast<unsigned>(n)});
      }
    }
  }
  return m;
}

unsigned clamp_gpus(std::uint64_t n) {
  return static_cast<unsigned>(std::min<std::uint64_t>(n, scheduler::kMaxWorldSize));
}

// Where a GPU limit goes when the pod spec asks for none: the main container. For an OME component
// that is the runner, and only when it already sets resources: OME takes the runner's resources
// whole, so a GPU-only block would drop the ServingRuntime's CPU and memory (and its GPU count).
std::optional<std::size_t> limit_target(const PodSpecRef& spec, const std::vector<ContainerGpus>& gpus) {
  if (spec.containers.empty()) return std::nullopt;
  if (!spec.inference_component) return 0;
  const bool runner_first = spec.containers.front().path.ends_with(".runner");
  if (runner_first && gpus.front().has_resources) return 0;
  return std::nullopt;
}

// A limit of n GPUs on the target container, or the note that says why there is none.
void add_to_target(GpuPlan& plan, const std::optional<std::size_t>& target, const PodSpecRef& spec,
                   const PlaceOptions& options, unsigned n) {
  if (target) {
    plan.adds.push_back(GpuPlan::Add{*target, options.gpu_resource, n});
  } else {
    plan.notes.push_back(
        fmt::format("{}: no GPU limit added: the runner sets no resources, so the ServingRuntime's apply (adding "
                    "some would replace them all); use --gpus to count what the runtime asks for",
                    spec.path));
  }
}

// The GPUs the containers' parallel sizes (tp × pp × …, in args or env) come to; false when no
// container states any.
Result<bool> plan_from_parallel_sizes(const PodSpecRef& spec, const PlaceOptions& options,
                                      const std::optional<std::size_t>& target, GpuPlan& plan) {
  std::uint64_t total = 0;
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < spec.containers.size(); ++i) {
    auto params = read_parallel_params(spec.containers[i]);
    if (!params) return params.error();
    if (params->paths.empty()) continue;
    auto sizes = scheduler::read_parallel_sizes(params->params);
    if (!sizes) return make_error(fmt::format("{}: {}", spec.containers[i].path, sizes.error().message));
    auto world = scheduler::world_size(scheduler::EngineKind::Default, *sizes, params->params);
    if (!world) return make_error(fmt::format("{}: {}", spec.containers[i].path, world.error().message));
    total += world->gpus;
    lines.push_back(fmt::format("{}: {}", fmt::join(params->paths, ", "), world->lines.back()));
    const bool runner = spec.inference_component && spec.containers[i].path.ends_with(".runner");
    if (runner && !target) {
      add_to_target(plan, target, spec, options, world->gpus);  // says why the runner gets none
    } else {
      plan.adds.push_back(GpuPlan::Add{i, options.gpu_resource, world->gpus});
    }
  }
  if (lines.empty()) return false;
  plan.gpus = clamp_gpus(total);
  plan.source = GpuSource::Parallel;
  plan.detail = fmt::format("{}", fmt::join(lines, "; "));
  return true;
}

}  // namespace

// The count comes from, in this order: --gpus, the manifest's GPU limits or requests, the containers'
// parallel sizes, else 1.
Result<GpuPlan> plan_gpus(const PodSpecRef& spec, const PlaceOptions& options) {
  GpuPlan plan;
  std::vector<ContainerGpus> gpus;
  for (const auto& c : spec.containers) {
    auto g = read_container_gpus(c);
    if (!g) return g.error();
    gpus.push_back(std::move(*g));
  }
  // Containers with a GPU request but no limit get the limit: Kubernetes requires one for extended
  // resources, and the pin reserves nothing without it.
  const ManifestGpus manifest = manifest_gpus(gpus, plan);
  const std::optional<std::size_t> target = limit_target(spec, gpus);

  if (options.gpus) {
    plan.gpus = *options.gpus;
    plan.source = GpuSource::Option;
    plan.detail = fmt::format("--gpus {}", *options.gpus);
    if (manifest.any_gpu && manifest.total != *options.gpus) {
      plan.notes.push_back(
          fmt::format("{}: the manifest asks for {} GPUs ({}); --gpus {} is used to choose the "
                      "node and the manifest's values stay",
                      spec.path, manifest.total, fmt::join(manifest.found, ", "), *options.gpus));
    }
    if (!manifest.any_gpu) add_to_target(plan, target, spec, options, *options.gpus);
    return plan;
  }
  if (manifest.any_gpu) {
    plan.gpus = clamp_gpus(manifest.total);
    plan.source = manifest.any_limit ? GpuSource::Limits : GpuSource::Requests;
    plan.detail = fmt::format("{}", fmt::join(manifest.found, ", "));
    return plan;
  }
  auto parallel = plan_from_parallel_sizes(spec, options, target, plan);
  if (!parallel) return parallel.error();
  if (*parallel) return plan;
  plan.gpus = 1;
  plan.source = GpuSource::Default;
  plan.detail = "no GPU resources and no parallel sizes: 1 GPU (every parallel size 1)";
  add_to_target(plan, target, spec, options, 1);
  return plan;
}

Result<void> add_gpu_limits(PodSpecRef& spec, const GpuPlan& plan, std::vector<std::string>& changes) {
  for (const auto& add : plan.adds) {
    auto& c = spec.containers.at(add.container);
    auto resources = ensure_map(c.node, "resources", c.path + ".resources");
    if (!resources) return resources.error();
    auto limits = ensure_map(*resources, "limits", c.path + ".resources.limits");
    if (!limits) return limits.error();
    const auto count = std::to_string(add.count);
    (*limits)[add.resource] = YAML::Node(count);
    changes.push_back(fmt::format("{}.resources.limits: added {}: {}", c.path, add.resource, count));
    auto requests = optional_map(*resources, "requests", c.path + ".resources.requests");
    if (!requests) return requests.error();
    if (*requests && !get(**requests, add.resource)) {
      (**requests)[add.resource] = YAML::Node(count);
      changes.push_back(fmt::format("{}.resources.requests: added {}: {}", c.path, add.resource, count));
    }
  }
  return {};
}

namespace {

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
