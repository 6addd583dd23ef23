#pragma once
// GPU requirement estimation for a job in the seed's task format:
//
//   {"model": {"id_or_path": "llama-3-70b"},
//    "parameters": {"tp-size": [1, 2, 4], "pp-size": [1], "dp-size": [1]},
//    "engine": "vllm"}                                  // optional; "base_runtime" is read too
//
// How many GPUs the job needs, and how much memory each of them should have free.
//
// GPU count. Without an engine, the seed's rule: world size = tp × pp × max(dp, cp, dcp). With
// "engine": "vllm" or "sglang" (or EstimateOptions::engine, which wins), that engine's own arithmetic,
// which differs (vLLM's decode context parallel reuses the tensor-parallel GPUs; SGLang's DP attention
// shares them) and rejects combinations the engine itself refuses to start with. The rules, and the
// engine versions they were checked against, are in estimate_engine.cpp.
//
// Lists. A parameter given as a list (a sweep) counts with its largest value, so an estimate of a
// whole task describes its largest configuration. `expand_grid` splits a task's parameters into one
// object of scalars per experiment; the estimate of one experiment is the estimate of the task with
// those parameters.
//
// Two methods. MemoryMethod::Weights (gpufleet's, the default) is described below. MemoryMethod::Seed is
// the seed's estimate_gpu_requirements exactly: the seed's world-size rule whatever the engine, and the
// seed's fixed table for memory, with no memory fraction. Tasks tuned to the seed's numbers keep them
// with it; the weights method says what a model really needs on a GPU.
//
// Memory per GPU, best source first: (a) the model's shape from config.json when
// model.id_or_path is a local directory holding one (Hugging Face format): parameter count → weight
// bytes divided across tp × pp, plus a KV-cache allowance and a runtime reserve; (b) the parameter
// count read from the name ("llama-3-70b", "Qwen2.5-7B-Instruct", "mixtral-8x7b", "125m") → weight
// bytes across tp × pp plus the reserve; (c) the seed's fixed table (70B/65B → 20000, 13B/7B → 12000,
// else 8000).
//
// Units: memory_mb_per_gpu is in MiB (2^20 bytes), like every GPU memory figure in gpufleet. The seed
// says "MB", but its numbers were compared with nvidia-smi's memory.free, which nvidia-smi labels MB
// and counts in MiB; the seed table's values are kept as they were.
//
// Thread-safety: the functions are pure apart from reading config.json through
// EstimateOptions::read_file; they may be called from any thread.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "estimate/task.hpp"

namespace gf::estimate {

enum class MemoryMethod { Weights, Seed };
std::string_view to_string(MemoryMethod m) noexcept;  // "weights", "seed"
// "weights" or "seed"; anything else is an error naming both.
Result<MemoryMethod> parse_memory_method(std::string_view text);

struct EstimateOptions {
  MemoryMethod method = MemoryMethod::Weights;

  // "vllm" or "sglang" (any case); overrides the task's "engine". Empty: the task decides. Anything
  // else is an error (the CLI offers only these two).
  std::string engine;

  // KV-cache allowance used with a config.json shape: this many tokens per sequence (a task's
  // max-model-len / context-length parameter replaces it) times this many sequences in flight.
  std::uint64_t kv_context_tokens = 4096;
  std::uint64_t kv_sequences = 8;

  // Runtime reserve per GPU on top of weights and KV cache: CUDA context, NCCL buffers, activations.
  std::uint64_t runtime_reserve_mib = 1024;
  double runtime_reserve_fraction = 0.10;  // of weights + KV cache

  // vLLM reserves --gpu-memory-utilization of each GPU's total memory; 0.9 in released vLLM
  // (vLLM's main branch has moved to 0.92).
  double vllm_default_memory_utilization = 0.9;

  // Reads a file (config.json), or nullopt when it cannot. Empty: the real filesystem. Tests and the
  // fuzzer put fixtures here.
  std::function<std::optional<std::string>(const std::string& path)> read_file;
};

struct Estimate {
  unsigned gpus = 1;
  std::uint64_t memory_mb_per_gpu = 0;  // MiB, despite the name (see the units note above)
  // Fraction of each GPU's total memory the engine reserves when it starts (vLLM's
  // gpu-memory-utilization, SGLang's mem-fraction-static). A GPU is only usable when its free memory
  // covers fraction × its own total, so the caller applies it to each real GPU: floor =
  // max(memory_mb_per_gpu, fraction × total). Unset when the engine has none, or picks it itself.
  std::optional<double> memory_fraction;
  std::string engine;       // the arithmetic applied: "vllm", "sglang" or "default" (the seed's rule)
  std::string method;       // "weights" or "seed"
  std::string explanation;  // the arithmetic, one step per line, no trailing newline
  // Parameters that look like a parallel size but are not one the estimator knows, e.g.
  // "tensor-parallel-sizes": one sentence each, naming the key and the spelling meant. They are ignored.
  std::vector<std::string> warnings;
};

// Errors (one, naming the offending key): the task is not an object; "parameters" is not an object;
// a parallel size that is not a positive integer or a non-empty list of them; a memory fraction
// outside (0, 1]; a combination the chosen engine refuses (e.g. vLLM with dcp not dividing tp).
// A missing "model" is not an error: the seed table's base value is used, and the explanation says so.
// The errors of the task are Invalid; an exception caught at this boundary is Failed ("estimate:
// internal error: …").
Result<Estimate> estimate(const TaskValue& task_config, const EstimateOptions& options = {});

// Parses JSON text (a task file, parse_task) and estimates it. Invalid JSON is an error giving the
// parser's position. Never throws, whatever the bytes.
Result<Estimate> estimate_text(std::string_view json_text, const EstimateOptions& options = {});

// The cartesian product of a task's parameters: one object of scalars per experiment. A list gives
// one value per element; any other value (a scalar, an object) is a single value. Order is
// deterministic: keys in the object's order, which for a TaskValue is sorted by key (not the
// document's order); the last key varies fastest. {} gives one empty experiment. Errors: not an
// object, an empty list (it would give no experiments; the error names the key), or more than
// max_combinations experiments.
Result<std::vector<TaskValue>> expand_grid(const TaskValue& parameters, std::size_t max_combinations = 100000);

}  // namespace gf::estimate
