// Estimation glue: engine → parallel sizes → GPU count; model → memory per GPU; and the explanation,
// which shows every number the result came from so a user can check it by hand.
#include "estimate/estimate.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "estimate/estimate_engine.hpp"
#include "estimate/estimate_params.hpp"
#include "estimate/model_size.hpp"
#include "platform/fs.hpp"

namespace gf::estimate {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// A per-GPU figure above this (an exbibyte) comes from a config no real model has.
constexpr double kMaxMib = 1e12;

constexpr std::array<std::string_view, 4> kContextKeys = {"max-model-len", "max_model_len", "context-length",
                                                          "context_length"};
constexpr std::uint64_t kMaxContextTokens = 1u << 24;
constexpr std::array<std::string_view, 2> kKvDtypeKeys = {"kv-cache-dtype", "kv_cache_dtype"};

std::string format_gb(double bytes) {
  const double gb = bytes / 1e9;
  return gb >= 10 ? fmt::format("{:.1f} GB", gb) : fmt::format("{:.2f} GB", gb);
}

std::uint64_t ceil_mib(double bytes) { return static_cast<std::uint64_t>(std::ceil(bytes / kMiB)); }

std::optional<double> kv_dtype_bytes(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.rfind("fp8", 0) == 0 || n == "int8") return 1.0;
  if (n == "fp4" || n == "nvfp4" || n.rfind("int4", 0) == 0) return 0.5;
  if (n == "bfloat16" || n == "float16" || n == "bf16" || n == "fp16" || n == "half") return 2.0;
  if (n == "float32" || n == "fp32" || n == "float") return 4.0;
  return std::nullopt;
}

struct Memory {
  std::uint64_t mib = 0;
  std::vector<std::string> lines;
};

struct Context {
  EngineKind engine;
  const WorldSize& world;
  const ParallelSizes& sizes;
  const TaskValue& parameters;
  const EstimateOptions& options;
};

// Adds the runtime reserve to weights + KV cache (whole MiB each, so the printed sum adds up).
void finish(Memory& m, const Context& c, std::uint64_t weights_mib, std::uint64_t kv_mib) {
  const auto share = static_cast<std::uint64_t>(
      std::ceil(c.options.runtime_reserve_fraction * static_cast<double>(weights_mib + kv_mib)));
  const std::uint64_t reserve = c.options.runtime_reserve_mib + share;
  m.lines.push_back(fmt::format("runtime reserve (CUDA context, activations): {} MiB + {:.0f} % of {} MiB = {} MiB",
                                c.options.runtime_reserve_mib, c.options.runtime_reserve_fraction * 100,
                                weights_mib + kv_mib, reserve));
  m.mib = weights_mib + kv_mib + reserve;
  if (kv_mib > 0) {
    m.lines.push_back(fmt::format("memory per GPU = weights {} + KV cache {} + reserve {} = {} MiB", weights_mib,
                                  kv_mib, reserve, m.mib));
  } else {
    m.lines.push_back(fmt::format("memory per GPU = weights {} + reserve {} = {} MiB", weights_mib, reserve, m.mib));
  }
}

// (a) From config.json's shape.
Result<Memory> from_shape(const ModelShape& shape, const std::string& where, const Context& c) {
  Memory m;
  const ParamCount count = count_parameters(shape);
  const unsigned tp = c.sizes.tp.value, pp = c.sizes.pp.value;

  std::string attention =
      fmt::format("{} heads / {} KV heads × head_dim {}", shape.heads, shape.kv_heads, shape.head_dim);
  if (shape.kv_lora_rank > 0)
    attention += fmt::format(", MLA KV latent {} + {}", shape.kv_lora_rank, shape.qk_rope_head_dim);
  std::string mlp = fmt::format("intermediate {}", shape.intermediate);
  if (shape.experts > 0) {
    mlp = fmt::format("{} experts × intermediate {}", shape.experts, shape.moe_intermediate);
    if (shape.shared_intermediate > 0) mlp += fmt::format(" + shared {}", shape.shared_intermediate);
    if (shape.dense_layers > 0) mlp += fmt::format(" ({} dense layers × {})", shape.dense_layers, shape.intermediate);
  }
  m.lines.push_back(fmt::format("model: {} (config.json{}): hidden {}, {} layers, {}, {}, vocab {}, {} embeddings",
                                where, shape.model_type.empty() ? "" : ", " + shape.model_type, shape.hidden,
                                shape.layers, mlp, attention, shape.vocab, shape.tied_embeddings ? "tied" : "untied"));
  for (const auto& n : shape.notes) m.lines.push_back("config.json: " + n);
  m.lines.push_back(fmt::format("parameters: {} (attention {}, MLP{} {}, embeddings {}, norms {})",
                                format_params(count.total()), format_params(count.attention),
                                shape.experts > 0 ? " and experts" : "", format_params(count.mlp),
                                format_params(count.embeddings), format_params(count.norms)));

  double linear_bytes = shape.linear_bytes, other_bytes = shape.other_bytes;
  std::string dtype = shape.dtype;
  if (shape.float32 && c.engine != EngineKind::Default) {
    // vLLM's and SGLang's --dtype auto run a float32 checkpoint in 16 bits.
    linear_bytes = std::min(linear_bytes, 2.0);
    other_bytes = 2.0;
    dtype = "float16";
    m.lines.push_back(fmt::format("float32 checkpoint: {} loads it as float16 (dtype auto)",
                                  c.engine == EngineKind::Vllm ? "vLLM" : "SGLang"));
  }
  const double weight_bytes = count.linear() * linear_bytes + (count.embeddings + count.norms) * other_bytes;
  const double per_gpu = weight_bytes / c.world.weight_shards;
  if (!(per_gpu / kMiB < kMaxMib))
    return make_error(fmt::format("model at {}: config.json describes an implausibly large model", where));
  const std::uint64_t weights_mib = ceil_mib(per_gpu);
  if (shape.quantization.empty() || linear_bytes == other_bytes) {
    m.lines.push_back(fmt::format("weights: {} params × {} bytes ({}) / (tp {} × pp {}) = {} = {} MiB per GPU",
                                  format_params(count.total()), linear_bytes, dtype, tp, pp, format_gb(per_gpu),
                                  weights_mib));
  } else {
    m.lines.push_back(fmt::format(
        "weights: ({} linear params × {} bytes ({}) + {} embedding/norm params × {} bytes) / "
        "(tp {} × pp {}) = {} = {} MiB per GPU",
        format_params(count.linear()), linear_bytes, shape.quantization, format_params(count.embeddings + count.norms),
        other_bytes, tp, pp, format_gb(per_gpu), weights_mib));
  }

  // KV cache: element size from kv-cache-dtype, else the dtype activations run in.
  double kv_bytes = (shape.float32 && c.engine == EngineKind::Default) ? 4.0 : 2.0;
  auto kv_dtype = read_strings(c.parameters, kKvDtypeKeys);
  if (!kv_dtype) return kv_dtype.error();
  if (*kv_dtype) {
    std::optional<double> widest;
    for (const auto& name : (*kv_dtype)->value) {
      if (const auto b = kv_dtype_bytes(name)) widest = std::max(widest.value_or(0.0), *b);
    }
    if (widest) {
      kv_bytes = *widest;
      m.lines.push_back(fmt::format("KV cache dtype: '{}' → {} bytes per element", (*kv_dtype)->key, kv_bytes));
    }
  }
  auto context = read_positive(c.parameters, kContextKeys, kMaxContextTokens);
  if (!context) return context.error();
  const std::uint64_t tokens_per_sequence = *context ? (*context)->value : c.options.kv_context_tokens;
  const std::uint64_t layers_per_gpu = (shape.layers + pp - 1) / pp;
  double per_token = 0;
  std::string per_token_text;
  if (shape.kv_lora_rank > 0) {
    // MLA keeps one latent per token and layer, and every tensor-parallel GPU holds all of it.
    per_token = static_cast<double>(layers_per_gpu) * static_cast<double>(shape.kv_lora_rank + shape.qk_rope_head_dim) *
                kv_bytes;
    per_token_text = fmt::format("{} layers (/ pp {}) × MLA latent ({} + {}) × {} bytes", layers_per_gpu, pp,
                                 shape.kv_lora_rank, shape.qk_rope_head_dim, kv_bytes);
  } else {
    // Each GPU holds its share of the KV heads; with more GPUs than KV heads, heads are replicated.
    const std::uint64_t heads_per_gpu = (shape.kv_heads + tp - 1) / tp;
    per_token = 2.0 * static_cast<double>(layers_per_gpu) * static_cast<double>(heads_per_gpu) *
                static_cast<double>(shape.head_dim) * kv_bytes;
    per_token_text = fmt::format("2 (K, V) × {} layers (/ pp {}) × {} KV heads (/ tp {}) × head_dim {} × {} bytes",
                                 layers_per_gpu, pp, heads_per_gpu, tp, shape.head_dim, kv_bytes);
  }
  const auto sequences = c.options.kv_sequences;
  const std::uint64_t shards = c.world.kv_shards;
  const double tokens = std::ceil(static_cast<double>(tokens_per_sequence) * static_cast<double>(sequences) / shards);
  const double kv_total = per_token * tokens;
  if (!(kv_total / kMiB < kMaxMib))
    return make_error(fmt::format("model at {}: KV cache estimate implausibly large", where));
  const std::uint64_t kv_mib = ceil_mib(kv_total);
  m.lines.push_back(fmt::format("KV cache: {} = {:.0f} bytes per token per GPU", per_token_text, per_token));
  m.lines.push_back(fmt::format("KV cache: × {} tokens ({}) × {} sequences{} = {} MiB per GPU", tokens_per_sequence,
                                *context ? fmt::format("'{}'", (*context)->key) : std::string("default context"),
                                sequences, shards > 1 ? fmt::format(" / dcp {}", shards) : "", kv_mib));
  finish(m, c, weights_mib, kv_mib);
  return m;
}

// (b) From the name's parameter count.
Memory from_name(const NamedSize& size, const std::string& id, const Context& c) {
  Memory m;
  m.lines.push_back(fmt::format("model: {} → {} params ({})", id, format_params(size.params), size.how));
  const double per_gpu = size.params * size.bytes / c.world.weight_shards;
  const std::uint64_t weights_mib = ceil_mib(per_gpu);
  m.lines.push_back(fmt::format("weights: {} params × {} bytes ({}) / (tp {} × pp {}) = {} = {} MiB per GPU",
                                format_params(size.params), size.bytes,
                                size.quantization.empty() ? std::string("bfloat16 assumed") : size.quantization,
                                c.sizes.tp.value, c.sizes.pp.value, format_gb(per_gpu), weights_mib));
  m.lines.push_back("KV cache: not counted without the model's shape (a local directory with config.json gives it)");
  finish(m, c, weights_mib, 0);
  return m;
}

Result<Memory> memory_per_gpu(const TaskValue& task, const Context& c) {
  const auto* model = task.find("model");
  if (!model || model->is_null()) {
    Memory m;
    m.mib = seed_table_mib("");
    m.lines.push_back(fmt::format("model: not given; the seed table's base value, {} MiB per GPU", m.mib));
    return m;
  }
  if (!model->is_object()) {
    return make_error(fmt::format("task 'model': expected an object like {{\"id_or_path\": \"llama-3-70b\"}}, got {}",
                                  describe_value(*model)));
  }
  const auto* id_it = model->find("id_or_path");
  if (!id_it || id_it->is_null()) return make_error("task 'model.id_or_path': missing");
  if (!id_it->is_string() || id_it->get_string().empty()) {
    return make_error(fmt::format("task 'model.id_or_path': expected a model name or a local directory, got {}",
                                  describe_value(*id_it)));
  }
  const auto& id = id_it->get_string();

  std::vector<std::string> notes;
  const std::string config_path = id + (id.back() == '/' ? "" : "/") + "config.json";
  const auto text = c.options.read_file ? c.options.read_file(config_path) : platform::read_file(config_path);
  if (text) {
    auto shape = parse_model_config(*text);
    if (shape) return from_shape(*shape, id, c);
    // A directory whose config we cannot read still has a name worth trying.
    notes.push_back(fmt::format("{}: {}; estimating from the name instead", id, shape.error().message));
  }
  if (const auto size = size_from_name(id)) {
    Memory m = from_name(*size, id, c);
    m.lines.insert(m.lines.begin(), notes.begin(), notes.end());
    return m;
  }
  Memory m{seed_table_mib(id), std::move(notes)};
  m.lines.push_back(
      fmt::format("model: {}: no size in the name and no config.json; the seed table gives {} MiB per GPU "
                  "(70B/65B → 20000, 13B/7B → 12000, otherwise 8000)",
                  id, m.mib));
  return m;
}

// The seed's memory: its fixed table on the model's name, whatever else is known.
Memory seed_memory(const TaskValue& task) {
  std::string id;
  if (const auto* model = task.find("model"); model && model->is_object())
    if (const auto* it = model->find("id_or_path"); it && it->is_string()) id = it->get_string();
  Memory m;
  m.mib = seed_table_mib(id);
  m.lines.push_back(
      fmt::format("memory: the seed's table (70B/65B → 20000, 13B/7B → 12000, otherwise 8000 MiB per "
                  "GPU) gives {} MiB for {}",
                  m.mib, id.empty() ? std::string("a task with no model") : fmt::format("'{}'", id)));
  return m;
}

Result<Estimate> estimate_unguarded(const TaskValue& task, const EstimateOptions& options) {
  if (!task.is_object()) return make_error(fmt::format("task: expected a JSON object, got {}", describe_value(task)));
  const bool seed = options.method == MemoryMethod::Seed;
  // The seed knew no engines: its method counts GPUs by its own rule, whatever the task names.
  static const TaskValue kNoEngine = TaskValue::object();
  auto engine = seed ? choose_engine(kNoEngine, "") : choose_engine(task, options.engine);
  if (!engine) return engine.error();
  if (seed) engine->line = "engine: not considered (the seed's method); the seed's rule";

  static const TaskValue kNoParameters = TaskValue::object();
  const TaskValue* parameters = &kNoParameters;
  if (const auto* it = task.find("parameters"); it && !it->is_null()) {
    if (!it->is_object()) {
      return make_error(
          fmt::format("task 'parameters': expected an object of parameter lists, got {}", describe_value(*it)));
    }
    parameters = it;
  }
  auto sizes = read_parallel_sizes(*parameters);
  if (!sizes) return sizes.error();
  auto world = world_size(engine->kind, *sizes, *parameters);
  if (!world) return world.error();
  auto fraction = memory_fraction(engine->kind, *parameters, options.vllm_default_memory_utilization);
  if (!fraction) return fraction.error();
  auto memory = seed ? Result<Memory>(seed_memory(task))
                     : memory_per_gpu(task, Context{engine->kind, *world, *sizes, *parameters, options});
  if (!memory) return memory.error();

  Estimate e;
  e.gpus = world->gpus;
  e.memory_mb_per_gpu = memory->mib;
  e.memory_fraction = fraction->value;
  e.engine = std::string(engine_name(engine->kind));
  e.method = std::string(to_string(options.method));
  e.warnings = unknown_parallel_keys(*parameters);
  std::vector<std::string> lines;
  lines.push_back(engine->line);
  lines.insert(lines.end(), world->lines.begin(), world->lines.end());
  lines.insert(lines.end(), memory->lines.begin(), memory->lines.end());
  lines.insert(lines.end(), fraction->lines.begin(), fraction->lines.end());
  lines.push_back(
      fmt::format("estimate: {} GPU{} with {} MiB each{}", e.gpus, e.gpus == 1 ? "" : "s", e.memory_mb_per_gpu,
                  e.memory_fraction ? fmt::format(", and free memory ≥ {} × each GPU's total", *e.memory_fraction)
                                    : std::string()));
  e.explanation = fmt::format("{}", fmt::join(lines, "\n"));
  return e;
}

}  // namespace

std::string_view to_string(MemoryMethod m) noexcept { return m == MemoryMethod::Seed ? "seed" : "weights"; }

Result<MemoryMethod> parse_memory_method(std::string_view text) {
  if (text == "weights") return MemoryMethod::Weights;
  if (text == "seed") return MemoryMethod::Seed;
  return make_error(ErrorKind::Invalid,
                    fmt::format("estimate method '{}': expected weights (gpufleet's, from the model's size) or seed "
                                "(the seed's table: 70B/65B → 20000, 13B/7B → 12000, otherwise 8000 MiB)",
                                text));
}

Result<Estimate> estimate(const TaskValue& task_config, const EstimateOptions& options) {
  // The module boundary: nothing may escape to the caller (a CLI verb, a worker loop).
  try {
    auto e = estimate_unguarded(task_config, options);
    // Every failure short of an exception is the task's fault: a value the estimate cannot use.
    if (!e) return make_error(ErrorKind::Invalid, e.error().message);
    return e;
  } catch (const std::exception& e) {
    return make_error(fmt::format("estimate: internal error: {}", e.what()));
  }
}

Result<Estimate> estimate_text(std::string_view json_text, const EstimateOptions& options) {
  auto task = parse_task(json_text);
  if (!task) return task.error();
  return estimate(*task, options);
}

Result<std::vector<TaskValue>> expand_grid(const TaskValue& parameters, std::size_t max_combinations) {
  if (!parameters.is_object()) {
    return make_error(fmt::format("parameters: expected an object, got {}", describe_value(parameters)));
  }
  struct Axis {
    const std::string* key;
    std::vector<const TaskValue*> values;
  };
  std::vector<Axis> axes;
  std::size_t count = 1;
  for (const auto& member : parameters.members()) {
    const std::string& key = member.key;  // refers into the object, which outlives the result's build
    const TaskValue& value = member.value;
    Axis axis{&key, {}};
    if (value.is_array()) {
      if (value.empty())
        return make_error(fmt::format("parameter '{}': empty list; it would give no experiments", key));
      for (const auto& v : value.list()) axis.values.push_back(&v);
    } else {
      axis.values.push_back(&value);
    }
    if (axis.values.size() > max_combinations / count) {
      return make_error(fmt::format("parameters: more than {} combinations (at '{}')", max_combinations, key));
    }
    count *= axis.values.size();
    axes.push_back(std::move(axis));
  }
  if (count > max_combinations)
    return make_error(fmt::format("parameters: more than {} combinations", max_combinations));

  std::vector<TaskValue> out;
  out.reserve(count);
  std::vector<std::size_t> at(axes.size(), 0);
  for (std::size_t n = 0; n < count; ++n) {
    TaskValue::Object members;
    members.reserve(axes.size());
    for (std::size_t a = 0; a < axes.size(); ++a) members.push_back({*axes[a].key, *axes[a].values[at[a]]});
    TaskValue experiment = TaskValue::object(std::move(members));
    out.push_back(std::move(experiment));
    // Odometer: the last key turns fastest.
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++at[a] < axes[a].values.size()) break;
      at[a] = 0;
    }
  }
  return out;
}

}  // namespace gf::estimate
