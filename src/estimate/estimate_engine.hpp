#pragma once
// The engine-specific arithmetic of an estimate: which engine's rules apply, how many GPUs a
// parallel layout takes under them, and the fraction of each GPU the engine reserves. Internal to
// gf_estimate (estimate.cpp); public for the tests.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "estimate/estimate_params.hpp"

namespace gf::estimate {

enum class EngineKind { Default, Vllm, Sglang };

std::string_view engine_name(EngineKind e);  // "default", "vllm", "sglang"

struct EngineChoice {
  EngineKind kind = EngineKind::Default;
  std::string line;  // how it was chosen, for the explanation
};

// `option` (from --engine) wins over the task's "engine", which wins over its "base_runtime" (the
// autotuner's name for the same field). An unknown option is an error; an unknown engine named by
// the task falls back to the seed's rule, and the line says so.
Result<EngineChoice> choose_engine(const TaskValue& task, std::string_view option);

// Largest world size accepted; anything above is a typo, and unsigned arithmetic stays safe.
inline constexpr unsigned kMaxWorldSize = 1u << 20;

struct WorldSize {
  unsigned gpus = 1;
  unsigned weight_shards = 1;  // tp × pp: GPUs that one copy of the weights is split over
  unsigned kv_shards = 1;      // decode context parallel: ways the KV cache's tokens are split
  std::vector<std::string> lines;
};

// Errors for layouts the engine refuses to start with, naming the keys involved.
Result<WorldSize> world_size(EngineKind engine, const ParallelSizes& sizes, const TaskValue& parameters);

struct MemoryFraction {
  std::optional<double> value;
  std::vector<std::string> lines;
};

Result<MemoryFraction> memory_fraction(EngineKind engine, const TaskValue& parameters, double vllm_default);

}  // namespace gf::estimate
