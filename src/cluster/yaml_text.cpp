#include "cluster/yaml_text.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

namespace gf::cluster {

namespace {

bool is_marker(std::string_view line, std::string_view marker) {
  if (line.substr(0, 3) != marker) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

bool is_blank_or_comment(std::string_view line) {
  const auto first = line.find_first_not_of(" \t\r");
  return first == std::string_view::npos || line[first] == '#';
}

// `---` followed by nothing but blanks or a comment: the document's content starts on a later line.
bool is_bare_start_marker(std::string_view line) {
  if (!is_marker(line, "---")) return false;
  return is_blank_or_comment(line.substr(3));
}

std::string_view chunk_prefix(std::string_view chunk) {
  std::size_t pos = 0;
  while (pos < chunk.size()) {
    const auto nl = chunk.find('\n', pos);
    const auto end = nl == std::string_view::npos ? chunk.size() : nl + 1;
    const auto line = chunk.substr(pos, end - pos - (nl == std::string_view::npos ? 0 : 1));
    if (!is_blank_or_comment(line) && !is_bare_start_marker(line)) break;
    pos = end;
  }
  return chunk.substr(0, pos);
}

// YAML 1.1 (what Kubernetes' sigs.k8s.io/yaml resolves) and 1.2 core schema forms of booleans, null and
// numbers. Over-inclusive on purpose: it only makes same_yaml_meaning stricter.
bool looks_typed(std::string_view s) {
  static constexpr std::array<std::string_view, 31> kWords = {
      "true", "True", "TRUE", "false", "False", "FALSE", "yes",  "Yes",  "YES", "no", "No",
      "NO",   "on",   "On",   "ON",    "off",   "Off",   "OFF",  "y",    "Y",   "n",  "N",
      "null", "Null", "NULL", "~",     ".inf",  ".Inf",  ".INF", ".nan", ".NaN"};
  if (s.empty()) return true;
  if (std::find(kWords.begin(), kWords.end(), s) != kWords.end()) return true;
  std::string_view body = s;
  if (body.front() == '+' || body.front() == '-') body.remove_prefix(1);
  if (body.empty()) return false;
  if (body == ".inf" || body == ".Inf" || body == ".INF") return true;
  // Numbers: digits with optional '.', exponent, '_', ':' (sexagesimal), 0x/0o/0b prefixes.
  if (!(std::isdigit(static_cast<unsigned char>(body.front())) || body.front() == '.')) return false;
  return std::all_of(body.begin(), body.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' || c == 'x' || c == 'o' ||
           c == 'b' || c == 'e' || c == 'E' || c == '+' || c == '-';
  });
}

// Parsed plain scalars carry the tag "?"; scalars built in code carry none and are written plain too.
bool is_plain(const YAML::Node& n) { return n.Tag() == "?" || n.Tag().empty(); }
// A scalar is a string unless it is plain and reads as a number, boolean or null.
bool is_string(const YAML::Node& n) { return !is_plain(n) || !looks_typed(n.Scalar()); }

// A literal block (`|`) is only chosen where yaml-cpp writes one that reads back as the same text: one
// final newline (clip chomping), no leading blank on the first line, printable characters only.
bool literal_reads_back(const std::string& s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n') return false;
  if (s.front() == ' ' || s.front() == '\t' || s.front() == '\n') return false;
  return std::none_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n') || u == 0x7f;
  });
}

YAML::Node quoted_scalar(const std::string& s) {
  YAML::Node n(s);
  n.SetTag("!");
  return n;
}

void emit_tag(YAML::Emitter& out, const std::string& tag) {
  if (tag.empty() || tag == "?" || tag == "!") return;
  constexpr std::string_view kCore = "tag:yaml.org,2002:";
  if (tag.rfind(kCore, 0) == 0) {
    out << YAML::SecondaryTag(tag.substr(kCore.size()));
  } else if (tag.front() == '!') {
    out << YAML::LocalTag(tag.substr(1));
  } else {
    out << YAML::VerbatimTag(tag);
  }
}

struct Writer {
  YAML::Emitter& out;
  bool literal_blocks;
  std::size_t budget;

  bool write(const YAML::Node& n, bool as_key) {
    if (budget == 0) return false;
    --budget;
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        emit_tag(out, n.Tag());
        out << YAML::Null;
        return true;
      case YAML::NodeType::Scalar: {
        emit_tag(out, n.Tag());
        const std::string& s = n.Scalar();
        if (!is_plain(n)) {
          if (!as_key && literal_blocks && literal_reads_back(s)) {
            // yaml-cpp ends a literal block with a line break of its own; the text's final one is
            // left to the block's clip chomping, or a blank line would follow every block.
            out << YAML::Literal << s.substr(0, s.size() - 1);
            return true;
          } else {
            out << YAML::DoubleQuoted;
          }
        }
        out << s;
        return true;
      }
      case YAML::NodeType::Sequence:
        emit_tag(out, n.Tag());
        if (n.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
        out << YAML::BeginSeq;
        for (const auto& item : n) {
          if (!write(item, false)) return false;
        }
        out << YAML::EndSeq;
        return true;
      case YAML::NodeType::Map:
        emit_tag(out, n.Tag());
        if (n.Style() == YAML::EmitterStyle::Flow) out << YAML::Flow;
        out << YAML::BeginMap;
        for (const auto& kv : n) {
          out << YAML::Key;
          if (!write(kv.first, true)) return false;
          out << YAML::Value;
          if (!write(kv.second, false)) return false;
        }
        out << YAML::EndMap;
        return true;
    }
    return true;
  }
};

Result<std::string> emit_once(const YAML::Node& doc, std::size_t max_nodes, bool literal_blocks) {
  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  Writer w{out, literal_blocks, max_nodes};
  if (!w.write(doc, false)) {
    return make_error(fmt::format("the document has more than {} nodes once its aliases are written out", max_nodes));
  }
  if (!out.good()) return make_error(fmt::format("cannot write the document as YAML: {}", out.GetLastError()));
  std::string text = out.c_str();
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

bool same_meaning(const YAML::Node& a, const YAML::Node& b, std::size_t& budget) {
  if (budget == 0) return false;
  --budget;
  const auto kind = [](const YAML::Node& n) {
    return n.Type() == YAML::NodeType::Undefined ? YAML::NodeType::Null : n.Type();
  };
  if (kind(a) != kind(b)) return false;
  switch (kind(a)) {
    case YAML::NodeType::Scalar: return a.Scalar() == b.Scalar() && is_string(a) == is_string(b);
    case YAML::NodeType::Sequence:
    case YAML::NodeType::Map: {
      if (a.size() != b.size()) return false;
      auto ia = a.begin();
      auto ib = b.begin();
      for (; ia != a.end() && ib != b.end(); ++ia, ++ib) {
        if (kind(a) == YAML::NodeType::Sequence) {
          if (!same_meaning(*ia, *ib, budget)) return false;
        } else if (!same_meaning(ia->first, ib->first, budget) || !same_meaning(ia->second, ib->second, budget)) {
          return false;
        }
      }
      return true;
    }
    default: return true;
  }
}

}  // namespace

std::vector<YamlChunk> split_yaml_documents(std::string_view text) {
  std::vector<YamlChunk> chunks;
  auto close = [&](std::size_t from, std::size_t to, bool ends_document) {
    if (to <= from) return;
    const auto chunk = text.substr(from, to - from);
    chunks.push_back(YamlChunk{chunk, chunk_prefix(chunk), ends_document});
  };
  std::size_t chunk_start = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const auto end = nl == std::string_view::npos ? text.size() : nl + 1;
    const auto line = text.substr(pos, end - pos - (nl == std::string_view::npos ? 0 : 1));
    if (is_marker(line, "---")) {
      close(chunk_start, pos, false);
      chunk_start = pos;
    } else if (is_marker(line, "...")) {
      close(chunk_start, end, true);
      chunk_start = end;
    }
    pos = end;
  }
  close(chunk_start, text.size(), false);
  return chunks;
}

Result<std::string> emit_yaml_document(const YAML::Node& doc, std::size_t max_nodes) {
  // yaml-cpp's literal blocks are right for the cases literal_reads_back admits; the read-back check
  // makes sure, and quoted scalars (always exact) are the fallback.
  for (const bool literal_blocks : {true, false}) {
    auto text = emit_once(doc, max_nodes, literal_blocks);
    if (!text) return text;
    try {
      const YAML::Node back = YAML::Load(*text);
      if (same_yaml_meaning(doc, back, max_nodes)) return text;
    } catch (const YAML::Exception&) {
      // fall through to the next form
    }
  }
  return make_error("the changed document does not read back the same when written as YAML");
}

bool same_yaml_meaning(const YAML::Node& a, const YAML::Node& b, std::size_t max_nodes) {
  std::size_t budget = max_nodes;
  return same_meaning(a, b, budget);
}

YAML::Node json_to_yaml(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      YAML::Node m(YAML::NodeType::Map);
      for (const auto& [k, v] : j.items()) m.force_insert(quoted_scalar(k), json_to_yaml(v));
      return m;
    }
    case nlohmann::ordered_json::value_t::array: {
      YAML::Node s(YAML::NodeType::Sequence);
      for (const auto& v : j) s.push_back(json_to_yaml(v));
      return s;
    }
    case nlohmann::ordered_json::value_t::string: return quoted_scalar(j.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::null: return YAML::Node(YAML::NodeType::Null);
    default: return YAML::Node(j.dump());  // numbers and booleans, as plain scalars
  }
}

nlohmann::ordered_json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& kv : n) {
        const auto key = kv.first.IsScalar() ? kv.first.Scalar() : yaml_to_json(kv.first).dump();
        o[key] = yaml_to_json(kv.second);
      }
      return o;
    }
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::ordered_json::array();
      for (const auto& item : n) a.push_back(yaml_to_json(item));
      return a;
    }
    case YAML::NodeType::Scalar: {
      if (is_plain(n)) {
        auto literal = nlohmann::ordered_json::parse(n.Scalar(), nullptr, false);
        if (!literal.is_discarded() && literal.is_primitive() && !literal.is_string()) return literal;
      }
      return n.Scalar();
    }
    default: return nullptr;
  }
}

YAML::Node string_scalar(const std::string& s) {
  YAML::Node n(s);
  if (looks_typed(s)) n.SetTag("!");  // written quoted; other strings read back as strings when plain
  return n;
}

}  // namespace gf::cluster
