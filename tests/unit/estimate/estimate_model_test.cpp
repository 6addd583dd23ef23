// Model sizes: from the name, from config.json fixtures (numbers checked by hand in the comments),
// and the seed table.
#include <gtest/gtest.h>

#include "unit/estimate/task_json_support.hpp"

#include "estimate/estimate.hpp"
#include "estimate/model_size.hpp"
#include "platform/fs.hpp"

#include "gf_test_paths.hpp"

namespace gf::estimate {
namespace {

using nlohmann::json;

const std::string kModels = std::string(GF_FIXTURES_DIR) + "/models/";

json task_for(const std::string& id, json parameters = json::object()) {
  return json{{"model", {{"id_or_path", id}}}, {"parameters", std::move(parameters)}};
}

Estimate model_must(const Result<Estimate>& r) {
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : Estimate{};
}

EstimateOptions vllm() {
  EstimateOptions o;
  o.engine = "vllm";
  return o;
}

bool model_has(const Estimate& e, std::string_view text) { return e.explanation.find(text) != std::string::npos; }

// ---- names ----

TEST(EstimateModelName, Forms) {
  const std::vector<std::pair<std::string, double>> cases = {
      {"llama-3-70b", 70e9},
      {"meta-llama/Meta-Llama-3-70B-Instruct", 70e9},
      {"Qwen2.5-7B-Instruct", 7e9},
      {"1.5B", 1.5e9},
      {"deepseek-r1-distill-qwen-1.5b", 1.5e9},
      {"125m", 125e6},
      {"facebook/opt-350M", 350e6},
      {"Llama-3.1-405B", 405e9},
      {"Qwen3-30B-A3B", 30e9},  // "A3B" (active parameters) is glued to a letter: not the size
      {"gemma-2-2b-it", 2e9},
      {"moonshot/kimi-1T", 1e12},
      {"mixtral-8x7b", 46.7e9},
      {"mistralai/Mixtral-8x22B-Instruct-v0.1", 140.6e9},
      {"gpt2-xl", 1.5e9},
      {"openai-community/gpt2", 124e6},
  };
  for (const auto& [id, params] : cases) {
    const auto size = size_from_name(id);
    ASSERT_TRUE(size) << id;
    EXPECT_DOUBLE_EQ(size->params, params) << id;
    EXPECT_DOUBLE_EQ(size->bytes, 2.0) << id;
  }
}

TEST(EstimateModelName, NothingUsable) {
  for (const std::string id : {"phi-3-mini", "phi-3-mini-4k-instruct", "deepseek-v3", "bert-base-uncased", "qwen2",
                               "7bit", "llama70b", "", "99999999999999999999999b", "opal-9x0b", "0b", "0.0m"}) {
    EXPECT_FALSE(size_from_name(id)) << id;
  }
}

TEST(EstimateModelName, MixtureOfExpertsOutsideTheTable) {
  // 4 experts of a 7B model: the experts replace only the MLP (~78 % of a Mistral-style model).
  const auto size = size_from_name("toy-4x7b");
  ASSERT_TRUE(size);
  EXPECT_NEAR(size->params, 7e9 * (1 + 3 * 0.78), 1e6);
  EXPECT_NE(size->how.find("≈ 7.00 B × (1 + 3 × 78 %)"), std::string::npos) << size->how;
}

TEST(EstimateModelName, QuantizationInTheName) {
  auto awq = size_from_name("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4");
  ASSERT_TRUE(awq);
  EXPECT_DOUBLE_EQ(awq->params, 8e9);
  EXPECT_DOUBLE_EQ(awq->bytes, 0.5);
  auto fp8 = size_from_name("neuralmagic/Meta-Llama-3-70B-Instruct-FP8");
  ASSERT_TRUE(fp8);
  EXPECT_DOUBLE_EQ(fp8->bytes, 1.0);
}

TEST(EstimateModelName, MemoryFromTheName) {
  // 70e9 × 2 / 4 = 35.0 GB = 33378.6 → 33379 MiB; reserve 1024 + ceil(3337.9) = 4362.
  auto e = model_must(estimate(task_for("llama-3-70b", {{"tp-size", 4}})));
  EXPECT_EQ(e.memory_mb_per_gpu, 33379u + 4362u);
  EXPECT_TRUE(
      model_has(e, "weights: 70.0 B params × 2 bytes (bfloat16 assumed) / (tp 4 × pp 1) = 35.0 GB = 33379 MiB per GPU"))
      << e.explanation;
  EXPECT_TRUE(model_has(e, "runtime reserve (CUDA context, activations): 1024 MiB + 10 % of 33379 MiB = 4362 MiB"));

  // pp divides the weights too: 7e9 × 2 / (2 × 2) → 3338 MiB + 1024 + 334.
  EXPECT_EQ(model_must(estimate(task_for("Qwen2.5-7B-Instruct", {{"tp", 2}, {"pp", 2}}))).memory_mb_per_gpu, 4696u);
  // Mixtral: 46.7e9 × 2 / 2 → 44537 MiB + 1024 + 4454.
  e = model_must(estimate(task_for("mixtral-8x7b", {{"tp", 2}})));
  EXPECT_EQ(e.memory_mb_per_gpu, 50015u);
  EXPECT_TRUE(model_has(e,
                        "mixtral-8x7b → 46.7 B params (8x7b in the name: Mixtral's published total; the experts share "
                        "attention and embeddings)"))
      << e.explanation;
  EXPECT_EQ(model_must(estimate(task_for("Llama-3.1-405B", {{"tp", 8}}))).memory_mb_per_gpu, 107240u);
  EXPECT_EQ(model_must(estimate(task_for("1.5B"))).memory_mb_per_gpu, 4173u);
  EXPECT_EQ(model_must(estimate(task_for("125m"))).memory_mb_per_gpu, 1287u);
  EXPECT_EQ(model_must(estimate(task_for("facebook/opt-350M"))).memory_mb_per_gpu, 1759u);
  EXPECT_EQ(model_must(estimate(task_for("gpt2-xl"))).memory_mb_per_gpu, 4173u);
  // 4-bit: 8e9 × 0.5 → 3815 MiB + 1024 + 382.
  EXPECT_EQ(model_must(estimate(task_for("Meta-Llama-3.1-8B-Instruct-AWQ"))).memory_mb_per_gpu, 5221u);
}

// ---- the seed table, the last fallback ----

TEST(EstimateModelSeedTable, Values) {
  EXPECT_EQ(seed_table_mib("llama70b"), 20000u);
  EXPECT_EQ(seed_table_mib("LLaMA-65B-hf"), 20000u);
  EXPECT_EQ(seed_table_mib("vicuna13b"), 12000u);
  EXPECT_EQ(seed_table_mib("mistral7b"), 12000u);
  EXPECT_EQ(seed_table_mib("phi-3-mini"), 8000u);
  EXPECT_EQ(seed_table_mib(""), 8000u);
}

TEST(EstimateModelSeedTable, UsedWhenTheNameSaysNothing) {
  auto e = model_must(estimate(task_for("phi-3-mini", {{"tp", 2}})));
  EXPECT_EQ(e.memory_mb_per_gpu, 8000u);
  EXPECT_TRUE(model_has(e, "no size in the name and no config.json; the seed table gives 8000 MiB")) << e.explanation;
  // A size glued to letters is no size for the parser, but the seed table still matches it.
  EXPECT_EQ(model_must(estimate(task_for("llama70b"))).memory_mb_per_gpu, 20000u);
}

// ---- config.json ----

TEST(EstimateModelConfig, ParameterCountsMatchThePublishedSizes) {
  struct Case {
    std::string dir;
    double total;
  };
  // Llama-2-7B: 6 738 415 616 (its published count, exactly: no biases).
  // Llama-3-8B: 8 030 261 248 (published: 8.03 B).
  // Mixtral-8x7B: 46 702 792 704 (published: 46.7 B).
  // Qwen2.5-0.5B: 494 005 120; published 494 032 768, the difference being its q/k/v biases.
  for (const Case& c : {Case{"llama2-7b", 6738415616.0}, Case{"llama3-8b", 8030261248.0},
                        Case{"mixtral-8x7b", 46702792704.0}, Case{"qwen2.5-0.5b", 494005120.0}}) {
    const auto text = platform::read_file(kModels + c.dir + "/config.json");
    ASSERT_TRUE(text) << c.dir;
    auto shape = parse_model_config(*text);
    ASSERT_TRUE(shape) << c.dir << ": " << shape.error().message;
    EXPECT_DOUBLE_EQ(count_parameters(*shape).total(), c.total) << c.dir;
  }
}

TEST(EstimateModelConfig, LlamaGqaHandChecked) {
  // weights 8 030 261 248 × 2 B = 16.06 GB → 15316.5 → 15317 MiB
  // KV: 2 × 32 layers × 8 KV heads × 128 × 2 B = 131072 B/token × 4096 × 8 tokens = 4096 MiB
  // reserve: 1024 + ceil(0.1 × 19413) = 2966 → 22379 MiB
  auto e = model_must(estimate(task_for(kModels + "llama3-8b")));
  EXPECT_EQ(e.gpus, 1u);
  EXPECT_EQ(e.memory_mb_per_gpu, 22379u);
  EXPECT_FALSE(e.memory_fraction);
  EXPECT_TRUE(model_has(e, "parameters: 8.03 B")) << e.explanation;
  EXPECT_TRUE(
      model_has(e,
                "KV cache: 2 (K, V) × 32 layers (/ pp 1) × 8 KV heads (/ tp 1) × head_dim 128 × 2 bytes = 131072 "
                "bytes per token per GPU"))
      << e.explanation;
  EXPECT_TRUE(model_has(e, "memory per GPU = weights 15317 + KV cache 4096 + reserve 2966 = 22379 MiB"))
      << e.explanation;

  // tp 2: weights 7659, KV heads 4 per GPU → 2048, reserve 1024 + 971.
  EXPECT_EQ(model_must(estimate(task_for(kModels + "llama3-8b", {{"tp", 2}}))).memory_mb_per_gpu, 11702u);
  // tp 16 > 8 KV heads: each GPU still holds one head (replicated): KV 512 MiB, not 256.
  EXPECT_EQ(model_must(estimate(task_for(kModels + "llama3-8b", {{"tp", 16}}))).memory_mb_per_gpu, 2641u);
}

TEST(EstimateModelConfig, MultiHeadWithoutKvKeyAndPipeline) {
  // Llama-2-7B has no num_key_value_heads: 32 KV heads. tp 2 × pp 2:
  // weights 6 738 415 616 × 2 / 4 → 3214 MiB; KV 2 × 16 layers × 16 heads × 128 × 2 × 32768 → 4096 MiB;
  // reserve 1024 + 731 → 9065.
  auto e = model_must(estimate(task_for(kModels + "llama2-7b", {{"tp", 2}, {"pp", 2}})));
  EXPECT_EQ(e.gpus, 4u);
  EXPECT_EQ(e.memory_mb_per_gpu, 9065u);
}

TEST(EstimateModelConfig, MixtureOfExperts) {
  // tp 4: weights 46 702 792 704 × 2 / 4 → 22270 MiB; KV 2 × 32 × 2 × 128 × 2 × 32768 → 1024 MiB;
  // reserve 1024 + 2930 → 26648.
  auto e = model_must(estimate(task_for(kModels + "mixtral-8x7b", {{"tp-size", 4}})));
  EXPECT_EQ(e.memory_mb_per_gpu, 26648u);
  EXPECT_TRUE(model_has(e, "8 experts × intermediate 14336")) << e.explanation;
  EXPECT_TRUE(model_has(e, "parameters: 46.7 B")) << e.explanation;
}

TEST(EstimateModelConfig, TiedEmbeddings) {
  // Qwen2.5-0.5B: 943 MiB of weights, KV 2 × 24 × 2 × 64 × 2 × 32768 = 384 MiB, reserve 1024 + 133.
  auto e = model_must(estimate(task_for(kModels + "qwen2.5-0.5b")));
  EXPECT_EQ(e.memory_mb_per_gpu, 2484u);
  EXPECT_TRUE(model_has(e, "tied embeddings")) << e.explanation;
}

TEST(EstimateModelConfig, QuantizedWeights) {
  // AWQ 4-bit: linear 6.98 B × 0.5 + embeddings/norms 1.05 B × 2 → 5333 MiB; KV 4096; reserve 1967.
  auto e = model_must(estimate(task_for(kModels + "llama3-8b-awq")));
  EXPECT_EQ(e.memory_mb_per_gpu, 11396u);
  EXPECT_TRUE(model_has(e, "awq 4-bit")) << e.explanation;
}

TEST(EstimateModelConfig, Float32UnderTheSeedRuleAndUnderAnEngine) {
  // 4 452 608 params. Seed rule: 4 bytes each → 17 MiB, KV in fp32: 2 × 4 × 8 × 32 × 4 × 32768 = 256 MiB.
  auto plain = model_must(estimate(task_for(kModels + "tiny-fp32")));
  EXPECT_EQ(plain.memory_mb_per_gpu, 17u + 256u + 1024u + 28u);
  // vLLM runs a float32 checkpoint in 16 bits: 9 MiB, KV 128 MiB.
  auto engine = model_must(estimate(task_for(kModels + "tiny-fp32"), vllm()));
  EXPECT_EQ(engine.memory_mb_per_gpu, 9u + 128u + 1024u + 14u);
  EXPECT_TRUE(model_has(engine, "float32 checkpoint: vLLM loads it as float16")) << engine.explanation;
}

TEST(EstimateModelConfig, LatentAttentionAndSharedExperts) {
  // A DeepSeek-shaped toy: 1 dense layer + 3 MoE layers of 16 experts × 512 and a shared expert of 512.
  // Params: attention 16 777 216, MLP 92 848 128, embeddings 65 536 000, norms 9216 = 175 170 560.
  const auto text = platform::read_file(kModels + "deepseek-mla-tiny/config.json");
  ASSERT_TRUE(text);
  auto shape = parse_model_config(*text);
  ASSERT_TRUE(shape) << shape.error().message;
  const auto count = count_parameters(*shape);
  EXPECT_DOUBLE_EQ(count.mlp, 92848128.0);
  EXPECT_DOUBLE_EQ(count.total(), 175170560.0);
  // tp 2 under vLLM: weights 168 MiB; MLA KV is one latent of 512 + 64 per token and layer on every GPU:
  // 4 × 576 × 2 = 4608 B × 32768 tokens = 144 MiB; with dcp 2 the tokens are split: 72 MiB.
  auto e = model_must(estimate(task_for(kModels + "deepseek-mla-tiny", {{"tp", 2}}), vllm()));
  EXPECT_EQ(e.memory_mb_per_gpu, 168u + 144u + 1024u + 32u);
  auto d = model_must(estimate(task_for(kModels + "deepseek-mla-tiny", {{"tp", 2}, {"dcp", 2}}), vllm()));
  EXPECT_EQ(d.gpus, 2u);
  EXPECT_EQ(d.memory_mb_per_gpu, 168u + 72u + 1024u + 24u);
}

TEST(EstimateModelConfig, ContextLengthAndKvDtypeParameters) {
  // max-model-len 8192 doubles the tokens, fp8 KV halves the bytes: KV stays 4096 MiB.
  auto e = model_must(estimate(task_for(kModels + "llama3-8b", {{"max-model-len", 8192}, {"kv-cache-dtype", "fp8"}})));
  EXPECT_EQ(e.memory_mb_per_gpu, 22379u);
  EXPECT_TRUE(model_has(e, "× 8192 tokens ('max-model-len') × 8 sequences = 4096 MiB per GPU")) << e.explanation;
  auto bad = estimate(task_for(kModels + "llama3-8b", {{"context-length", 0}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'context-length'"), std::string::npos);
}

TEST(EstimateModelConfig, UnusableConfigFallsBackToTheName) {
  // broken-7b/config.json lacks intermediate_size: the estimate uses "7b" in the name and says why.
  auto e = model_must(estimate(task_for(kModels + "broken-7b")));
  EXPECT_EQ(e.memory_mb_per_gpu, 15712u);
  EXPECT_TRUE(model_has(e, "config.json: 'intermediate_size' missing; estimating from the name instead"))
      << e.explanation;
}

TEST(EstimateModelConfig, ReadThroughTheSeam) {
  EstimateOptions o;
  std::vector<std::string> asked;
  o.read_file = [&](const std::string& path) -> std::optional<std::string> {
    asked.push_back(path);
    return platform::read_file(kModels + "llama3-8b/config.json");
  };
  auto e = model_must(estimate(task_for("/nowhere/my-model/"), o));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], "/nowhere/my-model/config.json");
  EXPECT_EQ(e.memory_mb_per_gpu, 22379u);
}

TEST(EstimateModelConfig, ConfigErrorsNameTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[]", "expected an object"},
      {"{", "invalid JSON"},
      {R"({"num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 8})",
       "'hidden_size' missing"},
      {R"({"hidden_size": "4096", "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 10})",
       "'hidden_size' must be a positive integer"},
      {R"({"hidden_size": 4, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 10, "intermediate_size": 8})",
       "'head_dim' is 0"},
      {R"({"hidden_size": 8, "num_hidden_layers": 99999999, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 8})",
       "'num_hidden_layers' must be a positive integer up to"},
  };
  for (const auto& [text, detail] : bad) {
    auto shape = parse_model_config(text);
    ASSERT_FALSE(shape) << text;
    EXPECT_NE(shape.error().message.find(detail), std::string::npos) << shape.error().message;
  }
}

}  // namespace
}  // namespace gf::estimate
