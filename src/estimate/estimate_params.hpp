#pragma once
// Reading a task's "parameters" for estimation: every alias of each parallel size, scalars or lists,
// and the engine knobs that change the arithmetic (memory fractions, DP attention, context length,
// KV-cache dtype). Internal to gf_estimate (estimate.cpp); public for the tests.
//
// Every reader validates what it reads and names the key in its error; keys it does not know are
// ignored. A list counts with its largest value (the largest configuration of a sweep).
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.hpp"
#include "estimate/task.hpp"

namespace gf::estimate {

enum class Parallel { Tp, Pp, Dp, Cp, Dcp };

// Short name used in explanations ("tp", "pp", ...).
std::string_view parallel_name(Parallel p);
// Every key accepted for p, in the order checked: the seed's four forms first, then the Python
// keyword form (tensor_parallel_size), then any engine-specific names (vLLM's prefill context parallel
// for cp).
std::span<const std::string_view> parallel_aliases(Parallel p);

// Largest accepted value of a parallel size. Beyond this a value is surely a typo, and the products
// stay far from overflow.
inline constexpr unsigned kMaxParallelSize = 65536;

struct ParallelSize {
  unsigned value = 1;                   // 1 when no alias is present
  std::string key;                      // alias that supplied value; empty when absent
  bool from_list = false;               // value is the largest element of a list
  std::vector<std::string> other_keys;  // further aliases given for the same quantity
};

struct ParallelSizes {
  ParallelSize tp, pp, dp, cp, dcp;
  const ParallelSize& get(Parallel p) const;
  ParallelSize& get(Parallel p) { return const_cast<ParallelSize&>(std::as_const(*this).get(p)); }
};

// The parameter keys of `parameters` that look like a parallel size (…parallel-size…, tpsizes, "tps")
// but are none of parallel_aliases(): one warning each, naming the alias it most likely means. Keys of
// sizes the estimator deliberately does not count (expert parallel, vLLM's local data-parallel size)
// are left alone.
std::vector<std::string> unknown_parallel_keys(const TaskValue& parameters);

// `parameters` must be an object (the caller checks). Two aliases of one quantity: the largest value
// wins and other_keys records the rest (the explanation says so).
Result<ParallelSizes> read_parallel_sizes(const TaskValue& parameters);

template <class T>
struct Param {
  T value;
  std::string key;
  bool from_list = false;
};

// Largest value in (0, 1] under any of keys (a fraction of GPU memory).
Result<std::optional<Param<double>>> read_fraction(const TaskValue& parameters, std::span<const std::string_view> keys);
// A boolean switch (true/false, or a list of them). A list counts as on only when every element is
// true: a sweep that runs some experiments without the switch needs what those need.
Result<std::optional<Param<bool>>> read_switch(const TaskValue& parameters, std::span<const std::string_view> keys);
// Largest positive integer up to max_value under any of keys.
Result<std::optional<Param<std::uint64_t>>> read_positive(const TaskValue& parameters,
                                                          std::span<const std::string_view> keys,
                                                          std::uint64_t max_value);
// A string (or a list of strings; all are returned, for the caller to pick the most demanding).
Result<std::optional<Param<std::vector<std::string>>>> read_strings(const TaskValue& parameters,
                                                                    std::span<const std::string_view> keys);

}  // namespace gf::estimate
