#pragma once
// ObjectText: a JSON object rendered once, with where each of its top-level members lies in the text,
// so that a request can add a few members (a reading's "stale" and "age_s", a "message") without
// parsing the text or rendering the object again. The text, with or without the added members, is byte
// for byte what nlohmann::json's dump() gives for the same object (keys in its order, invalid UTF-8
// replaced). Immutable once made; any thread may read it.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gf::wire {

class ObjectText {
 public:
  // `object` must be a JSON object.
  explicit ObjectText(const nlohmann::json& object);

  const std::shared_ptr<const std::string>& text() const noexcept { return text_; }
  // The object with the members of `extra` (an object) added; a key it already has takes the new value.
  std::shared_ptr<const std::string> with(const nlohmann::json& extra) const;

 private:
  struct Member {
    std::string key;
    std::size_t begin;  // its opening quote
    std::size_t end;    // one past its value
  };
  std::shared_ptr<const std::string> text_;
  std::vector<Member> members_;  // in the text's (the keys') order
};

// One JSON value as text, as json_response and the agent's documents render it.
std::string dump_json(const nlohmann::json& j);

}  // namespace gf::wire
