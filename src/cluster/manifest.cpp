#include "cluster/manifest.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "cluster/pod_spec.hpp"
#include "cluster/yaml_text.hpp"
#include "estimate/estimate_engine.hpp"

namespace gf::cluster {

namespace {

std::optional<std::string> scalar_at(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      if (it->second.IsScalar()) return it->second.Scalar();
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<YAML::Node> map_at(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return std::nullopt;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key && it->second.IsMap()) return it->second;
  }
  return std::nullopt;
}

// "document 2 (Deployment "web")": how errors and notes name a document. Text from the document is
// escaped (describe_yaml), so nothing in it reaches a terminal raw.
std::string document_label(const DocumentPlacement& d) {
  std::string label = fmt::format("document {}", d.index + 1);
  if (!d.kind.empty()) {
    label += fmt::format(" ({}{}{})", describe_yaml(YAML::Node(d.kind)), d.name.empty() ? "" : " ",
                         d.name.empty() ? std::string() : describe_yaml(YAML::Node(d.name)));
  }
  return label;
}

// Fills in what a document is, finds its pod specs and GPU need, and applies the placement when
// options.node is set. The tree is edited in place; d.changed says whether anything was written.
Result<void> place_document(YAML::Node& doc, DocumentPlacement& d, const PlaceOptions& options) {
  if (!doc.IsMap()) {
    return make_error(
        fmt::format("{}: expected a mapping (a Kubernetes object), got {}", document_label(d), describe_yaml(doc)));
  }
  d.api_version = scalar_at(doc, "apiVersion").value_or("");
  d.kind = scalar_at(doc, "kind").value_or("");
  if (auto metadata = map_at(doc, "metadata")) {
    d.name = scalar_at(*metadata, "name").value_or("");
    d.namespace_name = scalar_at(*metadata, "namespace").value_or("");
  }
  auto specs = find_pod_specs(doc, d.api_version, d.kind);
  if (!specs) return make_error(fmt::format("{}: {}", document_label(d), specs.error().message));
  d.notes = std::move(specs->notes);

  std::vector<GpuSource> sources;
  std::vector<std::string> details;
  for (auto& spec : specs->specs) {
    if (spec.multi_node) {
      d.notes.push_back(
          fmt::format("{}: a multi-node engine (leader/worker) is not pinned: its pods belong on "
                      "several nodes; the scheduler places them",
                      spec.path));
      continue;
    }
    auto plan = plan_gpus(spec, options);
    if (!plan) return make_error(fmt::format("{}: {}", document_label(d), plan.error().message));
    d.placeable = true;
    d.pod_specs.push_back(spec.path);
    d.gpus += plan->gpus;
    d.gpus_on_node += plan->gpus * spec.replicas;
    sources.push_back(plan->source);
    details.push_back(fmt::format("{}: {}", spec.path, plan->detail));
    d.notes.insert(d.notes.end(), plan->notes.begin(), plan->notes.end());
    for (const auto& r : plan->resources)
      if (std::find(d.gpu_resources.begin(), d.gpu_resources.end(), r) == d.gpu_resources.end())
        d.gpu_resources.push_back(r);
    if (spec.replicas > 1) {
      d.notes.push_back(fmt::format("{}: {} replicas, all pinned to the one node", spec.path, spec.replicas));
    }
    if (!options.node) continue;
    const auto before = d.changes.size();
    auto pinned = pin_to_node(spec, *options.node, d.changes, d.notes);
    if (!pinned) return make_error(fmt::format("{}: {}", document_label(d), pinned.error().message));
    auto limited = add_gpu_limits(spec, *plan, d.changes);
    if (!limited) return make_error(fmt::format("{}: {}", document_label(d), limited.error().message));
    if (spec.detached && d.changes.size() > before) {
      // spec.engine was absent; find_pod_specs checked that spec is a mapping.
      for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (it->first.IsScalar() && it->first.Scalar() == "spec") it->second["engine"] = spec.pod;
      }
      d.changes.push_back("spec.engine: added to hold the affinity (OME merges it with the ServingRuntime's)");
    }
  }
  d.changed = !d.changes.empty();
  if (sources.empty()) {
    d.gpu_source = GpuSource::None;
  } else {
    // The weakest source of the pod specs speaks for the document (a guess in one makes it a guess).
    d.gpu_source = *std::max_element(sources.begin(), sources.end(), [](GpuSource a, GpuSource b) {
      return static_cast<int>(a) < static_cast<int>(b);
    });
    d.gpu_detail = fmt::format("{}", fmt::join(details, "; "));
  }
  return {};
}

std::size_t line_of(std::string_view text, std::size_t offset) {
  return static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

Result<PlaceResult> place_yaml(std::string_view text, const PlaceOptions& options) {
  PlaceResult result;
  result.format = ManifestFormat::Yaml;
  const auto chunks = split_yaml_documents(text);
  std::string output;
  std::size_t index = 0;
  for (const auto& chunk : chunks) {
    YAML::Node doc;
    try {
      doc = YAML::Load(std::string(chunk.text));
    } catch (const YAML::Exception& e) {
      const auto first_line = line_of(text, static_cast<std::size_t>(chunk.text.data() - text.data()));
      if (e.mark.is_null()) return make_error(fmt::format("not YAML: {}", e.msg));
      return make_error(fmt::format("not YAML: line {}, column {}: {}",
                                    first_line + static_cast<std::size_t>(e.mark.line) + 1, e.mark.column + 1, e.msg));
    }
    if (doc.IsNull()) {  // comments, directives or nothing: not a document of its own
      output += chunk.text;
      continue;
    }
    DocumentPlacement d;
    d.index = index++;
    auto placed = place_document(doc, d, options);
    if (!placed) return placed.error();
    if (d.changed) {
      auto emitted = emit_yaml_document(doc);
      if (!emitted) return make_error(fmt::format("{}: {}", document_label(d), emitted.error().message));
      std::string prefix(chunk.prefix);
      // `--- content` on one line: the marker is not part of the prefix, so it is written again.
      if (chunk.text.substr(0, 3) == "---" && prefix.find("---") == std::string::npos) prefix = "---\n" + prefix;
      d.text = std::move(*emitted);
      // A bare document may follow `...`: without the marker it would join this one.
      if (chunk.ends_document) d.text += "...\n";
      output += prefix;
      output += d.text;
    } else {
      d.text = std::string(chunk.text);
      output += chunk.text;
    }
    result.documents.push_back(std::move(d));
  }
  if (result.documents.empty()) return make_error("the manifest holds no document");
  result.output = result.changed() ? std::move(output) : std::string(text);
  return result;
}

// The input's indentation, to write JSON back the way it came: -1 (one line) when the object has no
// line breaks, else the blanks before the first key.
int json_indent(std::string_view text) {
  const auto nl = text.find('\n');
  if (nl == std::string_view::npos || text.find_first_not_of(" \t\r\n", nl) == std::string_view::npos) return -1;
  const auto next = text.find_first_not_of(' ', nl + 1);
  if (next == std::string_view::npos || text[next] == '}') return -1;
  return static_cast<int>(std::clamp<std::size_t>(next - nl - 1, 1, 8));
}

bool is_list(const nlohmann::ordered_json& j) {
  if (!j.is_object()) return false;
  const auto kind = j.find("kind"), items = j.find("items");
  return kind != j.end() && kind->is_string() && kind->get<std::string>() == "List" && items != j.end() &&
         items->is_array();
}

// `kind: List` (what `kubectl get -o json` writes): each item is placed as a document of its own (its
// text is the body --apply sends); the output is the List with the changed items replaced.
Result<PlaceResult> place_json_list(std::string_view text, const nlohmann::ordered_json& j,
                                    const PlaceOptions& options) {
  PlaceResult result;
  result.format = ManifestFormat::Json;
  const auto indent = json_indent(text);
  nlohmann::ordered_json out = j;
  auto& items = out["items"];
  for (std::size_t i = 0; i < items.size(); ++i) {
    YAML::Node doc = json_to_yaml(items[i]);
    DocumentPlacement d;
    d.index = i;
    auto placed = place_document(doc, d, options);
    if (!placed) return make_error(fmt::format("List items[{}]: {}", i, placed.error().message));
    if (d.changed) items[i] = yaml_to_json(doc);
    d.text = items[i].dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + '\n';
    result.documents.push_back(std::move(d));
  }
  // An empty List (what `kubectl get … -o json` writes when nothing matches) has nothing to pin and
  // passes through as it came.
  result.output = result.changed()
                      ? out.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + '\n'
                      : std::string(text);
  return result;
}

Result<PlaceResult> place_json(std::string_view text, const nlohmann::ordered_json& j, const PlaceOptions& options) {
  if (is_list(j)) return place_json_list(text, j, options);
  PlaceResult result;
  result.format = ManifestFormat::Json;
  YAML::Node doc = json_to_yaml(j);
  DocumentPlacement d;
  auto placed = place_document(doc, d, options);
  if (!placed) return placed.error();
  if (d.changed) {
    const auto indent = json_indent(text);
    d.text = yaml_to_json(doc).dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    d.text += '\n';
    result.output = d.text;
  } else {
    d.text = std::string(text);
    result.output = std::string(text);
  }
  result.documents.push_back(std::move(d));
  return result;
}

bool starts_like_json(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  const auto first = text.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && text[first] == '{';
}

bool dns_subdomain(std::string_view s, std::size_t max_size, bool dots) {
  if (s.empty() || s.size() > max_size) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || (dots && c == '.'); });
}

struct KindRoute {
  std::string_view kind, group, plural;
};
constexpr KindRoute kRoutes[] = {
    {"Pod", "", "pods"},
    {"Deployment", "apps", "deployments"},
    {"StatefulSet", "apps", "statefulsets"},
    {"Job", "batch", "jobs"},
    {"InferenceService", "ome.io", "inferenceservices"},
};

// Error text quotes the input (yaml-cpp's messages can carry a character of it): control characters
// are escaped so that one error stays one printable line.
Error printable(Error e) {
  std::string out;
  for (const char c : e.message) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return Error{std::move(out)};
}

Result<PlaceResult> place_checked(std::string_view text, const PlaceOptions& options) {
  if (options.gpus && (*options.gpus == 0 || *options.gpus > estimate::kMaxWorldSize)) {
    return make_error(fmt::format("--gpus {}: expected 1 to {}", *options.gpus, estimate::kMaxWorldSize));
  }
  if (options.node && !dns_subdomain(*options.node, 253, true)) {
    return make_error(
        fmt::format("node {}: not a valid Kubernetes node name", describe_yaml(YAML::Node(*options.node))));
  }
  try {
    if (starts_like_json(text)) {
      // A manifest that opens with `{` is JSON: a YAML reading of broken JSON would hide the mistake.
      try {
        return place_json(text, nlohmann::ordered_json::parse(text), options);
      } catch (const nlohmann::json::exception& e) {
        // parse_error for bad syntax, out_of_range for a number beyond a double (`1e999`): both are the
        // input's fault.
        std::string what = e.what();
        const auto at = what.find("parse error");
        return make_error(fmt::format("not JSON: {}", at == std::string::npos ? what : what.substr(at)));
      }
    }
    return place_yaml(text, options);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports misuse (an alias bomb's depth, a bad conversion) by throwing; keep it an error.
    return make_error(fmt::format("cannot read the manifest: {}", e.what()));
  }
}

}  // namespace

std::string_view gpu_source_name(GpuSource s) {
  switch (s) {
    case GpuSource::None: return "none";
    case GpuSource::Option: return "--gpus";
    case GpuSource::Limits: return "limits";
    case GpuSource::Requests: return "requests";
    case GpuSource::Parallel: return "parallel";
    case GpuSource::Default: return "default";
  }
  return "?";
}

bool PlaceResult::changed() const {
  return std::any_of(documents.begin(), documents.end(), [](const DocumentPlacement& d) { return d.changed; });
}

unsigned PlaceResult::gpus_on_node() const {
  unsigned most = 0;
  for (const auto& d : documents) {
    if (d.placeable) most = std::max(most, d.gpus_on_node);
  }
  return most;
}

std::vector<std::string> PlaceResult::gpu_resources() const {
  std::vector<std::string> out;
  for (const auto& d : documents) {
    if (!d.placeable) continue;
    for (const auto& r : d.gpu_resources)
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

Result<PlaceResult> place_manifest(std::string_view text, const PlaceOptions& options) {
  auto r = place_checked(text, options);
  if (!r) return printable(r.error());
  return r;
}

Result<ApplyRequest> apply_request(const DocumentPlacement& doc, std::string_view default_namespace,
                                   std::string_view field_manager, bool force) {
  const auto label = document_label(doc);
  const auto route =
      std::find_if(std::begin(kRoutes), std::end(kRoutes), [&](const KindRoute& r) { return r.kind == doc.kind; });
  if (route == std::end(kRoutes)) {
    return make_error(fmt::format("{}: gpufleet does not write objects of this kind", label));
  }
  ApplyRequest req;
  const auto slash = doc.api_version.find('/');
  req.group = slash == std::string::npos ? "" : doc.api_version.substr(0, slash);
  req.version = slash == std::string::npos ? doc.api_version : doc.api_version.substr(slash + 1);
  if (req.group != route->group || !dns_subdomain(req.version, 63, false)) {
    return make_error(fmt::format("{}: apiVersion {} is not one gpufleet writes for this kind (expected {}/…)", label,
                                  describe_yaml(YAML::Node(doc.api_version)),
                                  route->group.empty() ? "v1 without a group" : route->group));
  }
  req.plural = route->plural;
  req.name = doc.name;
  req.namespace_name = doc.namespace_name.empty() ? std::string(default_namespace) : doc.namespace_name;
  if (req.namespace_name.empty()) req.namespace_name = "default";
  if (!dns_subdomain(req.name, 253, true)) {
    return make_error(
        fmt::format("{}: metadata.name {} is missing or not a valid Kubernetes name (server-side "
                    "apply needs one)",
                    label, describe_yaml(YAML::Node(doc.name))));
  }
  if (!dns_subdomain(req.namespace_name, 63, false)) {
    return make_error(fmt::format("{}: namespace {} is not a valid Kubernetes name", label,
                                  describe_yaml(YAML::Node(req.namespace_name))));
  }
  const bool manager_ok = !field_manager.empty() && field_manager.size() <= 128 &&
                          std::all_of(field_manager.begin(), field_manager.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                          });
  if (!manager_ok) return make_error("field manager: letters, digits, '-', '_' and '.' only (at most 128)");
  const auto base =
      req.group.empty() ? fmt::format("/api/{}", req.version) : fmt::format("/apis/{}/{}", req.group, req.version);
  req.path = fmt::format("{}/namespaces/{}/{}/{}?fieldManager={}{}", base, req.namespace_name, req.plural, req.name,
                         field_manager, force ? "&force=true" : "");
  req.body = doc.text;
  return req;
}

}  // namespace gf::cluster
