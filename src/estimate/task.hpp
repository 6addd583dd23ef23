#pragma once
// TaskValue: a task file's contents as plain C++ values, so that estimation and the parameter grid
// depend on no JSON library. A task is read once at the edge (parse_task, here; the JSON library
// stays in task.cpp) and the estimate works on what it gave.
//
// The shapes are JSON's: null, a boolean, a number (a non-negative integer, a negative integer or a
// float, kept apart so that 2 and 2.0 stay different), a string, a list, an object. An object's
// members are kept sorted by key, each key once (the last one read wins), which is also the order in
// which expand_grid varies them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.hpp"

namespace gf::estimate {

class TaskValue {
 public:
  struct Member;
  using List = std::vector<TaskValue>;
  using Object = std::vector<Member>;  // sorted by key, unique keys

  // Implicit, like literals. Defined after Member (below): a constructor that builds the variant
  // needs Member complete.
  TaskValue() noexcept;                     // null
  TaskValue(std::nullptr_t) noexcept;       // NOLINT
  TaskValue(bool b);                        // NOLINT
  TaskValue(int n);                         // NOLINT
  TaskValue(unsigned n);                    // NOLINT
  TaskValue(std::int64_t n);                // NOLINT: stored unsigned when >= 0
  TaskValue(std::uint64_t n);               // NOLINT
  TaskValue(double d);                      // NOLINT
  TaskValue(const char* s);                 // NOLINT
  TaskValue(std::string s);                 // NOLINT
  TaskValue(List l);                        // NOLINT
  static TaskValue object();                // an empty object
  static TaskValue object(Object members);  // sorts, keeps the last of equal keys

  bool is_null() const noexcept { return v_.index() == 0; }
  bool is_boolean() const noexcept { return v_.index() == 1; }
  bool is_number() const noexcept { return v_.index() >= 2 && v_.index() <= 4; }
  bool is_number_integer() const noexcept { return v_.index() == 2 || v_.index() == 3; }  // either sign
  bool is_number_unsigned() const noexcept { return v_.index() == 3; }
  bool is_number_float() const noexcept { return v_.index() == 4; }
  bool is_string() const noexcept { return v_.index() == 5; }
  bool is_array() const noexcept { return v_.index() == 6; }
  bool is_object() const noexcept { return v_.index() == 7; }

  // Each accessor expects the matching is_…(); get_double() takes any number.
  bool get_bool() const { return std::get<bool>(v_); }
  std::int64_t get_int() const { return std::get<std::int64_t>(v_); }
  std::uint64_t get_uint() const { return std::get<std::uint64_t>(v_); }
  double get_double() const;
  const std::string& get_string() const { return std::get<std::string>(v_); }
  const List& list() const { return std::get<List>(v_); }
  const Object& members() const { return std::get<Object>(v_); }

  // Elements of a list or members of an object; 0 for anything else.
  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }
  const TaskValue& operator[](std::size_t i) const { return list()[i]; }
  // The member named key, or nullptr (also when this is not an object).
  const TaskValue* find(std::string_view key) const;
  // Adds or replaces a member; a null value becomes an empty object first. Expects an object or null.
  void set(std::string key, TaskValue value);

 private:
  std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string, List, Object> v_;
};

struct TaskValue::Member {
  std::string key;
  TaskValue value;
};

inline TaskValue::TaskValue() noexcept = default;
inline TaskValue::TaskValue(std::nullptr_t) noexcept {}
inline TaskValue::TaskValue(bool b) : v_(b) {}
inline TaskValue::TaskValue(int n) : TaskValue(static_cast<std::int64_t>(n)) {}
inline TaskValue::TaskValue(unsigned n) : v_(std::uint64_t{n}) {}
inline TaskValue::TaskValue(std::uint64_t n) : v_(n) {}
inline TaskValue::TaskValue(double d) : v_(d) {}
inline TaskValue::TaskValue(const char* s) : v_(std::string(s)) {}
inline TaskValue::TaskValue(std::string s) : v_(std::move(s)) {}
inline TaskValue::TaskValue(List l) : v_(std::move(l)) {}

// Containers nested deeper than this are refused: the estimate never needs them, and the recursion
// that would walk them stays bounded whatever a request body holds.
inline constexpr std::size_t kMaxTaskDepth = 64;

// Parses a task file's JSON text; a task is an object. Errors (Invalid), never an exception:
// "task file: invalid JSON: <the parser's message, with the position>", "task: expected a JSON
// object, got <describe_value of it>", "task file: nested deeper than 64 levels".
Result<TaskValue> parse_task(std::string_view json_text);

// Compact JSON text of a value (for labels and messages); invalid UTF-8 in strings is replaced.
std::string to_json_text(const TaskValue& v);

// A non-negative integer, whatever way it was written as an integer; nullopt for anything else,
// booleans and 2.0 included.
std::optional<std::uint64_t> natural(const TaskValue& v);

// A short, bounded, non-recursive description of a value for error messages: scalars as they are
// (strings quoted and cut at 40 bytes), containers by kind and size. Safe on hostile input.
std::string describe_value(const TaskValue& v);

}  // namespace gf::estimate
