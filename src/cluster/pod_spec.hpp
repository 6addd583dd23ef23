#pragma once
// The pod specs of one manifest document and what each needs: which containers it has, how many GPUs
// they ask for (or would, from their parallel sizes), and the two edits of a placement — the hostname
// pin and an added GPU limit. Internal to gf_cluster (manifest.cpp); public for the tests. Finding the pod
// specs is pod_spec.cpp, the GPU count and limits pod_gpus.cpp, the pin pod_pin.cpp; describe_yaml and the
// YAML access they share are in pod_yaml.hpp.
//
// Errors are one line naming the path inside the document; manifest.cpp adds the document.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "cluster/manifest.hpp"
#include "cluster/pod_yaml.hpp"
#include "core/result.hpp"

namespace gf::cluster {

struct PodContainer {
  std::string path;  // "spec.template.spec.containers[0]", "spec.engine.runner"
  YAML::Node node;
};

struct PodSpecRef {
  std::string path;  // "spec.template.spec", "spec.engine"
  YAML::Node pod;    // the mapping that holds affinity (an InferenceService component inlines it)
  std::vector<PodContainer> containers;
  unsigned replicas = 1;
  bool inference_component = false;  // an OME engine/decoder: runner resources replace the runtime's
  bool multi_node = false;           // has leader/worker pod specs: not pinned to one node
  bool detached = false;             // spec.engine was absent: `pod` is attached to spec when pinned
};

// The pod specs of a document of a placed kind; an empty list for kinds that pass through (with a
// note saying why when the kind is one gpufleet knows under another API group).
struct PodSpecs {
  std::vector<PodSpecRef> specs;
  std::vector<std::string> notes;
};
Result<PodSpecs> find_pod_specs(const YAML::Node& doc, const std::string& api_version, const std::string& kind);

struct GpuPlan {
  unsigned gpus = 1;
  GpuSource source = GpuSource::Default;
  std::string detail;
  struct Add {
    std::size_t container;  // index into PodSpecRef::containers
    std::string resource;
    unsigned count;
  };
  std::vector<Add> adds;  // GPU limits to add when the pod spec is pinned
  std::vector<std::string> notes;
  std::vector<std::string> resources;  // the GPU resource names its containers ask for, in limits or requests
};
Result<GpuPlan> plan_gpus(const PodSpecRef& spec, const PlaceOptions& options);

// Applies plan.adds (limits, and requests where the container has a requests mapping); appends one
// line per edit to changes.
Result<void> add_gpu_limits(PodSpecRef& spec, const GpuPlan& plan, std::vector<std::string>& changes);

// Adds `kubernetes.io/hostname In [node]` to every required nodeSelectorTerm (a new term when there
// is none). Appends what it did to changes and conflicts it sees to notes.
Result<void> pin_to_node(PodSpecRef& spec, const std::string& node, std::vector<std::string>& changes,
                         std::vector<std::string>& notes);

}  // namespace gf::cluster
