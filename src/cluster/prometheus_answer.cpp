// The instant-query answer's parser (see prometheus_source.hpp): nlohmann's SAX events straight into
// PromSamples. A tree of 80 000 results (the answer for a fleet of 10 000 nodes × 8 GPUs) costs about
// ten times the time and memory of the samples themselves; the events cost nothing to keep.
//
// The checks and their order are the tree parser's: the status (and Prometheus' own error), the data
// object, the result type, the result array, then each entry in order (the first bad entry is the
// error). Keys may come in any order, so they are noted while reading and decided at the end.
#include <fmt/format.h>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "cluster/prometheus_source.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;

// Prometheus writes sample values as strings ("37", "1.5e+03", "NaN", "+Inf").
std::optional<double> number_text(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

// What a field held, for the checks at the end.
enum class Seen : std::uint8_t { None, Right, Wrong };  // absent, the expected JSON type, another type

class AnswerSax {
 public:
  // The containers open around the current value, innermost last.
  enum class Ctx : std::uint8_t { Top, Data, Result, Entry, Metric, Value, Skip };
  // What the next value is, from its container and key.
  enum class Slot : std::uint8_t {
    Root,
    Status,
    ErrorType,
    Error,
    Data,
    ResultType,
    Result,
    Entry,
    Metric,
    Value,
    Label,
    ValueItem,
    Ignore
  };

  bool null() { return scalar(nullptr, std::nullopt); }
  bool boolean(bool) { return scalar(nullptr, std::nullopt); }
  bool number_integer(json::number_integer_t v) { return scalar(nullptr, static_cast<double>(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(nullptr, static_cast<double>(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return scalar(nullptr, v); }
  bool string(json::string_t& v) { return scalar(&v, std::nullopt); }
  bool binary(json::binary_t&) { return scalar(nullptr, std::nullopt); }
  bool key(json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const json::exception&) { return false; }

  Result<std::vector<PromSample>> finish();

 private:
  Slot slot() const;
  bool scalar(json::string_t* text, std::optional<double> num);
  bool open(bool object);
  bool close();
  void label_error() {
    if (!label_error_) label_error_ = fmt::format("label {} is not a string", json(key_).dump());
  }

  std::vector<Ctx> stack_;
  std::string key_;
  bool root_object_ = false;
  Seen status_ = Seen::None, data_ = Seen::None, result_type_ = Seen::None, result_ = Seen::None;
  std::string status_text_, result_type_text_;
  std::optional<std::string> error_type_, error_;
  std::optional<std::string> first_entry_error_;
  // The entry being read.
  std::optional<std::string> label_error_;
  Seen metric_ = Seen::None, value_ = Seen::None;
  unsigned value_items_ = 0;
  std::optional<double> time_, sample_;
  PromSample current_;
  std::vector<PromSample> out_;
};

AnswerSax::Slot AnswerSax::slot() const {
  if (stack_.empty()) return Slot::Root;
  switch (stack_.back()) {
    case Ctx::Top:
      if (key_ == "status") return Slot::Status;
      if (key_ == "errorType") return Slot::ErrorType;
      if (key_ == "error") return Slot::Error;
      if (key_ == "data") return Slot::Data;
      return Slot::Ignore;
    case Ctx::Data:
      if (key_ == "resultType") return Slot::ResultType;
      if (key_ == "result") return Slot::Result;
      return Slot::Ignore;
    case Ctx::Result: return Slot::Entry;
    case Ctx::Entry:
      if (key_ == "metric") return Slot::Metric;
      if (key_ == "value") return Slot::Value;
      return Slot::Ignore;
    case Ctx::Metric: return Slot::Label;
    case Ctx::Value: return Slot::ValueItem;
    case Ctx::Skip: break;
  }
  return Slot::Ignore;
}

bool AnswerSax::scalar(json::string_t* text, std::optional<double> num) {
  switch (slot()) {
    case Slot::Root: break;  // not an object: decided at the end
    case Slot::Status:
      status_ = text ? Seen::Right : Seen::Wrong;
      if (text) status_text_ = std::move(*text);
      break;
    case Slot::ErrorType: error_type_ = text ? std::optional<std::string>(std::move(*text)) : std::nullopt; break;
    case Slot::Error: error_ = text ? std::optional<std::string>(std::move(*text)) : std::nullopt; break;
    case Slot::Data: data_ = Seen::Wrong; break;
    case Slot::ResultType:
      result_type_ = text ? Seen::Right : Seen::Wrong;
      result_type_text_ = text ? json(*text).dump() : num ? json(*num).dump() : std::string("a non-string");
      break;
    case Slot::Result: result_ = Seen::Wrong; break;
    case Slot::Entry:
      if (!first_entry_error_) first_entry_error_ = "a result entry is not an object";
      break;
    case Slot::Metric: metric_ = Seen::Wrong; break;
    case Slot::Value: value_ = Seen::Wrong; break;
    case Slot::Label:
      if (!text) {
        label_error();
        break;
      }
      if (!label_error_ && !first_entry_error_) current_.labels.set(std::move(key_), std::move(*text));
      break;
    case Slot::ValueItem: {
      const auto v = text ? number_text(*text) : num;
      if (value_items_ == 0) time_ = v;
      if (value_items_ == 1) sample_ = v;
      ++value_items_;
      break;
    }
    case Slot::Ignore: break;
  }
  return true;
}

bool AnswerSax::open(bool object) {
  Ctx ctx = Ctx::Skip;
  switch (slot()) {
    case Slot::Root:
      root_object_ = object;
      if (object) ctx = Ctx::Top;
      break;
    case Slot::Status: status_ = Seen::Wrong; break;
    case Slot::ErrorType: error_type_.reset(); break;
    case Slot::Error: error_.reset(); break;
    case Slot::Data:
      data_ = object ? Seen::Right : Seen::Wrong;
      if (object) ctx = Ctx::Data;
      break;
    case Slot::ResultType:
      result_type_ = Seen::Wrong;
      result_type_text_ = object ? "an object" : "an array";
      break;
    case Slot::Result:
      result_ = object ? Seen::Wrong : Seen::Right;
      if (!object) ctx = Ctx::Result;
      break;
    case Slot::Entry:
      if (!object) {
        if (!first_entry_error_) first_entry_error_ = "a result entry is not an object";
        break;
      }
      ctx = Ctx::Entry;
      label_error_.reset();
      metric_ = value_ = Seen::None;
      value_items_ = 0;
      time_.reset();
      sample_.reset();
      current_ = PromSample();
      break;
    case Slot::Metric:
      metric_ = object ? Seen::Right : Seen::Wrong;
      if (object) {
        ctx = Ctx::Metric;
        current_.labels = PromLabels();
      }
      break;
    case Slot::Value:
      value_ = object ? Seen::Wrong : Seen::Right;
      if (!object) {
        ctx = Ctx::Value;
        value_items_ = 0;
        time_.reset();
        sample_.reset();
      }
      break;
    case Slot::Label: label_error(); break;
    case Slot::ValueItem: ++value_items_; break;  // leaves that item's number unset
    case Slot::Ignore: break;
  }
  stack_.push_back(ctx);
  return true;
}

bool AnswerSax::close() {
  const Ctx ctx = stack_.back();
  stack_.pop_back();
  if (ctx != Ctx::Entry) return true;
  if (first_entry_error_) return true;  // the answer is refused: keep nothing more
  // In the tree parser's order: the metric, the pair, its numbers, the labels.
  if (metric_ != Seen::Right) {
    first_entry_error_ = "a result entry has no \"metric\" object";
  } else if (value_ != Seen::Right || value_items_ != 2) {
    first_entry_error_ = "a result entry has no [time, value] pair";
  } else if (!time_ || !sample_) {
    first_entry_error_ = "a sample's time or value is not a number";
  } else if (!std::isfinite(*sample_)) {
    // NaN and ±Inf samples are dropped, whatever their labels.
  } else if (label_error_) {
    first_entry_error_ = std::move(label_error_);
  } else {
    current_.value = *sample_;
    current_.timestamp_s = *time_;
    out_.push_back(std::move(current_));
  }
  current_ = PromSample();
  return true;
}

Result<std::vector<PromSample>> AnswerSax::finish() {
  if (!root_object_) return make_error("the answer is not a JSON object");
  if (status_ != Seen::Right) return make_error("the answer has no \"status\"");
  if (status_text_ != "success") {
    return make_error(fmt::format("Prometheus answered {}: {}: {}", json(status_text_).dump(),
                                  error_type_ ? *error_type_ : "(no errorType)", error_ ? *error_ : "(no error)"));
  }
  if (data_ != Seen::Right) return make_error("the answer has no \"data\" object");
  if (result_type_ != Seen::Right || result_type_text_ != "\"vector\"")
    return make_error(fmt::format("expected resultType \"vector\", got {}",
                                  result_type_ == Seen::None ? std::string("none") : result_type_text_));
  if (result_ != Seen::Right) return make_error("the answer has no \"result\" array");
  if (first_entry_error_) return make_error(*first_entry_error_);
  return std::move(out_);
}

}  // namespace

const std::string* PromLabels::find(std::string_view name) const noexcept {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

const std::string& PromLabels::at(std::string_view name) const {
  if (const auto* v = find(name)) return *v;
  throw std::out_of_range("no such label");
}

void PromLabels::set(std::string name, std::string value) {
  for (auto& [k, v] : items_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
}

Result<std::vector<PromSample>> parse_instant_query(std::string_view body) {
  AnswerSax sax;
  if (!json::sax_parse(body.begin(), body.end(), &sax)) return make_error("the answer is not JSON");
  return sax.finish();
}

}  // namespace gf::cluster
