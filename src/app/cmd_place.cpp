// gpufleet cluster place: a Kubernetes manifest pinned to the node the fleet's ranking chooses, written
// out or applied through the API server (see cmd_cluster.hpp and README, "Placing Kubernetes workloads").
//
// The flow: read the manifest; a first place_manifest() pass without a node learns how many GPUs one
// node must hold; the fleet's sources rank the nodes as `cluster select` does; a second pass pins the
// chosen node. When selection fails for any reason the first pass's output (the manifest unchanged) is
// used and the reason printed: the Kubernetes scheduler decides, and the exit status stays 0.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "allocator/node_rank.hpp"
#include "app/cmd_cluster.hpp"
#include "app/exit_codes.hpp"
#include "cluster/fleet_sources.hpp"
#include "cluster/kube_client.hpp"
#include "cluster/manifest.hpp"
#include "platform/log.hpp"

namespace gf::app {
namespace {

using json = nlohmann::json;

// Far above any real manifest (an InferenceService with a long script is a few kB), low enough that a
// wrong file (an image, a log) is refused before it is parsed.
constexpr std::size_t kMaxManifestBytes = 4u << 20;

Result<std::string> read_all(int fd, const std::string& what) {
  std::string text;
  char buf[65536];
  for (;;) {
    const auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(fmt::format("cannot read {}: {}", what, std::strerror(errno)));
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxManifestBytes)
      return make_error(fmt::format("{} is larger than {} MiB", what, kMaxManifestBytes >> 20));
  }
}

// -f FILE, or -f - for standard input.
Result<std::string> read_manifest(const std::string& path) {
  if (path == "-") return read_all(STDIN_FILENO, "the manifest on standard input");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return make_error(fmt::format("cannot open the manifest {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(fmt::format("the manifest {} is not a regular file", path));
  }
  auto text = read_all(fd, "the manifest " + path);
  ::close(fd);
  return text;
}

// -o FILE. gpufleet may run as root in a directory other users can write to: the last component is
// never followed as a symbolic link, and an existing file must be a regular file of our own (a file
// someone else planted, or a hard link to one, is refused rather than overwritten).
Result<void> write_output(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    if (errno == ELOOP) return make_error(fmt::format("{} is a symbolic link: not written", path));
    return make_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0)
    problem = std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    problem = "not a regular file";
  else if (st.st_uid != ::geteuid())
    problem = "it belongs to another user";
  else if (st.st_nlink > 1)
    problem = "it has other hard links";
  else if (::ftruncate(fd, 0) != 0)
    problem = std::strerror(errno);
  for (std::size_t done = 0; problem.empty() && done < text.size();) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      problem = std::strerror(errno);
    else
      done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && problem.empty()) problem = std::strerror(errno);
  if (!problem.empty()) return make_error(fmt::format("cannot write {}: {}", path, problem));
  return {};
}

// What the ranking decided, or why there is no decision.
struct Selection {
  std::optional<std::string> node;
  std::string reason;                  // why this node, or why none
  std::vector<std::string> reasoning;  // the seed's lines
  std::vector<std::string> source_errors;
  bool fallback_used = false;
  bool source_failed = false;  // Kubernetes did not answer: nothing chosen from partial facts
  bool attempted = false;      // the fleet was asked
  std::string node_resource;   // the chosen node's GPU resource ("amd.com/gpu"); empty: unknown
};

std::string document_name(const cluster::DocumentPlacement& d) {
  return fmt::format("{} '{}'", d.kind.empty() ? "document" : d.kind,
                     d.name.empty() ? fmt::format("#{}", d.index + 1) : d.name);
}

json document_json(const cluster::DocumentPlacement& d, const std::optional<std::string>& node, const std::string& ns) {
  json j;
  j["index"] = d.index;
  j["kind"] = d.kind.empty() ? json() : json(d.kind);
  j["name"] = d.name.empty() ? json() : json(d.name);
  j["namespace"] = ns.empty() ? json() : json(ns);
  j["placeable"] = d.placeable;
  j["pod_specs"] = d.pod_specs;
  j["node"] = node && d.placeable ? json(*node) : json();
  j["gpus"] = d.gpus;
  j["gpu_resources"] = d.gpu_resources;
  j["gpus_on_node"] = d.gpus_on_node;
  j["gpu_source"] = std::string(cluster::gpu_source_name(d.gpu_source));
  j["gpu_detail"] = d.gpu_detail;
  j["changes"] = d.changes;
  j["notes"] = d.notes;
  j["changed"] = d.changed;
  j["applied"] = json();
  j["status"] = json();
  return j;
}

int fail(int code, const std::string& message) {
  print_error("cluster place: " + platform::printable(message));
  return code;
}

// The target of --apply (what the command settles before the fleet is asked or anything is sent).
struct ApplyTarget {
  std::optional<cluster::KubeConfig> api;  // set with --apply
  std::string default_ns;                  // the namespace of documents that name none
};

// --apply: the API server that takes the objects, and every request, are settled before the fleet is
// asked or anything is sent, so that a wrong kubeconfig or an unwritable kind changes nothing. Also
// checks every document's namespace against --namespace. An exit status when it failed (and said why).
std::optional<int> settle_target(const ClusterCommand& c, const KubeEnvironment& env,
                                 const cluster::PlaceResult& described, ApplyTarget& target,
                                 std::vector<std::string>& said) {
  target.default_ns = c.namespace_name.value_or("");
  if (c.apply) {
    auto settings = kube_settings_of(c);
    if (!settings) return fail(kExitUsage, settings.error().message);
    auto config = cluster::load_kube_config(kube_options(*settings, env));
    if (!config) return fail(kExitUsage, "--apply: " + config.error().message);
    if (auto w = cluster::insecure_transport(*config); !w.empty()) {
      print_error("warning: " + w);
      said.push_back(std::move(w));
    }
    target.api = std::move(*config);
    if (target.default_ns.empty()) target.default_ns = target.api->namespace_;
  }
  for (const auto& d : described.documents) {
    if (c.namespace_name && !d.namespace_name.empty() && d.namespace_name != *c.namespace_name)
      return fail(kExitUsage, fmt::format("{} names namespace '{}', which does not match --namespace '{}'",
                                          document_name(d), d.namespace_name, *c.namespace_name));
    if (c.apply) {
      auto rq = cluster::apply_request(d, target.default_ns);
      if (!rq) return fail(kExitUsage, rq.error().message + " (nothing was applied; apply it separately with kubectl)");
    }
  }
  return std::nullopt;
}

// The node the pods go to, from the fleet's facts, or why none. An exit status when it failed.
std::optional<int> choose_node(const ClusterCommand& c, const KubeEnvironment& env, unsigned need,
                               const std::vector<std::string>& resources, std::vector<std::string>& said,
                               Selection& sel) {
  if (c.no_gpu_selection) {
    sel.reason = "GPU node selection is off (--no-gpu-selection)";
    return std::nullopt;
  }
  if (need == 0) {
    sel.reason = "no document runs its pods on a single node, so there is nothing to pin";
    return std::nullopt;
  }
  if (resources.size() > 1) {
    sel.reason = fmt::format("the manifest asks for {} GPUs; no node offers more than one GPU resource",
                             fmt::join(resources, " and "));
    return std::nullopt;
  }
  auto src = fleet_sources_of(c, env, said);
  if (!src)
    return fail(kExitUsage, src.error().message + "; or --no-gpu-selection to let the Kubernetes scheduler decide");
  const auto now = std::chrono::system_clock::now();
  auto facts = cluster::gather_fleet(*src, now);
  if (!facts) return fail(kExitUsage, facts.error().message);
  sel.attempted = true;
  sel.source_errors = facts->source_errors;
  if (c.apply && src->kube_nodes && !facts->kube) {
    // The API server that must take the objects did not answer its read: applying would fail the same way.
    const auto e = std::find_if(facts->source_errors.begin(), facts->source_errors.end(),
                                [](const std::string& m) { return m.rfind("kubernetes: ", 0) == 0; });
    return fail(kExitError, e != facts->source_errors.end() ? *e : "kubernetes: no answer");
  }
  if (facts->metrics.empty() && !facts->kube) {
    sel.reason = "no fleet source answered";  // each source's error is printed (and in "errors")
    return std::nullopt;
  }
  allocator::RankOptions ro;
  ro.idle = src->idle;
  ro.now = now;
  ro.max_age = src->max_age;
  const auto sums = allocator::summarize(*facts, ro);
  auto choice = allocator::select_node(sums, need, src->fallback, resources.empty() ? "" : resources.front());
  for (const auto& cand : choice.candidates)
    if (choice.node && cand.node == *choice.node) sel.node_resource = cand.summary->gpu_resource;
  sel.source_failed = choice.source_failed;
  sel.node = std::move(choice.node);
  sel.reason = std::move(choice.reason);
  sel.reasoning = std::move(choice.reasoning);
  sel.fallback_used = choice.fallback_used;
  return std::nullopt;
}

// The reasoning, on stderr: stdout carries the manifest (or the apply lines, or JSON).
void print_reasoning(const ClusterCommand& c, const Selection& sel, const cluster::PlaceResult& result) {
  for (const auto& e : sel.source_errors) print_error("cluster place: " + platform::printable(e));
  if (!c.json) {
    for (const auto& line : sel.reasoning) std::fprintf(stderr, "%s\n", platform::printable(line).c_str());
    if (!sel.node)
      std::fprintf(stderr, "No node pinned: %s; the Kubernetes scheduler decides.\n",
                   platform::printable(sel.reason).c_str());
    for (const auto& d : result.documents) {
      if (!d.placeable && d.notes.empty()) continue;
      if (d.placeable)
        std::fprintf(stderr, "%s: %u GPU(s) on one node (%s: %s)\n", platform::printable(document_name(d)).c_str(),
                     d.gpus_on_node, std::string(cluster::gpu_source_name(d.gpu_source)).c_str(),
                     platform::printable(d.gpu_detail).c_str());
      else
        std::fprintf(stderr, "%s: not placed\n", platform::printable(document_name(d)).c_str());
      for (const auto& ch : d.changes) std::fprintf(stderr, "  - %s\n", platform::printable(ch).c_str());
      for (const auto& n : d.notes) std::fprintf(stderr, "  note: %s\n", platform::printable(n).c_str());
    }
  }
  std::fflush(stderr);
}

// The --json document (without what --apply adds to each document).
json place_json(const ClusterCommand& c, const Selection& sel, unsigned need, const std::vector<std::string>& resources,
                const cluster::PlaceResult& result, const std::string& default_ns) {
  json out;
  out["node"] = sel.node ? json(*sel.node) : json();
  out["reason"] = sel.reason;
  out["gpu_selection"] = !c.no_gpu_selection;
  out["required_gpus"] = need;
  out["fallback_used"] = sel.fallback_used;
  out["source_failed"] = sel.source_failed;
  out["gpu_resource"] = resources.size() == 1 ? json(resources.front()) : json();
  out["reasoning"] = sel.reasoning;
  out["errors"] = sel.source_errors;
  out["documents"] = json::array();
  for (const auto& d : result.documents) {
    std::string ns = d.namespace_name.empty() ? default_ns : d.namespace_name;
    if (c.apply && ns.empty()) ns = "default";
    out["documents"].push_back(document_json(d, sel.node, ns));
  }
  return out;
}

// --apply: each document through the API server (server-side apply), in order, stopping at the first
// failure. Records what happened to each in out["documents"]; the exit status.
int apply_documents(const ClusterCommand& c, const ApplyTarget& target, const Selection& sel,
                    const cluster::PlaceResult& result, json& out) {
  cluster::KubeOptions ko;
  if (c.timeout_s) ko.timeout = std::chrono::milliseconds(static_cast<long long>(*c.timeout_s * 1000));
  cluster::KubeClient client(*target.api, ko);
  for (std::size_t i = 0; i < result.documents.size(); ++i) {
    const auto& d = result.documents[i];
    auto rq = cluster::apply_request(d, target.default_ns);
    if (!rq) return fail(kExitUsage, rq.error().message);  // checked above on the same names; kept for safety
    auto r = client.request(rq->method, rq->path, rq->body, rq->content_type);
    if (!r) return fail(kExitError, r.error().message);
    if (r->status != 200 && r->status != 201) {
      const auto rbac = fmt::format("create and patch {} in namespace {}", rq->plural, rq->namespace_name);
      return fail(kExitError,
                  cluster::describe_status_error(*target.api, r->status, rq->method, rq->path, r->body, rbac));
    }
    const bool created = r->status == 201;
    out["documents"][i]["applied"] = created ? "created" : "updated";
    out["documents"][i]["status"] = r->status;
    if (c.json) continue;
    const std::string where =
        sel.node && d.placeable ? fmt::format("on node '{}'", *sel.node)
        : d.placeable
            ? fmt::format("(no node pinned: {}; the Kubernetes scheduler decides)", sel.reason)
            : std::string("(no node pinned: it has no single-node pod spec; the Kubernetes scheduler decides)");
    std::printf("%s %s '%s' in namespace '%s' %s\n", created ? "Created" : "Updated",
                platform::printable(d.kind).c_str(), platform::printable(d.name).c_str(),
                platform::printable(rq->namespace_name).c_str(), platform::printable(where).c_str());
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace

int run_cluster_place(const ClusterCommand& c, const KubeEnvironment& env) {
  auto text = read_manifest(c.manifest);
  if (!text) return fail(kExitUsage, text.error().message);

  cluster::PlaceOptions options;
  options.gpus = c.place_gpus;
  auto described = cluster::place_manifest(*text, options);
  if (!described) return fail(kExitUsage, described.error().message);
  const unsigned need = described->gpus_on_node();
  // The GPU resource the manifest asks for decides the vendor: amd.com/gpu only on AMD nodes, and so on.
  const auto resources = described->gpu_resources();

  ApplyTarget target;
  std::vector<std::string> said;  // warnings printed already (the same API server is asked for the fleet)
  if (auto code = settle_target(c, env, *described, target, said)) return *code;
  Selection sel;
  if (auto code = choose_node(c, env, need, resources, said, sel)) return *code;

  const cluster::PlaceResult* result = &*described;
  std::optional<cluster::PlaceResult> pinned;
  if (sel.node) {
    options.node = sel.node;
    // A GPU limit added where the manifest asks for none names the node's own resource.
    if (!sel.node_resource.empty()) options.gpu_resource = sel.node_resource;
    auto p = cluster::place_manifest(*text, options);
    if (!p) return fail(kExitError, "pinning to node '" + *sel.node + "': " + p.error().message);
    pinned = std::move(*p);
    result = &*pinned;
  }
  print_reasoning(c, sel, *result);
  json out = place_json(c, sel, need, resources, *result, target.default_ns);

  int code = kExitOk;
  if (!c.output.empty()) {
    if (auto w = write_output(c.output, result->output); !w) return fail(kExitError, w.error().message);
  }
  if (c.apply) {
    code = apply_documents(c, target, sel, *result, out);
  } else if (c.output.empty() && !c.json) {
    std::fwrite(result->output.data(), 1, result->output.size(), stdout);
  }
  if (c.json) {
    if (!c.apply && c.output.empty()) out["manifest"] = result->output;
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  }
  std::fflush(stdout);
  return code;
}

}  // namespace gf::app
