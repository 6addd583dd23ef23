#include "wire/object_text.hpp"

namespace gf::wire {

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ObjectText::ObjectText(const nlohmann::json& object) {
  auto text = std::make_shared<std::string>(1, '{');
  members_.reserve(object.size());
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (text->size() > 1) text->push_back(',');
    const std::size_t begin = text->size();
    *text += dump_json(it.key());
    text->push_back(':');
    *text += dump_json(it.value());
    members_.push_back({it.key(), begin, text->size()});
  }
  text->push_back('}');
  text_ = std::move(text);
}

std::shared_ptr<const std::string> ObjectText::with(const nlohmann::json& extra) const {
  const std::string& t = *text_;
  auto out = std::make_shared<std::string>();
  out->reserve(t.size() + 32 * extra.size());
  std::size_t copied = 0;  // t is in `out` up to here
  auto m = members_.begin();
  // Both lists are in key order (nlohmann::json's objects are sorted): one merge.
  for (auto e = extra.begin(); e != extra.end(); ++e) {
    while (m != members_.end() && m->key < e.key()) ++m;
    std::string member = dump_json(e.key()) + ':' + dump_json(e.value());
    if (m != members_.end() && m->key == e.key()) {  // replaces that member
      out->append(t, copied, m->begin - copied);
      *out += member;
      copied = m->end;
      ++m;
    } else if (m != members_.end()) {  // before that member
      out->append(t, copied, m->begin - copied);
      *out += member;
      out->push_back(',');
      copied = m->begin;
    } else {  // at the end
      out->append(t, copied, t.size() - 1 - copied);
      if (out->back() != '{') out->push_back(',');
      *out += member;
      copied = t.size() - 1;
    }
  }
  out->append(t, copied, std::string::npos);
  return out;
}

}  // namespace gf::wire
