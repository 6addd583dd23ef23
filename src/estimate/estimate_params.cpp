#include "estimate/estimate_params.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace gf::estimate {

namespace {

// The seed's four spellings of each quantity come first; the snake_case long form is how Python
// callers (vLLM's LLM(...), SGLang's Engine(...)) spell the same argument.
// Seed 002 also names the run-together form ("tpsize").
constexpr std::array<std::string_view, 6> kTp = {"tensor-parallel-size", "tp-size", "tp_size", "tp",
                                                 "tensor_parallel_size", "tpsize"};
constexpr std::array<std::string_view, 6> kPp = {"pipeline-parallel-size", "pp-size", "pp_size", "pp",
                                                 "pipeline_parallel_size", "ppsize"};
constexpr std::array<std::string_view, 6> kDp = {"data-parallel-size", "dp-size", "dp_size", "dp",
                                                 "data_parallel_size", "dpsize"};
// vLLM has no "context parallel" flag of its own; what it calls prefill context parallel
// (--prefill-context-parallel-size, -pcp) is the context parallelism that adds GPUs, so it is read as
// cp.
constexpr std::array<std::string_view, 12> kCp = {
    "context-parallel-size",         "cp-size",  "cp_size",  "cp",  "context_parallel_size",         "cpsize",
    "prefill-context-parallel-size", "pcp-size", "pcp_size", "pcp", "prefill_context_parallel_size", "pcpsize"};
constexpr std::array<std::string_view, 6> kDcp = {"decode-context-parallel-size", "dcp-size", "dcp_size", "dcp",
                                                  "decode_context_parallel_size", "dcpsize"};

std::string bad_value(std::string_view key, const TaskValue& v, std::string_view expected) {
  return fmt::format("parameter '{}': expected {}, got {}", key, expected, describe_value(v));
}

std::string bad_element(std::string_view key, std::size_t index, const TaskValue& v, std::string_view expected) {
  return fmt::format("parameter '{}': element {} of the list is {}; expected {}", key, index + 1, describe_value(v),
                     expected);
}

// Runs check(element) on a scalar value, or on every element of a list. check returns an empty
// string when the element is fine, else what was expected. Nested lists are not values.
template <class Check>
Result<void> each_value(std::string_view key, const TaskValue& v, std::string_view expected, Check&& check) {
  if (v.is_array()) {
    if (v.empty()) {
      return make_error(
          fmt::format("parameter '{}': empty list; expected {} or a non-empty list of them", key, expected));
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!check(v[i])) return make_error(bad_element(key, i, v[i], expected));
    }
    return {};
  }
  if (!check(v)) return make_error(bad_value(key, v, fmt::format("{} or a list of them", expected)));
  return {};
}

bool positive_at_most(const TaskValue& e, std::uint64_t max_value, std::uint64_t& out) {
  const auto n = natural(e);
  if (!n || *n == 0 || *n > max_value) return false;
  out = *n;
  return true;
}

}  // namespace

std::string_view parallel_name(Parallel p) {
  switch (p) {
    case Parallel::Tp: return "tp";
    case Parallel::Pp: return "pp";
    case Parallel::Dp: return "dp";
    case Parallel::Cp: return "cp";
    case Parallel::Dcp: return "dcp";
  }
  return "?";
}

std::span<const std::string_view> parallel_aliases(Parallel p) {
  switch (p) {
    case Parallel::Tp: return kTp;
    case Parallel::Pp: return kPp;
    case Parallel::Dp: return kDp;
    case Parallel::Cp: return kCp;
    case Parallel::Dcp: return kDcp;
  }
  return {};
}

const ParallelSize& ParallelSizes::get(Parallel p) const {
  switch (p) {
    case Parallel::Tp: return tp;
    case Parallel::Pp: return pp;
    case Parallel::Dp: return dp;
    case Parallel::Cp: return cp;
    case Parallel::Dcp: return dcp;
  }
  return tp;
}

namespace {

// Lower case, without '-' and '_': "Tensor-Parallel_Size" → "tensorparallelsize".
std::string squash(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (const char c : key) {
    if (c == '-' || c == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The quantity a suspicious key most likely means, by its words or its short form.
std::optional<Parallel> meant(const std::string& k) {
  if (k.find("decode") != std::string::npos || starts_with(k, "dcp")) return Parallel::Dcp;
  if (k.find("tensor") != std::string::npos || starts_with(k, "tp")) return Parallel::Tp;
  if (k.find("pipeline") != std::string::npos || starts_with(k, "pp")) return Parallel::Pp;
  if (k.find("context") != std::string::npos || starts_with(k, "cp") || starts_with(k, "pcp")) return Parallel::Cp;
  if (k.find("data") != std::string::npos || starts_with(k, "dp")) return Parallel::Dp;
  return std::nullopt;
}

}  // namespace

std::vector<std::string> unknown_parallel_keys(const TaskValue& parameters) {
  std::vector<std::string> out;
  if (!parameters.is_object()) return out;
  constexpr std::array kAll{Parallel::Tp, Parallel::Pp, Parallel::Dp, Parallel::Cp, Parallel::Dcp};
  for (const auto& member : parameters.members()) {
    const std::string& key = member.key;
    bool known = false;
    for (const Parallel p : kAll)
      for (const auto alias : parallel_aliases(p)) known = known || alias == key;
    if (known) continue;
    const std::string k = squash(key);
    // Sizes that do not add GPUs (expert parallelism shares the tensor-parallel GPUs; vLLM's local
    // data-parallel size is a share of dp) are not typos.
    if (k.find("expert") != std::string::npos || starts_with(k, "ep") || k.find("local") != std::string::npos) continue;
    const bool long_form = k.find("parallelsize") != std::string::npos || k.find("parallelsizes") != std::string::npos;
    bool short_form = false;
    for (const std::string_view s : {"tp", "pp", "dp", "cp", "dcp", "pcp"})
      for (const std::string_view tail : {"s", "sizes", "size"})
        short_form = short_form || k == fmt::format("{}{}", s, tail);
    if (!long_form && !short_form) continue;
    const auto p = meant(k);
    if (!p) continue;
    // A key whose squashed form is an alias's ("Tensor-Parallel-Size", "TP_SIZE") differs only in case.
    std::string_view suggestion = parallel_aliases(*p).front();
    out.push_back(
        fmt::format("parameter '{}' looks like a parallel size but is not one gpufleet reads; it is "
                    "ignored (did you mean '{}'?)",
                    key, suggestion));
  }
  return out;
}

Result<ParallelSizes> read_parallel_sizes(const TaskValue& parameters) {
  ParallelSizes out;
  for (const Parallel p : {Parallel::Tp, Parallel::Pp, Parallel::Dp, Parallel::Cp, Parallel::Dcp}) {
    auto& size = out.get(p);
    for (const std::string_view key : parallel_aliases(p)) {
      const auto* it = parameters.find(key);
      if (!it) continue;
      std::uint64_t largest = 0;
      const auto expected = fmt::format("a positive integer up to {}", kMaxParallelSize);
      auto ok = each_value(key, *it, expected, [&](const TaskValue& e) {
        std::uint64_t n = 0;
        if (!positive_at_most(e, kMaxParallelSize, n)) return false;
        largest = std::max(largest, n);
        return true;
      });
      if (!ok) return ok.error();
      if (size.key.empty()) {
        size.value = static_cast<unsigned>(largest);
        size.key = std::string(key);
        size.from_list = it->is_array();
      } else {
        // A second spelling of the same quantity: the task is ambiguous, and the largest value is the
        // one that cannot under-reserve. The explanation lists every key that was read.
        if (largest > size.value) {
          size.other_keys.push_back(size.key);
          size.value = static_cast<unsigned>(largest);
          size.key = std::string(key);
          size.from_list = it->is_array();
        } else {
          size.other_keys.emplace_back(key);
        }
      }
    }
  }
  return out;
}

Result<std::optional<Param<double>>> read_fraction(const TaskValue& parameters,
                                                   std::span<const std::string_view> keys) {
  std::optional<Param<double>> out;
  for (const std::string_view key : keys) {
    const auto* it = parameters.find(key);
    if (!it) continue;
    double largest = 0;
    auto ok = each_value(key, *it, "a number in (0, 1]", [&](const TaskValue& e) {
      if (!e.is_number()) return false;
      const double d = e.get_double();
      if (!std::isfinite(d) || d <= 0.0 || d > 1.0) return false;
      largest = std::max(largest, d);
      return true;
    });
    if (!ok) return ok.error();
    if (!out || largest > out->value) out = Param<double>{largest, std::string(key), it->is_array()};
  }
  return out;
}

Result<std::optional<Param<bool>>> read_switch(const TaskValue& parameters, std::span<const std::string_view> keys) {
  std::optional<Param<bool>> out;
  for (const std::string_view key : keys) {
    const auto* it = parameters.find(key);
    if (!it) continue;
    bool all_on = true;
    auto ok = each_value(key, *it, "true or false", [&](const TaskValue& e) {
      if (!e.is_boolean()) return false;
      all_on = all_on && e.get_bool();
      return true;
    });
    if (!ok) return ok.error();
    if (!out) {
      out = Param<bool>{all_on, std::string(key), it->is_array()};
    } else if (!all_on) {
      out->value = false;
      out->key = std::string(key);
    }
  }
  return out;
}

Result<std::optional<Param<std::uint64_t>>> read_positive(const TaskValue& parameters,
                                                          std::span<const std::string_view> keys,
                                                          std::uint64_t max_value) {
  std::optional<Param<std::uint64_t>> out;
  for (const std::string_view key : keys) {
    const auto* it = parameters.find(key);
    if (!it) continue;
    std::uint64_t largest = 0;
    auto ok = each_value(key, *it, fmt::format("a positive integer up to {}", max_value), [&](const TaskValue& e) {
      std::uint64_t n = 0;
      if (!positive_at_most(e, max_value, n)) return false;
      largest = std::max(largest, n);
      return true;
    });
    if (!ok) return ok.error();
    if (!out || largest > out->value) out = Param<std::uint64_t>{largest, std::string(key), it->is_array()};
  }
  return out;
}

Result<std::optional<Param<std::vector<std::string>>>> read_strings(const TaskValue& parameters,
                                                                    std::span<const std::string_view> keys) {
  std::optional<Param<std::vector<std::string>>> out;
  for (const std::string_view key : keys) {
    const auto* it = parameters.find(key);
    if (!it) continue;
    std::vector<std::string> values;
    auto ok = each_value(key, *it, "a string", [&](const TaskValue& e) {
      if (!e.is_string()) return false;
      values.push_back(e.get_string());
      return true;
    });
    if (!ok) return ok.error();
    if (!out) {
      out = Param<std::vector<std::string>>{std::move(values), std::string(key), it->is_array()};
    } else {
      out->value.insert(out->value.end(), values.begin(), values.end());
    }
  }
  return out;
}

}  // namespace gf::estimate
