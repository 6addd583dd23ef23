// TaskValue and its one door to JSON: the JSON library is used here only, so nothing that includes
// estimate/ headers sees it.
#include "estimate/task.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gf::estimate {
namespace {

using nlohmann::json;

// From the JSON library's value; depth counts the containers above v.
Result<TaskValue> from_json(const json& v, std::size_t depth) {
  switch (v.type()) {
    case json::value_t::null: return TaskValue();
    case json::value_t::boolean: return TaskValue(v.get<bool>());
    case json::value_t::number_unsigned: return TaskValue(v.get<std::uint64_t>());
    case json::value_t::number_integer: return TaskValue(v.get<std::int64_t>());
    case json::value_t::number_float: return TaskValue(v.get<double>());
    case json::value_t::string: return TaskValue(v.get<std::string>());
    case json::value_t::array:
    case json::value_t::object: {
      if (depth >= kMaxTaskDepth)
        return make_error(ErrorKind::Invalid, fmt::format("nested deeper than {} levels", kMaxTaskDepth));
      if (v.is_array()) {
        TaskValue::List out;
        out.reserve(v.size());
        for (const auto& e : v) {
          auto t = from_json(e, depth + 1);
          if (!t) return t.error();
          out.push_back(std::move(*t));
        }
        return TaskValue(std::move(out));
      }
      TaskValue::Object out;
      out.reserve(v.size());
      for (auto it = v.begin(); it != v.end(); ++it) {  // already sorted by key, each key once
        auto t = from_json(it.value(), depth + 1);
        if (!t) return t.error();
        out.push_back({it.key(), std::move(*t)});
      }
      return TaskValue::object(std::move(out));
    }
    case json::value_t::binary:
    case json::value_t::discarded: break;
  }
  return make_error(ErrorKind::Invalid, "not a JSON value");
}

json to_json(const TaskValue& v) {
  if (v.is_null()) return nullptr;
  if (v.is_boolean()) return v.get_bool();
  if (v.is_number_unsigned()) return v.get_uint();
  if (v.is_number_integer()) return v.get_int();
  if (v.is_number_float()) return v.get_double();
  if (v.is_string()) return v.get_string();
  if (v.is_array()) {
    json out = json::array();
    for (const auto& e : v.list()) out.push_back(to_json(e));
    return out;
  }
  json out = json::object();
  for (const auto& m : v.members()) out[m.key] = to_json(m.value);
  return out;
}

}  // namespace

TaskValue::TaskValue(std::int64_t n) {
  if (n >= 0)
    v_ = static_cast<std::uint64_t>(n);
  else
    v_ = n;
}

TaskValue TaskValue::object() { return object(Object{}); }

TaskValue TaskValue::object(Object members) {
  // Stable: of equal keys, the last one given ends up last, and is the one kept.
  std::stable_sort(members.begin(), members.end(), [](const Member& a, const Member& b) { return a.key < b.key; });
  Object unique;
  unique.reserve(members.size());
  for (auto& m : members) {
    if (!unique.empty() && unique.back().key == m.key)
      unique.back().value = std::move(m.value);
    else
      unique.push_back(std::move(m));
  }
  TaskValue t;
  t.v_ = std::move(unique);
  return t;
}

double TaskValue::get_double() const {
  if (const auto* u = std::get_if<std::uint64_t>(&v_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
  return std::get<double>(v_);
}

std::size_t TaskValue::size() const noexcept {
  if (const auto* l = std::get_if<List>(&v_)) return l->size();
  if (const auto* o = std::get_if<Object>(&v_)) return o->size();
  return 0;
}

const TaskValue* TaskValue::find(std::string_view key) const {
  const auto* o = std::get_if<Object>(&v_);
  if (!o) return nullptr;
  const auto it =
      std::lower_bound(o->begin(), o->end(), key, [](const Member& m, std::string_view k) { return m.key < k; });
  return it != o->end() && it->key == key ? &it->value : nullptr;
}

void TaskValue::set(std::string key, TaskValue value) {
  if (is_null()) v_ = Object{};
  auto& o = std::get<Object>(v_);
  const auto it =
      std::lower_bound(o.begin(), o.end(), key, [](const Member& m, const std::string& k) { return m.key < k; });
  if (it != o.end() && it->key == key)
    it->value = std::move(value);
  else
    o.insert(it, Member{std::move(key), std::move(value)});
}

Result<TaskValue> parse_task(std::string_view json_text) {
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return make_error(ErrorKind::Invalid, fmt::format("task file: invalid JSON: {}", e.what()));
  }
  if (!j.is_object()) {
    // Described without walking it: a list may be nested far deeper than a TaskValue may be.
    const std::string what = j.is_array() ? fmt::format("a list of {}", j.size()) : describe_value(*from_json(j, 0));
    return make_error(ErrorKind::Invalid, fmt::format("task: expected a JSON object, got {}", what));
  }
  auto t = from_json(j, 0);
  if (!t) return make_error(ErrorKind::Invalid, "task file: " + t.error().message);
  return t;
}

std::string to_json_text(const TaskValue& v) { return to_json(v).dump(-1, ' ', false, json::error_handler_t::replace); }

std::optional<std::uint64_t> natural(const TaskValue& v) {
  if (v.is_number_unsigned()) return v.get_uint();  // every integer >= 0 is stored unsigned
  return std::nullopt;
}

std::string describe_value(const TaskValue& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return fmt::format("{} (a boolean)", v.get_bool() ? "true" : "false");
  if (v.is_number_unsigned()) return fmt::format("{}", v.get_uint());
  if (v.is_number_integer()) return fmt::format("{}", v.get_int());
  if (v.is_number_float()) {
    // fmt prints 2.0 as "2"; keep the point so that "expected an integer, got 2.0" makes sense.
    auto s = fmt::format("{}", v.get_double());
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  if (v.is_string()) {
    const auto& s = v.get_string();
    const bool cut = s.size() > 40;
    // replace: a string cut mid-character (or not UTF-8 at all) must not make dump() throw.
    return fmt::format("{}{} (a string)", json(s.substr(0, 40)).dump(-1, ' ', false, json::error_handler_t::replace),
                       cut ? "…" : "");
  }
  if (v.is_array()) return fmt::format("a list of {}", v.size());
  return "an object";
}

}  // namespace gf::estimate
