// Engine rules for the GPU count and the memory fraction.
//
// Seed rule (no engine): world size = tp × pp × max(dp, cp, dcp), as gpu_scheduler.py computed it.
// It over-counts for the engines below (dcp adds no GPUs to either) but stays the default: it is what
// the seed promised and what Kubernetes mode uses.
//
// vLLM, checked against vllm/config/parallel.py (ParallelConfig) on vLLM's main branch in 2026 —
// the layout with prefill_context_parallel_size, which later releases than v0.11 carry — and the
// "Data Parallel Deployment" docs (docs.vllm.ai, v0.12.0 and latest):
//   world size per engine = pp × tp × pcp ("PCP expands the process world size");
//   data parallel: each DP rank is a separate engine owning tp × pp × pcp GPUs, so GPUs × dp;
//   decode context parallel "does not expand the process world size. Without PCP, DCP reuses TP
//     ranks": tp must be divisible by dcp; with PCP, dcp must be 1, pcp or tp × pcp;
//   PCP together with DP is refused ("PCP does not support data parallelism yet").
// vLLM has no flag named context parallel; the seed's cp aliases (and pcp's) are read as pcp.
// gpu_memory_utilization: 0.9 in released vLLM's engine arguments (the main branch's CacheConfig says
// 0.92); EstimateOptions::vllm_default_memory_utilization holds it.
//
// SGLang, checked against python/sglang/srt/server_args.py and layers/dp_attention.py on SGLang's
// main branch in 2026 and docs.sglang.io (Server Arguments; "DP, DPA and SGLang DP Router"; "Decode
// Context Parallelism"):
//   "--dp 2 --tp 2 ... uses 4 GPUs in total": without DP attention, dp replicas of tp × pp GPUs;
//   --enable-dp-attention: the dp attention ranks split the tp ranks (attn_tp_size = tp_size //
//     dp_size), so dp must divide tp and the GPUs are tp × pp;
//   attention context parallel: "the tp_size is the world size, not the real tensor parallel size";
//     tp must be divisible by cp (by dp × cp with DP attention); no GPUs added;
//   --dcp-size "stripes a request's MLA KV cache across ranks in an existing tensor-parallel group":
//     tp must be divisible by dcp; no GPUs added;
//   mem_fraction_static: when not given, SGLang derives it from each GPU's memory at start
//     ((total − reserved) / total, reserved ≥ 10 GiB on GPUs above 60 GiB), so there is no fixed
//     default to report.
#include "estimate/estimate_engine.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gf::estimate {

namespace {

constexpr std::array<std::string_view, 2> kVllmFraction = {"gpu-memory-utilization", "gpu_memory_utilization"};
constexpr std::array<std::string_view, 2> kSglangFraction = {"mem-fraction-static", "mem_fraction_static"};
constexpr std::array<std::string_view, 4> kAnyFraction = {"gpu-memory-utilization", "gpu_memory_utilization",
                                                          "mem-fraction-static", "mem_fraction_static"};
constexpr std::array<std::string_view, 2> kDpAttention = {"enable-dp-attention", "enable_dp_attention"};

using core::lower;

std::optional<EngineKind> engine_from(std::string_view name) {
  const auto n = lower(name);
  if (n == "vllm") return EngineKind::Vllm;
  if (n == "sglang") return EngineKind::Sglang;
  return std::nullopt;
}

// "tp 4", or "tp 4 ('tp-size', largest of the list)" with where it came from.
std::string size_source(const ParallelSize& s, std::string_view name) {
  if (s.key.empty()) return fmt::format("{} 1 (not given)", name);
  return fmt::format("{} {} ('{}'{})", name, s.value, s.key, s.from_list ? ", largest of the list" : "");
}

// a × b, or nothing when the product passes kMaxWorldSize.
std::optional<unsigned> times(std::optional<unsigned> a, unsigned b) {
  if (!a || static_cast<std::uint64_t>(*a) * b > kMaxWorldSize) return std::nullopt;
  return *a * b;
}

std::string key_of(const ParallelSize& s, std::string_view name) {
  return s.key.empty() ? std::string(name) : fmt::format("'{}'", s.key);
}

}  // namespace

std::string_view engine_name(EngineKind e) {
  switch (e) {
    case EngineKind::Default: return "default";
    case EngineKind::Vllm: return "vllm";
    case EngineKind::Sglang: return "sglang";
  }
  return "default";
}

Result<EngineChoice> choose_engine(const TaskValue& task, std::string_view option) {
  // What the task says, from "engine" or else "base_runtime".
  std::optional<std::string> named;
  std::string named_key;
  for (const std::string_view key : {"engine", "base_runtime"}) {
    const auto* it = task.find(key);
    if (!it || it->is_null()) continue;
    if (!it->is_string()) {
      return make_error(
          fmt::format("task '{}': expected a string (\"vllm\" or \"sglang\"), got {}", key, describe_value(*it)));
    }
    auto value = it->get_string();
    if (named && lower(*named) != lower(value)) {
      return make_error(fmt::format("task 'engine' (\"{}\") and 'base_runtime' (\"{}\") disagree", *named, value));
    }
    if (!named) {
      named = std::move(value);
      named_key = std::string(key);
    }
  }

  if (!option.empty()) {
    const auto kind = engine_from(option);
    if (!kind) return make_error(fmt::format("engine option \"{}\": expected vllm or sglang", option));
    std::string line = fmt::format("engine: {} (from the engine option)", engine_name(*kind));
    if (named && lower(*named) != engine_name(*kind)) line += fmt::format(", overriding the task's \"{}\"", *named);
    return EngineChoice{*kind, std::move(line)};
  }
  if (!named || named->empty()) return EngineChoice{EngineKind::Default, "engine: none named; the seed's rule"};
  if (const auto kind = engine_from(*named)) {
    return EngineChoice{*kind, fmt::format("engine: {} (task '{}')", engine_name(*kind), named_key)};
  }
  return EngineChoice{
      EngineKind::Default,
      fmt::format("engine: \"{}\" (task '{}') has no rule of its own here; the seed's rule", *named, named_key)};
}

namespace {

Error too_large(std::string_view what) {
  return make_error(fmt::format("world size {} exceeds {} GPUs; check the parallel sizes", what, kMaxWorldSize));
}

// The first lines of the explanation: the sizes given, and the ones given under several keys.
void describe_sizes(const ParallelSizes& s, WorldSize& w) {
  std::vector<std::string> given;
  for (const Parallel p : {Parallel::Tp, Parallel::Pp, Parallel::Dp, Parallel::Cp, Parallel::Dcp}) {
    const auto& size = s.get(p);
    if (!size.key.empty()) given.push_back(size_source(size, parallel_name(p)));
    if (!size.other_keys.empty()) {
      std::string keys = fmt::format("'{}'", size.key);
      for (const auto& k : size.other_keys) keys += fmt::format(", '{}'", k);
      w.lines.push_back(
          fmt::format("{} given more than once ({}); using the largest, {}", parallel_name(p), keys, size.value));
    }
  }
  w.lines.insert(w.lines.begin(), given.empty() ? std::string("parallel sizes: none given (all 1)")
                                                : fmt::format("parallel sizes: {}", fmt::join(given, ", ")));
}

// vLLM: tp × pp × cp per replica, dp replicas; dcp reuses the tensor-parallel GPUs.
Result<void> vllm_world(const ParallelSizes& s, WorldSize& w) {
  const unsigned tp = s.tp.value, pp = s.pp.value, dp = s.dp.value, cp = s.cp.value, dcp = s.dcp.value;
  if (cp > 1 && dp > 1) {
    return make_error(
        fmt::format("vLLM: prefill context parallel ({} = {}) does not support data parallel "
                    "({} = {}) yet",
                    key_of(s.cp, "cp"), cp, key_of(s.dp, "dp"), dp));
  }
  if (cp == 1 && tp % dcp != 0) {
    return make_error(
        fmt::format("vLLM: decode context parallel ({} = {}) must divide tensor parallel "
                    "({} = {}); it reuses the tensor-parallel GPUs",
                    key_of(s.dcp, "dcp"), dcp, key_of(s.tp, "tp"), tp));
  }
  if (cp > 1 && dcp != 1 && dcp != cp && static_cast<std::uint64_t>(dcp) != static_cast<std::uint64_t>(tp) * cp) {
    return make_error(
        fmt::format("vLLM: with prefill context parallel ({} = {}), decode context parallel ({} = "
                    "{}) must be 1, {} or tp × cp = {}",
                    key_of(s.cp, "cp"), cp, key_of(s.dcp, "dcp"), dcp, cp, static_cast<std::uint64_t>(tp) * cp));
  }
  const auto per_replica = times(times(std::optional<unsigned>{tp}, pp), cp);
  const auto gpus = times(per_replica, dp);
  if (!gpus) return too_large("tp × pp × cp × dp");
  w.gpus = *gpus;
  w.lines.push_back(
      fmt::format("world size (vLLM) = tp {} × pp {} × cp {} (prefill context parallel) = {} per "
                  "replica × dp {} replicas = {}",
                  tp, pp, cp, *per_replica, dp, w.gpus));
  if (dcp > 1) {
    w.kv_shards = dcp;
    w.lines.push_back(fmt::format("dcp {} splits the KV cache across the tensor-parallel GPUs and adds none", dcp));
  }
  return {};
}

// SGLang: tp × pp per replica, dp replicas, unless DP attention shares the tensor-parallel GPUs; cp and
// dcp split them.
Result<void> sglang_world(const ParallelSizes& s, const TaskValue& parameters, WorldSize& w) {
  const unsigned tp = s.tp.value, pp = s.pp.value, dp = s.dp.value, cp = s.cp.value, dcp = s.dcp.value;
  auto dpa = read_switch(parameters, kDpAttention);
  if (!dpa) return dpa.error();
  const bool dp_attention = dpa->has_value() && (*dpa)->value;
  if (dp_attention && tp % dp != 0) {
    return make_error(
        fmt::format("SGLang: with DP attention ('{}'), data parallel ({} = {}) must divide "
                    "tensor parallel ({} = {}); the attention ranks split the tensor-parallel GPUs",
                    (*dpa)->key, key_of(s.dp, "dp"), dp, key_of(s.tp, "tp"), tp));
  }
  const std::uint64_t cp_split = static_cast<std::uint64_t>(cp) * (dp_attention ? dp : 1);
  if (cp > 1 && tp % cp_split != 0) {
    return make_error(
        fmt::format("SGLang: context parallel ({} = {}){} must divide tensor parallel ({} = {}); "
                    "it splits the tensor-parallel GPUs",
                    key_of(s.cp, "cp"), cp, dp_attention ? fmt::format(" × dp {}", dp) : "", key_of(s.tp, "tp"), tp));
  }
  if (tp % dcp != 0) {
    return make_error(
        fmt::format("SGLang: decode context parallel ({} = {}) must divide tensor parallel ({} = "
                    "{}); it splits the KV cache inside the tensor-parallel group",
                    key_of(s.dcp, "dcp"), dcp, key_of(s.tp, "tp"), tp));
  }
  const auto per_replica = times(std::optional<unsigned>{tp}, pp);
  if (dp_attention) {
    w.gpus = *per_replica;
    w.lines.push_back(
        fmt::format("world size (SGLang, DP attention) = tp {} × pp {} = {}; the dp {} attention "
                    "ranks share the tensor-parallel GPUs",
                    tp, pp, w.gpus, dp));
  } else {
    const auto gpus = times(per_replica, dp);
    if (!gpus) return too_large("tp × pp × dp");
    w.gpus = *gpus;
    w.lines.push_back(fmt::format("world size (SGLang) = tp {} × pp {} = {} per replica × dp {} replicas = {}", tp, pp,
                                  *per_replica, dp, w.gpus));
  }
  if (cp > 1) {
    w.lines.push_back(
        fmt::format("cp {} (attention context parallel) splits the tensor-parallel GPUs and adds "
                    "none",
                    cp));
  }
  if (dcp > 1) {
    w.kv_shards = dcp;
    w.lines.push_back(fmt::format("dcp {} splits the KV cache across the tensor-parallel GPUs and adds none", dcp));
  }
  return {};
}

}  // namespace

Result<WorldSize> world_size(EngineKind engine, const ParallelSizes& s, const TaskValue& parameters) {
  WorldSize w;
  const unsigned tp = s.tp.value, pp = s.pp.value, dp = s.dp.value, cp = s.cp.value, dcp = s.dcp.value;
  describe_sizes(s, w);
  const auto shards = times(std::optional<unsigned>{tp}, pp);
  if (!shards) return too_large(fmt::format("tp {} × pp {}", tp, pp));
  w.weight_shards = *shards;
  switch (engine) {
    case EngineKind::Default: {
      const unsigned widest = std::max({dp, cp, dcp});
      const auto gpus = times(times(std::optional<unsigned>{tp}, pp), widest);
      if (!gpus) return too_large("tp × pp × max(dp, cp, dcp)");
      w.gpus = *gpus;
      w.lines.push_back(
          fmt::format("world size = tp {} × pp {} × max(dp {}, cp {}, dcp {}) = {}", tp, pp, dp, cp, dcp, w.gpus));
      break;
    }
    case EngineKind::Vllm:
      if (auto r = vllm_world(s, w); !r) return r.error();
      break;
    case EngineKind::Sglang:
      if (auto r = sglang_world(s, parameters, w); !r) return r.error();
      break;
  }
  return w;
}

Result<MemoryFraction> memory_fraction(EngineKind engine, const TaskValue& parameters, double vllm_default) {
  MemoryFraction out;
  auto describe = [](const Param<double>& p) {
    return fmt::format("'{}' {}{}", p.key, p.value, p.from_list ? " (largest of the list)" : "");
  };
  auto ignored = [&](std::span<const std::string_view> keys, std::string_view owner) -> Result<void> {
    auto other = read_fraction(parameters, keys);
    if (!other) return other.error();
    if (*other) out.lines.push_back(fmt::format("'{}' is {}'s setting; ignored", (*other)->key, owner));
    return {};
  };
  switch (engine) {
    case EngineKind::Vllm: {
      auto f = read_fraction(parameters, kVllmFraction);
      if (!f) return f.error();
      if (*f) {
        out.value = (*f)->value;
        out.lines.push_back(
            fmt::format("memory fraction: {}: vLLM takes that share of each GPU's total memory at "
                        "start, so a GPU needs {} × its total free",
                        describe(**f), out.value.value()));
      } else {
        out.value = vllm_default;
        out.lines.push_back(
            fmt::format("memory fraction: gpu-memory-utilization not given; vLLM's default {}: a GPU "
                        "needs {} × its total free",
                        vllm_default, vllm_default));
      }
      if (auto r = ignored(kSglangFraction, "SGLang"); !r) return r.error();
      break;
    }
    case EngineKind::Sglang: {
      auto f = read_fraction(parameters, kSglangFraction);
      if (!f) return f.error();
      if (*f) {
        out.value = (*f)->value;
        out.lines.push_back(
            fmt::format("memory fraction: {}: SGLang takes that share of each GPU's total memory "
                        "for weights and KV cache, so a GPU needs {} × its total free",
                        describe(**f), out.value.value()));
      } else {
        out.lines.push_back(
            "memory fraction: mem-fraction-static not given; SGLang picks it from each GPU's size "
            "when it starts ((total − reserved) / total, reserving at least 10 GiB on GPUs over "
            "60 GiB), so none is applied here");
      }
      if (auto r = ignored(kVllmFraction, "vLLM"); !r) return r.error();
      break;
    }
    case EngineKind::Default: {
      // No engine named, but the task sets an engine's fraction: that engine will reserve it either way.
      auto f = read_fraction(parameters, kAnyFraction);
      if (!f) return f.error();
      if (*f) {
        out.value = (*f)->value;
        out.lines.push_back(
            fmt::format("memory fraction: {}: the engine takes that share of each GPU's total "
                        "memory, so a GPU needs {} × its total free",
                        describe(**f), out.value.value()));
      }
      break;
    }
  }
  return out;
}

}  // namespace gf::estimate
