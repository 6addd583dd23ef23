#pragma once
// How big a model is: its parameter count and bytes per parameter, from a Hugging Face config.json
// (the shape) or from the model's name ("llama-3-70b"), plus the seed's fixed table as the last
// fallback. Pure functions over text; reading the file is the caller's business. Internal to
// gf_estimate (estimate.cpp); public for the tests.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace gf::estimate {

// A decoder-only transformer as config.json describes it (Llama, Mistral, Qwen, Mixtral, DeepSeek and
// other models with the same keys).
struct ModelShape {
  std::string model_type;  // config's "model_type", may be empty
  std::uint64_t hidden = 0;
  std::uint64_t layers = 0;
  std::uint64_t intermediate = 0;  // dense MLP width
  std::uint64_t vocab = 0;
  std::uint64_t heads = 0;
  std::uint64_t kv_heads = 0;  // grouped-query attention: fewer K/V heads than query heads
  std::uint64_t head_dim = 0;
  bool tied_embeddings = false;  // the LM head reuses the input embedding matrix
  bool gated_mlp = true;         // SwiGLU-style gate+up+down (3 matrices) rather than up+down (2)

  // Mixture of experts; experts == 0 for a dense model.
  std::uint64_t experts = 0;              // routed experts per MoE layer
  std::uint64_t moe_intermediate = 0;     // width of one expert
  std::uint64_t shared_intermediate = 0;  // total width of the always-on shared expert(s)
  std::uint64_t dense_layers = 0;         // leading dense layers of an MoE model (DeepSeek)

  // Multi-head latent attention (DeepSeek V2/V3): the KV cache holds one compressed latent per token
  // and layer instead of K and V per head.
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t qk_rope_head_dim = 0;

  // Storage as in the checkpoint. Quantization applies to the linear layers (attention, MLP,
  // experts); embeddings and norms stay in the 16-bit dtype, as AWQ, GPTQ and FP8 checkpoints do.
  double linear_bytes = 2;   // bytes per linear-layer parameter
  double other_bytes = 2;    // bytes per embedding / norm parameter
  std::string dtype;         // "bfloat16", "float32", ...
  std::string quantization;  // "" or e.g. "awq 4-bit"
  bool float32 = false;      // the checkpoint is float32

  std::vector<std::string> notes;  // assumptions made while reading (defaults taken, keys ignored)
};

struct ParamCount {
  double attention = 0;   // all layers
  double mlp = 0;         // dense MLPs, experts, routers, shared experts
  double embeddings = 0;  // input embedding and (untied) LM head
  double norms = 0;
  double linear() const { return attention + mlp; }
  double total() const { return attention + mlp + embeddings + norms; }
};

// Errors name the key ("config.json: 'hidden_size' missing"). Accepts a multimodal config whose
// language model sits under "text_config".
Result<ModelShape> parse_model_config(std::string_view json_text);

// Parameter count of a shape. Biases are left out (well under 0.1 % for the models above).
ParamCount count_parameters(const ModelShape& shape);

// A size read from a model's name.
struct NamedSize {
  double params = 0;
  std::string how;           // "70B in the name", "mixtral-8x7b: 46.7B total", ...
  double bytes = 2;          // per parameter: bf16 unless the name says awq/gptq/int4/fp8/int8
  std::string quantization;  // "" or what the name said ("4-bit (awq in the name)")
};

// Case-insensitive. Forms: "<n>B", "<n>M", "<n>T" as a word ("llama-3-70b", "Qwen2.5-7B-Instruct",
// "1.5B", "125m", "Llama-3.1-405B"); "<e>x<n>B" for mixtures of experts ("mixtral-8x7b": 46.7B,
// since the experts share attention and embeddings); a few names without a size (gpt2, gpt2-medium,
// gpt2-large, gpt2-xl). A number glued to letters ("Qwen2", "A3B" in "Qwen3-30B-A3B") is not a size.
// nullopt when the name says nothing usable ("phi-3-mini").
std::optional<NamedSize> size_from_name(std::string_view id);

// The seed's fixed table, by substring of the lower-cased id: "70b"/"65b" → 20000, "13b"/"7b" →
// 12000, anything else → 8000 (MiB; see estimate.hpp on units).
std::uint64_t seed_table_mib(std::string_view id);

// "405 B", "70.6 B", "8.03 B", "350 M", "1.00 T": a parameter count for explanations.
std::string format_params(double params);

}  // namespace gf::estimate
