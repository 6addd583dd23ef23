// Estimates of whole tasks: the seed's example and rule, each engine's rule, memory fractions,
// malformed tasks, the text entry point and the grid expansion.
#include "estimate/estimate.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "unit/estimate/task_json_support.hpp"

#include <set>

namespace gf::estimate {
namespace {

using nlohmann::json;

Estimate must(const Result<Estimate>& r) {
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return r ? *r : Estimate{};
}

std::string error_of(const Result<Estimate>& r) {
  EXPECT_FALSE(r) << "expected an error";
  return r ? std::string() : r.error().message;
}

bool has(const Estimate& e, std::string_view text) { return e.explanation.find(text) != std::string::npos; }

json task(json parameters, std::string model = "llama-3-70b") {
  return json{{"model", {{"id_or_path", std::move(model)}}}, {"parameters", std::move(parameters)}};
}

EstimateOptions engine(std::string name) {
  EstimateOptions o;
  o.engine = std::move(name);
  return o;
}

// ---- the seed's rule ----

TEST(Estimate, SeedExample) {
  auto e = must(estimate(task({{"tp-size", {1, 2, 4}}, {"pp-size", {1}}, {"dp-size", {1}}})));
  EXPECT_EQ(e.gpus, 4u);
  EXPECT_EQ(e.engine, "default");
  EXPECT_FALSE(e.memory_fraction);
  // The largest configuration (tp 4): 70 B × 2 bytes over 4 GPUs, plus the reserve.
  EXPECT_EQ(e.memory_mb_per_gpu, 37741u);
  EXPECT_TRUE(has(e, "world size = tp 4 × pp 1 × max(dp 1, cp 1, dcp 1) = 4")) << e.explanation;
  EXPECT_TRUE(has(e, "tp 4 ('tp-size', largest of the list)")) << e.explanation;
  EXPECT_TRUE(has(e, "estimate: 4 GPUs with 37741 MiB each")) << e.explanation;
  EXPECT_NE(e.explanation.back(), '\n');
}

EstimateOptions seed_method() {
  EstimateOptions o;
  o.method = MemoryMethod::Seed;
  return o;
}

TEST(Estimate, TheSeedsMethodGivesTheSeedsAnswers) {
  // Seed 001's own example, and its table's three rows.
  auto e = must(estimate(task({{"tp-size", {1, 2, 4}}, {"pp-size", {1}}, {"dp-size", {1}}}), seed_method()));
  EXPECT_EQ(e.gpus, 4u);
  EXPECT_EQ(e.memory_mb_per_gpu, 20000u);
  EXPECT_EQ(e.method, "seed");
  EXPECT_FALSE(e.memory_fraction);
  EXPECT_TRUE(has(e, "the seed's table")) << e.explanation;
  EXPECT_EQ(must(estimate(task({{"tp", 2}}, "llama-2-13b"), seed_method())).memory_mb_per_gpu, 12000u);
  EXPECT_EQ(must(estimate(task({{"tp", 1}}, "mistral-7b"), seed_method())).memory_mb_per_gpu, 12000u);
  EXPECT_EQ(must(estimate(task({{"tp", 1}}, "llama-65b"), seed_method())).memory_mb_per_gpu, 20000u);
  EXPECT_EQ(must(estimate(task({{"tp", 1}}, "Qwen2.5-32B"), seed_method())).memory_mb_per_gpu, 8000u);
  EXPECT_EQ(must(estimate(json{{"parameters", {{"tp", 2}}}}, seed_method())).memory_mb_per_gpu, 8000u);
  // The seed knew no engines: vLLM's decode context parallel would reuse the tp GPUs; the seed's rule adds.
  auto v = must(estimate(
      json{{"model", {{"id_or_path", "llama-3-70b"}}}, {"engine", "vllm"}, {"parameters", {{"tp", 4}, {"dcp", 2}}}},
      seed_method()));
  EXPECT_EQ(v.gpus, 8u);
  EXPECT_EQ(v.engine, "default");
  EXPECT_FALSE(v.memory_fraction);
  // The default stays gpufleet's weights method.
  EXPECT_EQ(must(estimate(task({{"tp", 4}}))).method, "weights");
}

TEST(Estimate, MethodNames) {
  EXPECT_EQ(*parse_memory_method("seed"), MemoryMethod::Seed);
  EXPECT_EQ(*parse_memory_method("weights"), MemoryMethod::Weights);
  auto bad = parse_memory_method("fast");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'fast'"), std::string::npos);
}

TEST(Estimate, RunTogetherAliasesCount) {
  // Seed 002 names "tpsize"; it used to be ignored ("parallel sizes: none given").
  EXPECT_EQ(must(estimate(task({{"tpsize", {1, 2, 4}}}))).gpus, 4u);
  EXPECT_EQ(must(estimate(task({{"tpsize", 2}, {"ppsize", 2}, {"dpsize", 3}}))).gpus, 12u);
}

TEST(Estimate, WarnsOnAKeyThatLooksLikeAParallelSize) {
  auto e = must(estimate(task({{"tensor-parallel-sizes", {1, 2}}, {"TP_SIZE", 4}, {"pp-sizes", 2}, {"tp", 1}})));
  EXPECT_EQ(e.gpus, 1u);  // none of the three is read
  ASSERT_EQ(e.warnings.size(), 3u);
  std::set<std::string> text(e.warnings.begin(), e.warnings.end());
  auto mentions = [&](std::string_view key, std::string_view meant) {
    for (const auto& w : e.warnings)
      if (w.find(fmt::format("'{}'", key)) != std::string::npos &&
          w.find(fmt::format("'{}'", meant)) != std::string::npos)
        return true;
    return false;
  };
  EXPECT_TRUE(mentions("tensor-parallel-sizes", "tensor-parallel-size"));
  EXPECT_TRUE(mentions("TP_SIZE", "tensor-parallel-size"));
  EXPECT_TRUE(mentions("pp-sizes", "pipeline-parallel-size"));
  // Known sizes that add no GPUs, and other knobs, are not suspicious.
  auto quiet = must(estimate(task({{"expert-parallel-size", 8},
                                   {"enable-expert-parallel", true},
                                   {"data-parallel-size-local", 2},
                                   {"max-model-len", 8192},
                                   {"tp", 2}})));
  EXPECT_TRUE(quiet.warnings.empty()) << quiet.warnings.front();
}

TEST(Estimate, MaxOfDataContextAndDecodeContext) {
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"pp", 2}, {"dp", 3}, {"cp", 2}, {"dcp", 1}}))).gpus, 12u);
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"dp", 1}, {"cp", 5}, {"dcp", 2}}))).gpus, 10u);
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"dp", 2}, {"cp", 1}, {"dcp", {1, 7}}}))).gpus, 14u);
  auto e = must(estimate(task({{"tp", 1}, {"dp", 2}, {"cp", 3}, {"dcp", 4}})));
  EXPECT_EQ(e.gpus, 4u);
  EXPECT_TRUE(has(e, "world size = tp 1 × pp 1 × max(dp 2, cp 3, dcp 4) = 4")) << e.explanation;
}

TEST(Estimate, NoParametersIsOneGpu) {
  auto e = must(estimate(json{{"model", {{"id_or_path", "llama-3-70b"}}}}));
  EXPECT_EQ(e.gpus, 1u);
  EXPECT_TRUE(has(e, "parallel sizes: none given (all 1)")) << e.explanation;
  EXPECT_EQ(must(estimate(json{{"model", {{"id_or_path", "x"}}}, {"parameters", nullptr}})).gpus, 1u);
}

TEST(Estimate, MissingModelFallsBackToTheSeedBase) {
  auto e = must(estimate(json{{"parameters", {{"tp", 2}}}}));
  EXPECT_EQ(e.gpus, 2u);
  EXPECT_EQ(e.memory_mb_per_gpu, 8000u);
  EXPECT_TRUE(has(e, "model: not given; the seed table's base value, 8000 MiB per GPU")) << e.explanation;
}

// ---- malformed tasks: one error naming the key ----

TEST(Estimate, MalformedTasks) {
  EXPECT_EQ(error_of(estimate(json::array({1, 2}))), "task: expected a JSON object, got a list of 2");
  EXPECT_EQ(error_of(estimate(json("tp"))), "task: expected a JSON object, got \"tp\" (a string)");
  EXPECT_NE(error_of(estimate(json{{"parameters", json::array({1})}})).find("task 'parameters': expected an object"),
            std::string::npos);
  EXPECT_NE(error_of(estimate(json{{"model", "llama-3-70b"}})).find("task 'model': expected an object"),
            std::string::npos);
  EXPECT_EQ(error_of(estimate(json{{"model", json::object()}})), "task 'model.id_or_path': missing");
  EXPECT_NE(error_of(estimate(json{{"model", {{"id_or_path", 7}}}})).find("task 'model.id_or_path'"),
            std::string::npos);
  EXPECT_NE(error_of(estimate(json{{"model", {{"id_or_path", ""}}}})).find("task 'model.id_or_path'"),
            std::string::npos);
  EXPECT_EQ(error_of(estimate(task({{"tp-size", {1, 2, 0}}}))),
            "parameter 'tp-size': element 3 of the list is 0; expected a positive integer up to 65536");
  EXPECT_EQ(error_of(estimate(task({{"pp_size", 1.5}}))),
            "parameter 'pp_size': expected a positive integer up to 65536 or a list of them, got 1.5");
  EXPECT_TRUE(estimate(task({{"engine", "x"}, {"batch-size", "whatever"}})));  // unknown parameters are ignored
  EXPECT_NE(error_of(estimate(json{{"engine", 3}})).find("task 'engine': expected a string"), std::string::npos);
}

TEST(Estimate, WorldSizeTooLarge) {
  const auto msg = error_of(estimate(task({{"tp", 65536}, {"pp", 65536}})));
  EXPECT_NE(msg.find("exceeds"), std::string::npos) << msg;
  EXPECT_FALSE(estimate(task({{"tp", 1024}, {"pp", 1024}, {"dp", 2}})));
}

// ---- engines ----

TEST(EstimateEngine, ChosenByTaskOptionOrBaseRuntime) {
  EXPECT_EQ(must(estimate(json{{"engine", "vLLM"}})).engine, "vllm");
  EXPECT_EQ(must(estimate(json{{"base_runtime", "sglang"}})).engine, "sglang");
  auto over = must(estimate(json{{"engine", "sglang"}}, engine("vllm")));
  EXPECT_EQ(over.engine, "vllm");
  EXPECT_TRUE(has(over, "overriding the task's \"sglang\"")) << over.explanation;
  auto unknown = must(estimate(json{{"engine", "trtllm"}}));
  EXPECT_EQ(unknown.engine, "default");
  EXPECT_TRUE(has(unknown, "\"trtllm\" (task 'engine') has no rule of its own here")) << unknown.explanation;
  EXPECT_NE(error_of(estimate(json::object(), engine("tgi"))).find("expected vllm or sglang"), std::string::npos);
  EXPECT_NE(error_of(estimate(json{{"engine", "vllm"}, {"base_runtime", "sglang"}})).find("disagree"),
            std::string::npos);
}

TEST(EstimateEngine, VllmDataParallelMultiplies) {
  auto e = must(estimate(task({{"tp", 2}, {"pp", 2}, {"dp", 2}}), engine("vllm")));
  EXPECT_EQ(e.gpus, 8u);
  EXPECT_EQ(e.engine, "vllm");
  EXPECT_TRUE(
      has(e, "world size (vLLM) = tp 2 × pp 2 × cp 1 (prefill context parallel) = 4 per replica × dp 2 replicas = 8"))
      << e.explanation;
}

TEST(EstimateEngine, VllmDecodeContextParallelReusesTensorParallelGpus) {
  auto e = must(estimate(task({{"tp", 4}, {"dcp", 2}}), engine("vllm")));
  EXPECT_EQ(e.gpus, 4u);  // the seed's rule would say 4 × max(1, 1, 2) = 8
  EXPECT_EQ(must(estimate(task({{"tp", 4}, {"dcp", 2}}))).gpus, 8u);
  EXPECT_TRUE(has(e, "dcp 2 splits the KV cache across the tensor-parallel GPUs and adds none")) << e.explanation;
  EXPECT_EQ(error_of(estimate(task({{"tp-size", 4}, {"dcp-size", 3}}), engine("vllm"))),
            "vLLM: decode context parallel ('dcp-size' = 3) must divide tensor parallel ('tp-size' = 4); it reuses the "
            "tensor-parallel GPUs");
}

TEST(EstimateEngine, VllmPrefillContextParallel) {
  // pcp expands the world size; with it dcp must be 1, pcp or tp × pcp.
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"pcp", 2}}), engine("vllm"))).gpus, 4u);
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"context-parallel-size", 2}, {"dcp", 4}}), engine("vllm"))).gpus, 4u);
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"cp", 2}, {"dcp", 2}}), engine("vllm"))).gpus, 4u);
  const auto bad_dcp = error_of(estimate(task({{"tp", 4}, {"cp", 2}, {"dcp", 4}}), engine("vllm")));
  EXPECT_NE(bad_dcp.find("must be 1, 2 or tp × cp = 8"), std::string::npos) << bad_dcp;
  const auto with_dp = error_of(estimate(task({{"cp_size", 2}, {"dp_size", 2}}), engine("vllm")));
  EXPECT_EQ(with_dp,
            "vLLM: prefill context parallel ('cp_size' = 2) does not support data parallel ('dp_size' = 2) yet");
}

TEST(EstimateEngine, VllmMemoryFraction) {
  auto def = must(estimate(task({{"tp", 4}}), engine("vllm")));
  ASSERT_TRUE(def.memory_fraction);
  EXPECT_DOUBLE_EQ(*def.memory_fraction, 0.9);
  EXPECT_TRUE(has(def, "gpu-memory-utilization not given; vLLM's default 0.9")) << def.explanation;
  auto set = must(estimate(task({{"gpu-memory-utilization", {0.8, 0.95}}}), engine("vllm")));
  EXPECT_DOUBLE_EQ(set.memory_fraction.value_or(0), 0.95);
  EXPECT_TRUE(has(set, "'gpu-memory-utilization' 0.95 (largest of the list)")) << set.explanation;
  EXPECT_DOUBLE_EQ(must(estimate(task({{"gpu_memory_utilization", 0.7}}), engine("vllm"))).memory_fraction.value_or(0),
                   0.7);
  EstimateOptions newer = engine("vllm");
  newer.vllm_default_memory_utilization = 0.92;
  EXPECT_DOUBLE_EQ(must(estimate(task({}), newer)).memory_fraction.value_or(0), 0.92);
  // SGLang's knob means nothing to vLLM.
  auto other = must(estimate(task({{"mem-fraction-static", 0.5}}), engine("vllm")));
  EXPECT_DOUBLE_EQ(other.memory_fraction.value_or(0), 0.9);
  EXPECT_TRUE(has(other, "'mem-fraction-static' is SGLang's setting; ignored")) << other.explanation;
  EXPECT_NE(
      error_of(estimate(task({{"gpu-memory-utilization", 1.5}}), engine("vllm"))).find("'gpu-memory-utilization'"),
      std::string::npos);
}

TEST(EstimateEngine, SglangDataParallelReplicasMultiply) {
  auto e = must(estimate(task({{"tp-size", 2}, {"dp-size", 2}}), engine("sglang")));
  EXPECT_EQ(e.gpus, 4u);
  EXPECT_TRUE(has(e, "world size (SGLang) = tp 2 × pp 1 = 2 per replica × dp 2 replicas = 4")) << e.explanation;
  EXPECT_EQ(must(estimate(task({{"tp", 2}, {"pp", 2}, {"dp", 2}}), engine("sglang"))).gpus, 8u);
}

TEST(EstimateEngine, SglangDpAttentionSharesTheTensorParallelGpus) {
  auto e = must(estimate(task({{"tp", 8}, {"dp", 8}, {"enable-dp-attention", true}}), engine("sglang")));
  EXPECT_EQ(e.gpus, 8u);
  EXPECT_TRUE(has(e, "world size (SGLang, DP attention) = tp 8 × pp 1 = 8; the dp 8 attention ranks share"))
      << e.explanation;
  EXPECT_EQ(
      must(estimate(task({{"tp", 8}, {"dp", 2}, {"pp", 2}, {"enable_dp_attention", true}}), engine("sglang"))).gpus,
      16u);
  // A sweep that also runs without DP attention needs the replicas.
  EXPECT_EQ(must(estimate(task({{"tp", 4}, {"dp", 2}, {"enable-dp-attention", {true, false}}}), engine("sglang"))).gpus,
            8u);
  EXPECT_EQ(error_of(estimate(task({{"tp", 4}, {"dp", 3}, {"enable-dp-attention", true}}), engine("sglang"))),
            "SGLang: with DP attention ('enable-dp-attention'), data parallel ('dp' = 3) must divide tensor parallel "
            "('tp' = 4); the attention ranks split the tensor-parallel GPUs");
  EXPECT_NE(error_of(estimate(task({{"enable-dp-attention", "yes"}}), engine("sglang"))).find("'enable-dp-attention'"),
            std::string::npos);
}

TEST(EstimateEngine, SglangContextParallelSplitsTensorParallel) {
  EXPECT_EQ(must(estimate(task({{"tp", 4}, {"cp", 2}, {"dcp", 4}}), engine("sglang"))).gpus, 4u);
  EXPECT_NE(
      error_of(estimate(task({{"tp", 4}, {"dcp", 3}}), engine("sglang"))).find("decode context parallel ('dcp' = 3)"),
      std::string::npos);
  EXPECT_NE(error_of(estimate(task({{"tp", 4}, {"cp", 3}}), engine("sglang"))).find("context parallel ('cp' = 3)"),
            std::string::npos);
  // With DP attention, dp × cp must divide tp.
  EXPECT_NE(error_of(estimate(task({{"tp", 4}, {"dp", 2}, {"cp", 4}, {"enable-dp-attention", true}}), engine("sglang")))
                .find("× dp 2 must divide"),
            std::string::npos);
}

TEST(EstimateEngine, SglangMemoryFraction) {
  auto none = must(estimate(task({}), engine("sglang")));
  EXPECT_FALSE(none.memory_fraction);
  EXPECT_TRUE(has(none, "mem-fraction-static not given; SGLang picks it from each GPU's size")) << none.explanation;
  auto set = must(estimate(task({{"mem_fraction_static", {0.8, 0.85}}}), engine("sglang")));
  EXPECT_DOUBLE_EQ(set.memory_fraction.value_or(0), 0.85);
  auto other = must(estimate(task({{"gpu-memory-utilization", 0.5}}), engine("sglang")));
  EXPECT_FALSE(other.memory_fraction);
  EXPECT_TRUE(has(other, "'gpu-memory-utilization' is vLLM's setting; ignored")) << other.explanation;
}

TEST(EstimateEngine, DefaultRuleStillHonoursAnEnginesFraction) {
  auto e = must(estimate(task({{"mem-fraction-static", 0.8}})));
  EXPECT_DOUBLE_EQ(e.memory_fraction.value_or(0), 0.8);
  EXPECT_TRUE(has(e, "free memory ≥ 0.8 × each GPU's total")) << e.explanation;
}

// ---- the text entry point ----

TEST(EstimateText, ParsesAndEstimates) {
  auto e = estimate_text(R"({"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [1, 2, 4]}})");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->gpus, 4u);
}

TEST(EstimateText, InvalidJsonIsAClearError) {
  for (const std::string_view text : {"", "{", "{\"tp\": }", "not json", "{\"a\": \"\xff\"}"}) {
    auto e = estimate_text(text);
    ASSERT_FALSE(e) << text;
    EXPECT_EQ(e.error().message.rfind("task file: invalid JSON: ", 0), 0u) << e.error().message;
    EXPECT_EQ(e.error().kind, ErrorKind::Invalid);  // the API answers 400 for it
  }
  auto deep = estimate_text(std::string(100000, '[') + std::string(100000, ']'));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().message, "task: expected a JSON object, got a list of 1");
  EXPECT_EQ(deep.error().kind, ErrorKind::Invalid);
}

// ---- the grid ----

TEST(Grid, CartesianProduct) {
  auto g = expand_grid(json{{"tp-size", {1, 2, 4}}, {"pp-size", {1, 2}}, {"mem-fraction-static", 0.8}});
  ASSERT_TRUE(g) << g.error().message;
  ASSERT_EQ(g->size(), 6u);
  std::set<std::string> seen;
  for (const auto& x : *g) {
    ASSERT_TRUE(x.is_object());
    EXPECT_EQ(x.size(), 3u);
    EXPECT_TRUE(x.at("tp-size").is_number());
    EXPECT_EQ(x.at("mem-fraction-static"), 0.8);
    seen.insert(x.dump());
  }
  EXPECT_EQ(seen.size(), 6u);
  // Keys sorted (mem-fraction-static, pp-size, tp-size); the last one turns fastest.
  EXPECT_EQ((*g)[0], (json{{"mem-fraction-static", 0.8}, {"pp-size", 1}, {"tp-size", 1}}));
  EXPECT_EQ((*g)[1], (json{{"mem-fraction-static", 0.8}, {"pp-size", 1}, {"tp-size", 2}}));
  EXPECT_EQ((*g)[3], (json{{"mem-fraction-static", 0.8}, {"pp-size", 2}, {"tp-size", 1}}));
}

TEST(Grid, ScalarsEmptyAndErrors) {
  auto one = expand_grid(json{{"tp", 2}, {"note", {{"a", 1}}}});
  ASSERT_TRUE(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0]["note"]["a"], 1);

  auto empty = expand_grid(json::object());
  ASSERT_TRUE(empty);
  ASSERT_EQ(empty->size(), 1u);
  EXPECT_TRUE((*empty)[0].empty());

  auto nested = expand_grid(json{{"shape", {json::array({1, 2}), json::array({3})}}});
  ASSERT_TRUE(nested);
  ASSERT_EQ(nested->size(), 2u);
  EXPECT_EQ((*nested)[0]["shape"], json::array({1, 2}));

  auto hole = expand_grid(json{{"tp", {1, 2}}, {"dp", json::array()}});
  ASSERT_FALSE(hole);
  EXPECT_EQ(hole.error().message, "parameter 'dp': empty list; it would give no experiments");
  EXPECT_FALSE(expand_grid(json::array()));

  json big = json::object();
  for (int i = 0; i < 20; ++i) big["k" + std::to_string(i)] = {1, 2, 3, 4};  // 4^20 combinations
  auto too_many = expand_grid(big, 1000);
  ASSERT_FALSE(too_many);
  EXPECT_NE(too_many.error().message.find("more than 1000 combinations"), std::string::npos);
}

TEST(Grid, EachExperimentEstimatesOnItsOwn) {
  auto grid = expand_grid(json{{"tp-size", {1, 2, 4}}, {"dcp-size", {1, 2}}});
  ASSERT_TRUE(grid);
  std::vector<unsigned> gpus;
  std::size_t refused = 0;
  for (const auto& params : *grid) {
    auto e = estimate(json{{"engine", "vllm"}, {"model", {{"id_or_path", "llama-3-8b"}}}, {"parameters", params}});
    if (!e) {
      ++refused;  // tp 1 with dcp 2
      EXPECT_NE(e.error().message.find("must divide"), std::string::npos);
      continue;
    }
    gpus.push_back(e->gpus);
  }
  EXPECT_EQ(refused, 1u);
  EXPECT_EQ(gpus, (std::vector<unsigned>{1, 2, 4, 2, 4}));  // dcp-size sorts first: dcp 1 × tp 1, 2, 4, then dcp 2
}

}  // namespace
}  // namespace gf::estimate
