// How many GPUs a pod spec needs, and the GPU limits a placement adds (see pod_spec.hpp).
#include <algorithm>
#include <array>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cluster/pod_spec.hpp"
#include "cluster/pod_yaml.hpp"
#include "core/text.hpp"
#include "scheduler/estimate_engine.hpp"
#include "scheduler/estimate_params.hpp"

namespace gf::cluster {
namespace {

using namespace pod_yaml;

constexpr std::array<std::string_view, 2> kGpuResources = {"nvidia.com/gpu", "amd.com/gpu"};

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

}  // namespace gf::cluster
