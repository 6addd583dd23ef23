#pragma once
// Placement of Kubernetes manifests on one node: the transformation behind `gpufleet cluster place`.
//
// place_manifest() reads one or more documents (YAML, or a single JSON object — a JSON `kind: List`
// counts each of its items as a document) and, for each kind that
// runs pods — OME InferenceService, Deployment, StatefulSet, Job, Pod — finds the pod specs, reads how
// many GPUs they need and, when a node is given, pins them to it:
//   * a required nodeAffinity match expression `kubernetes.io/hostname In [node]`, merged into every
//     existing nodeSelectorTerm (preferred terms, podAffinity and all other fields stay as they are);
//   * a GPU limit (`nvidia.com/gpu: N`, or the resource PlaceOptions::gpu_resource names: the chosen
//     node's) on containers of pod specs that ask for no GPU at all, because a pin without a GPU request
//     reserves nothing on the node.
// Other kinds pass through untouched. Without a node nothing is written: the result only describes
// the need, and the output is the input byte for byte. The usual flow of `cluster place` is therefore
// two calls: one without a node (to learn `gpus_on_node` for node selection), one with the chosen node.
// When selection fails, the caller keeps the first call's output (the manifest unchanged) and the
// Kubernetes scheduler decides.
//
// GPU count of a pod spec, first found wins: PlaceOptions::gpus; the GPU resources of its containers
// (`nvidia.com/gpu` or `amd.com/gpu`, limits, else requests); the world size tp × pp × max(dp, cp, dcp)
// of the parallel sizes in a container's args/command (`--tp-size 4`, `--tensor-parallel-size=4`,
// `--tp 4`, `-tp 4`, any alias the estimator accepts) or env (`TP_SIZE=4`); else 1.
//
// Output: YAML documents that change are written again with yaml-cpp's emitter, keeping key order,
// flow/block style of collections, quoted scalars quoted (so "4" stays a string) and the document's
// leading comments and `---` line; comments inside a changed document, anchors (aliases are written
// out in full) and the original indentation and quote characters are not kept. Unchanged documents are
// copied verbatim. JSON in gives JSON out (key order kept, the input's indentation reused).
//
// Pure functions of their input: no I/O, no clock; safe to call from any thread.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace gf::cluster {

enum class ManifestFormat { Yaml, Json };

// Where a document's GPU count came from.
enum class GpuSource {
  None,      // nothing placed (another kind, or only multi-node components)
  Option,    // PlaceOptions::gpus (--gpus)
  Limits,    // resources.limits of the containers
  Requests,  // resources.requests, where no container has a GPU limit
  Parallel,  // the world size of the parallel sizes found in args or env
  Default,   // nothing said anywhere: one GPU (the world size with every parallel size 1)
};
std::string_view gpu_source_name(GpuSource s);  // "none", "--gpus", "limits", "requests", "parallel", "default"

struct PlaceOptions {
  std::optional<std::string> node;  // hostname to pin to; nullopt: describe only, change nothing
  std::optional<unsigned> gpus;     // GPUs per pod spec, winning over the manifest (--gpus)
  // Resource name of an added GPU limit: the chosen node's ("amd.com/gpu" on an AMD node). Containers
  // that already ask for GPUs keep their resource names.
  std::string gpu_resource = "nvidia.com/gpu";
};

struct DocumentPlacement {
  std::size_t index = 0;                                // 0-based position among the documents of the input
  std::string api_version, kind, name, namespace_name;  // empty where the document has none
  bool placeable = false;                               // has pod specs that were (or would be) pinned
  std::vector<std::string> pod_specs;                   // their paths: "spec.template.spec", "spec.engine", …
  unsigned gpus = 0;          // GPUs one pod of each placed pod spec asks for, summed over the pod specs
  unsigned gpus_on_node = 0;  // the same times each pod spec's replicas: what the node must hold
  GpuSource gpu_source = GpuSource::None;
  std::string gpu_detail;                  // how the count was found, with paths ("…limits.nvidia.com/gpu = 4")
  std::vector<std::string> gpu_resources;  // GPU resource names its placed pod specs ask for (none: any)
  std::vector<std::string> changes;        // what was written, one line each, naming the path
  std::vector<std::string> notes;          // what was left alone on purpose, and warnings
  bool changed = false;
  std::string text;  // this document as written out (YAML, or JSON for JSON input): the body for --apply
};

struct PlaceResult {
  ManifestFormat format = ManifestFormat::Yaml;
  std::string output;                        // the whole manifest; the input itself when no document changed
  std::vector<DocumentPlacement> documents;  // empty YAML documents (comments only) are not listed

  bool changed() const;
  // The largest gpus_on_node of the placeable documents: what one node must hold for any of them.
  unsigned gpus_on_node() const;
  // The GPU resource names the placeable documents ask for, each once, in order of appearance: the
  // node must offer that resource ("amd.com/gpu" workloads only on AMD nodes). Empty: any GPU node.
  std::vector<std::string> gpu_resources() const;
};

// Errors (one line) name the document (1-based, with kind and name when known) and the path: text that
// is not YAML/JSON, a document that is not a mapping, a kind without the pod spec it needs, GPU counts
// that are negative or not whole numbers, parallel sizes the estimator refuses.
Result<PlaceResult> place_manifest(std::string_view text, const PlaceOptions& options);

// The request that creates or updates one document through the API server with server-side apply:
//   PATCH /apis/apps/v1/namespaces/NS/deployments/NAME?fieldManager=gpufleet[&force=true]
//   Content-Type: application/apply-patch+yaml (JSON bodies are YAML too), body = DocumentPlacement::text.
// Server-side apply creates the object when it does not exist, so one request covers both cases.
struct ApplyRequest {
  std::string method = "PATCH";
  std::string path;  // with the query string
  std::string content_type = "application/apply-patch+yaml";
  std::string body;
  std::string group, version, plural, namespace_name, name;  // group empty for the core API (pods)
};

// Known kinds: Pod (v1), Deployment and StatefulSet (apps/v1), Job (batch/v1), InferenceService
// (ome.io/…; the version is taken from the document's apiVersion). The namespace is the document's,
// else default_namespace (the kubeconfig context's). Names and namespaces must be valid Kubernetes
// names (so nothing in them can change the path). force: take over fields another field manager owns
// instead of failing with 409 Conflict.
Result<ApplyRequest> apply_request(const DocumentPlacement& doc, std::string_view default_namespace,
                                   std::string_view field_manager = "gpufleet", bool force = false);

}  // namespace gf::cluster
