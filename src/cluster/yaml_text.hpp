#pragma once
// Reading and writing manifest text for manifest.cpp: YAML split into documents, a yaml-cpp tree
// written back without changing what any scalar means, and JSON carried through the same tree.
// Internal to gf_cluster; public for the tests.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace gf::cluster {

// One document's share of a YAML stream. A line starting with `---` (then a space, a tab or the end
// of the line) starts a document; a line starting with `...` ends one. YAML forbids both at the
// start of a line inside content, so this split agrees with a YAML parser.
struct YamlChunk {
  std::string_view text;       // the whole chunk, marker line included
  std::string_view prefix;     // its leading blank lines, comment lines and a bare `---` line
  bool ends_document = false;  // closed by a `...` line: text written after it is a new document
};
std::vector<YamlChunk> split_yaml_documents(std::string_view text);

// Writes one document (no `---`, ends with a newline). Scalars that were quoted or block scalars in
// the source (yaml-cpp tags them "!") are written double-quoted, or as a literal block when that reads
// back the same; plain scalars stay plain; flow collections stay flow; block lists are indented under
// their key (yaml-cpp's one style). Aliases are written out in full; more than max_nodes nodes in all
// is an error (an alias bomb), not a hang. The text is read back and compared with doc before it is
// returned.
Result<std::string> emit_yaml_document(const YAML::Node& doc, std::size_t max_nodes = 250'000);

// Whether a and b mean the same: same shapes, same scalar text, and each scalar the same kind (a
// string, or a plain number/boolean/null). Bounded like emit_yaml_document.
bool same_yaml_meaning(const YAML::Node& a, const YAML::Node& b, std::size_t max_nodes = 250'000);

// JSON through the same tree: strings become quoted scalars, numbers, booleans and null plain ones.
YAML::Node json_to_yaml(const nlohmann::ordered_json& j);
// And back: quoted scalars are strings; plain scalars that are JSON literals (numbers, true, false,
// null) are those, other plain scalars strings.
nlohmann::ordered_json yaml_to_json(const YAML::Node& n);

// A scalar created by gpufleet that must stay a string whatever its text: written plain where that
// reads back as a string, quoted where it would read as a number, boolean or null ("123", "true").
YAML::Node string_scalar(const std::string& s);

}  // namespace gf::cluster
