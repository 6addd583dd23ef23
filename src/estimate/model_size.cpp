#include "estimate/model_size.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "estimate/estimate_params.hpp"

namespace gf::estimate {

using nlohmann::json;

namespace {

// config.json is read with the JSON library directly (it never becomes a TaskValue): a non-negative
// integer however it was written, and a short description for messages, as describe_value gives.
std::optional<std::uint64_t> json_natural(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

std::string describe_json(const json& v) {
  if (v.is_array()) return fmt::format("a list of {}", v.size());
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return describe_value(TaskValue(v.get<bool>()));
  if (v.is_number_unsigned()) return describe_value(TaskValue(v.get<std::uint64_t>()));
  if (v.is_number_integer()) return describe_value(TaskValue(v.get<std::int64_t>()));
  if (v.is_number_float()) return describe_value(TaskValue(v.get<double>()));
  if (v.is_string()) return describe_value(TaskValue(v.get<std::string>()));
  return "null";
}

}  // namespace

namespace {

using core::lower;

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool digit(char c) { return c >= '0' && c <= '9'; }

// A positive integer under key, up to max_value (the caps keep every product below far from
// overflow, whatever a hostile config says). null counts as absent: some configs write
// "head_dim": null.
Result<std::optional<std::uint64_t>> config_uint(const json& cfg, std::string_view key, std::uint64_t max_value,
                                                 bool required, bool zero_ok = false) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) {
    if (required) return make_error(fmt::format("config.json: '{}' missing", key));
    return std::optional<std::uint64_t>{};
  }
  if (const auto n = json_natural(*it); n && (*n > 0 || zero_ok) && *n <= max_value) {
    return std::optional<std::uint64_t>{*n};
  }
  return make_error(fmt::format("config.json: '{}' must be a {} integer up to {}, got {}", key,
                                zero_ok ? "non-negative" : "positive", max_value, describe_json(*it)));
}

// Bytes per element of a torch dtype name as config.json writes it.
std::optional<double> dtype_bytes(std::string_view name) {
  const std::string n = lower(name);
  if (n == "bfloat16" || n == "float16" || n == "half" || n == "bf16" || n == "fp16") return 2.0;
  if (n == "float32" || n == "float" || n == "fp32") return 4.0;
  if (n.rfind("float8", 0) == 0 || n == "fp8" || n == "int8" || n == "uint8") return 1.0;
  return std::nullopt;
}

// Reads quantization_config into bytes per linear-layer weight. Returns nullopt (with a note) when
// the method is not understood, so the dtype stands.
std::optional<double> quantized_bytes(const json& q, std::string& label, std::vector<std::string>& notes) {
  if (!q.is_object()) return std::nullopt;
  std::string method;
  if (const auto m = q.find("quant_method"); m != q.end() && m->is_string()) method = lower(m->get<std::string>());
  auto bits_of = [](const json& o, std::string_view key) -> std::optional<std::uint64_t> {
    const auto it = o.find(key);
    if (it == o.end()) return std::nullopt;
    const auto b = json_natural(*it);
    if (!b || *b == 0 || *b > 32) return std::nullopt;
    return b;
  };
  const std::string name = method.empty() ? "quantization_config" : method;
  // AWQ and GPTQ write "bits" (old AutoAWQ configs "w_bit").
  for (const std::string_view key : {"bits", "w_bit"}) {
    if (const auto b = bits_of(q, key)) {
      label = fmt::format("{} {}-bit", name, *b);
      return static_cast<double>(*b) / 8.0;
    }
  }
  if (method == "fp8" || method == "fbgemm_fp8") {
    label = fmt::format("{} 8-bit", method);
    return 1.0;
  }
  if (method == "mxfp4") {
    label = "mxfp4 4-bit";
    return 0.5;
  }
  if (method == "bitsandbytes") {
    if (const auto it = q.find("load_in_4bit"); it != q.end() && it->is_boolean() && it->get<bool>()) {
      label = "bitsandbytes 4-bit";
      return 0.5;
    }
    if (const auto it = q.find("load_in_8bit"); it != q.end() && it->is_boolean() && it->get<bool>()) {
      label = "bitsandbytes 8-bit";
      return 1.0;
    }
  }
  if (method == "compressed-tensors") {
    // config_groups: {"group_0": {"weights": {"num_bits": 4, ...}, ...}, ...}; the widest group
    // bounds the size.
    std::uint64_t widest = 0;
    if (const auto groups = q.find("config_groups"); groups != q.end() && groups->is_object()) {
      for (const auto& g : *groups) {
        if (!g.is_object()) continue;
        const auto w = g.find("weights");
        if (w == g.end() || !w->is_object()) continue;
        if (const auto b = bits_of(*w, "num_bits")) widest = std::max(widest, *b);
      }
    }
    if (widest > 0) {
      label = fmt::format("compressed-tensors {}-bit", widest);
      return static_cast<double>(widest) / 8.0;
    }
  }
  notes.push_back(fmt::format("quantization_config ({}) not understood; weights counted at the dtype's size", name));
  return std::nullopt;
}

}  // namespace

namespace {

using MayRead = std::function<Result<std::optional<std::uint64_t>>(std::string_view, std::uint64_t, bool)>;

// The attention and vocabulary sizes: hidden, layers, heads, vocab (required), kv heads and head_dim.
Result<void> read_attention(const json& cfg, const MayRead& may, ModelShape& s) {
  auto need = [&](std::string_view key, std::uint64_t max_value, std::uint64_t& out) -> Result<void> {
    auto v = config_uint(cfg, key, max_value, true);
    if (!v) return v.error();
    out = **v;
    return {};
  };
  if (auto r = need("hidden_size", 1u << 20, s.hidden); !r) return r.error();
  if (auto r = need("num_hidden_layers", 1u << 14, s.layers); !r) return r.error();
  if (auto r = need("num_attention_heads", 1u << 14, s.heads); !r) return r.error();
  if (auto r = need("vocab_size", 1u << 24, s.vocab); !r) return r.error();
  auto kv = may("num_key_value_heads", 1u << 14, false);
  if (!kv) return kv.error();
  s.kv_heads = kv->value_or(s.heads);  // absent: plain multi-head attention
  auto hd = may("head_dim", 1u << 16, false);
  if (!hd) return hd.error();
  s.head_dim = hd->value_or(s.hidden / s.heads);
  if (s.head_dim == 0) return make_error("config.json: 'head_dim' is 0 (hidden_size smaller than num_attention_heads)");
  // Multi-head latent attention (DeepSeek): the KV cache holds the compressed latent.
  auto lora = may("kv_lora_rank", 1u << 16, false);
  if (!lora) return lora.error();
  if (*lora) {
    s.kv_lora_rank = **lora;
    auto rope = may("qk_rope_head_dim", 1u << 16, true);
    if (!rope) return rope.error();
    s.qk_rope_head_dim = rope->value_or(0);
  }
  return {};
}

// The MLP: dense intermediate size, or a mixture of experts' (experts, shared experts, dense layers).
Result<void> read_mlp(const MayRead& may, ModelShape& s) {
  // Mixture of experts: Mixtral and gpt-oss say num_local_experts, Qwen MoE num_experts, DeepSeek
  // n_routed_experts. 0 means dense.
  for (const std::string_view key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    auto e = may(key, 1u << 16, true);
    if (!e) return e.error();
    if (e->value_or(0) > 0) {
      s.experts = **e;
      break;
    }
  }
  auto inter = may("intermediate_size", 1u << 22, false);
  if (!inter) return inter.error();
  auto moe_inter = may("moe_intermediate_size", 1u << 22, false);
  if (!moe_inter) return moe_inter.error();
  if (s.experts == 0) {
    if (!*inter) return make_error("config.json: 'intermediate_size' missing");
    s.intermediate = **inter;
    return {};
  }
  if (!*moe_inter && !*inter) return make_error("config.json: 'intermediate_size' missing (nor moe_intermediate_size)");
  s.moe_intermediate = moe_inter->value_or(inter->value_or(0));
  s.intermediate = inter->value_or(s.moe_intermediate);
  auto shared = may("shared_expert_intermediate_size", 1u << 22, true);  // Qwen MoE
  if (!shared) return shared.error();
  auto n_shared = may("n_shared_experts", 1u << 10, true);  // DeepSeek
  if (!n_shared) return n_shared.error();
  s.shared_intermediate = shared->value_or(0) + n_shared->value_or(0) * s.moe_intermediate;
  auto dense = may("first_k_dense_replace", 1u << 14, true);  // DeepSeek: leading dense layers
  if (!dense) return dense.error();
  s.dense_layers = std::min(dense->value_or(0), s.layers);
  return {};
}

// The weights' bytes: the dtype (either key, in text_config or at the top) and any quantization_config.
void read_weight_bytes(const json& cfg, const json& doc, ModelShape& s) {
  // transformers >= 4.56 writes "dtype"; older configs "torch_dtype". Either may sit at the top.
  std::optional<std::string> dtype;
  for (const json* where : std::array<const json*, 2>{&cfg, &doc}) {
    for (const std::string_view key : {"torch_dtype", "dtype"}) {
      if (dtype) break;
      if (const auto it = where->find(key); it != where->end() && it->is_string()) dtype = it->get<std::string>();
    }
  }
  double bytes = 2;
  if (!dtype) {
    s.dtype = "bfloat16";
    s.notes.push_back("no torch_dtype; assuming bfloat16");
  } else if (const auto b = dtype_bytes(*dtype)) {
    s.dtype = lower(*dtype);
    bytes = *b;
  } else {
    s.dtype = "bfloat16";
    s.notes.push_back(fmt::format("torch_dtype {} not understood; assuming bfloat16", describe_json(json(*dtype))));
  }
  s.float32 = bytes == 4.0;
  // Embeddings and norms of an 8-bit checkpoint are still kept in 16 bits.
  s.other_bytes = std::max(bytes, 2.0);
  s.linear_bytes = bytes;
  for (const json* where : std::array<const json*, 2>{&cfg, &doc}) {
    const auto q = where->find("quantization_config");
    if (q == where->end()) continue;
    std::string label;
    if (const auto qb = quantized_bytes(*q, label, s.notes)) {
      s.linear_bytes = *qb;
      s.quantization = label;
    }
    break;
  }
}

}  // namespace

Result<ModelShape> parse_model_config(std::string_view json_text) {
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return make_error(fmt::format("config.json: invalid JSON ({})", e.what()));
  }
  if (!doc.is_object()) return make_error(fmt::format("config.json: expected an object, got {}", describe_json(doc)));

  ModelShape s;
  const json* cfg = &doc;
  // Multimodal checkpoints (Llama 3.2 Vision, Llama 4, ...) keep the language model's shape under
  // text_config; the vision tower is small next to it and is left out.
  if (!doc.contains("hidden_size")) {
    if (const auto t = doc.find("text_config"); t != doc.end() && t->is_object()) {
      cfg = &*t;
      s.notes.push_back("shape read from text_config (the vision or audio tower is not counted)");
    }
  }
  if (const auto t = cfg->find("model_type"); t != cfg->end() && t->is_string())
    s.model_type = t->get<std::string>();
  else if (const auto u = doc.find("model_type"); u != doc.end() && u->is_string())
    s.model_type = u->get<std::string>();

  const MayRead may = [&](std::string_view key, std::uint64_t max_value, bool zero_ok) {
    return config_uint(*cfg, key, max_value, false, zero_ok);
  };
  if (auto r = read_attention(*cfg, may, s); !r) return r.error();
  if (auto r = read_mlp(may, s); !r) return r.error();

  if (const auto t = cfg->find("tie_word_embeddings"); t != cfg->end() && t->is_boolean()) {
    s.tied_embeddings = t->get<bool>();
  } else if (const auto u = doc.find("tie_word_embeddings"); u != doc.end() && u->is_boolean()) {
    s.tied_embeddings = u->get<bool>();
  }
  // Architectures whose MLP is up+down without a gate (2 matrices instead of 3).
  static constexpr std::array<std::string_view, 8> kUngated = {"gpt_neox", "gptj", "opt",         "bloom",
                                                               "falcon",   "phi",  "gpt_bigcode", "starcoder2"};
  s.gated_mlp = std::find(kUngated.begin(), kUngated.end(), lower(s.model_type)) == kUngated.end();
  read_weight_bytes(*cfg, doc, s);
  return s;
}

ParamCount count_parameters(const ModelShape& s) {
  const auto h = static_cast<double>(s.hidden);
  const auto layers = static_cast<double>(s.layers);
  const double mats = s.gated_mlp ? 3.0 : 2.0;
  ParamCount c;
  // q and o are heads × head_dim wide, k and v kv_heads × head_dim.
  c.attention = layers * h * static_cast<double>(s.head_dim) *
                (2.0 * static_cast<double>(s.heads) + 2.0 * static_cast<double>(s.kv_heads));
  const double dense_mlp = mats * h * static_cast<double>(s.intermediate);
  if (s.experts == 0) {
    c.mlp = layers * dense_mlp;
  } else {
    const auto e = static_cast<double>(s.experts);
    const double moe_layer = e * mats * h * static_cast<double>(s.moe_intermediate)  // experts
                             + h * e                                                 // router
                             + mats * h * static_cast<double>(s.shared_intermediate);
    const auto dense = static_cast<double>(s.dense_layers);
    c.mlp = dense * dense_mlp + (layers - dense) * moe_layer;
  }
  c.embeddings = static_cast<double>(s.vocab) * h * (s.tied_embeddings ? 1.0 : 2.0);
  c.norms = layers * 2.0 * h + h;  // two per layer and the final one
  return c;
}

namespace {

// Parses digits[.digits] at s[i..]; advances i. No locale, no exceptions.
std::optional<double> number_at(const std::string& s, std::size_t& i) {
  const std::size_t start = i;
  double v = 0;
  while (i < s.size() && digit(s[i])) v = v * 10 + (s[i++] - '0');
  if (i == start) return std::nullopt;
  if (i + 1 < s.size() && s[i] == '.' && digit(s[i + 1])) {
    ++i;
    double scale = 0.1;
    while (i < s.size() && digit(s[i])) {
      v += (s[i++] - '0') * scale;
      scale /= 10;
    }
  }
  return v;
}

std::optional<double> unit_at(const std::string& s, std::size_t& i) {
  if (i >= s.size()) return std::nullopt;
  double mult = 0;
  switch (s[i]) {
    case 'm': mult = 1e6; break;
    case 'b': mult = 1e9; break;
    case 't': mult = 1e12; break;
    default: return std::nullopt;
  }
  // The unit ends the word: "7b-instruct" is a size, "7bit" or "3b1" is not.
  if (i + 1 < s.size() && alnum(s[i + 1])) return std::nullopt;
  ++i;
  return mult;
}

bool has_word(const std::string& s, std::string_view word) {
  for (std::size_t pos = s.find(word); pos != std::string::npos; pos = s.find(word, pos + 1)) {
    const bool left = pos == 0 || !alnum(s[pos - 1]);
    const std::size_t end = pos + word.size();
    const bool right = end == s.size() || !alnum(s[end]);
    if (left && right) return true;
  }
  return false;
}

// Mixtral's published totals: the experts replace only the MLP, so 8 experts of a 7B model make
// 46.7B, not 56B.
struct KnownMoe {
  double experts, each, total;
};
constexpr std::array<KnownMoe, 2> kKnownMoe = {{{8, 7, 46.7e9}, {8, 22, 140.6e9}}};
// Share of a dense Mistral-style model that is MLP (Mistral 7B: 5.64B of 7.24B); used to turn an
// "<e>x<n>B" name the table does not know into a total.
constexpr double kMlpShare = 0.78;

// Names that carry no size; sizes from the published checkpoints.
struct KnownName {
  std::string_view name;
  double params;
};
constexpr std::array<KnownName, 4> kKnownNames = {
    {{"gpt2", 124e6}, {"gpt2-medium", 355e6}, {"gpt2-large", 774e6}, {"gpt2-xl", 1.5e9}}};

NamedSize named(double params, std::string how) {
  NamedSize n;
  n.params = params;
  n.how = std::move(how);
  return n;
}

}  // namespace

std::optional<NamedSize> size_from_name(std::string_view id) {
  const std::string s = lower(id);
  std::optional<NamedSize> out;
  for (std::size_t i = 0; i < s.size() && !out; ++i) {
    // A size starts a word: "70b" in "llama-3-70b", not the "2" in "qwen2".
    if (!digit(s[i]) || (i > 0 && alnum(s[i - 1]))) continue;
    std::size_t j = i;
    const auto n = number_at(s, j);
    if (!n) continue;
    if (j < s.size() && s[j] == 'x') {  // "<experts>x<size><unit>"
      std::size_t k = j + 1;
      const auto each = number_at(s, k);
      if (!each) continue;
      const auto unit = unit_at(s, k);
      if (!unit || *n < 1 || *n > 4096 || *each <= 0) continue;  // "9x0b" is no model
      const double nominal = *each * *unit;
      for (const auto& m : kKnownMoe) {
        if (m.experts == *n && m.each == *each && *unit == 1e9) {
          out = named(m.total, fmt::format("{} in the name: Mixtral's published total; the experts share "
                                           "attention and embeddings",
                                           s.substr(i, k - i)));
        }
      }
      if (!out) {
        const double total = nominal * (1.0 + (*n - 1.0) * kMlpShare);
        out = named(
            total, fmt::format("{} in the name: ≈ {} × (1 + {} × {:.0f} %): each further expert adds only "
                               "an MLP, {:.0f} % of a dense model; the experts share attention and embeddings",
                               s.substr(i, k - i), format_params(nominal), *n - 1.0, kMlpShare * 100, kMlpShare * 100));
      }
      continue;
    }
    const auto unit = unit_at(s, j);
    if (!unit) continue;
    const double params = *n * *unit;
    if (params <= 0) continue;
    out = named(params, fmt::format("{} in the name", s.substr(i, j - i)));
  }
  if (!out) {
    const auto slash = s.find_last_of('/');
    const std::string_view last =
        slash == std::string::npos ? std::string_view(s) : std::string_view(s).substr(slash + 1);
    for (const auto& k : kKnownNames) {
      if (last == k.name)
        out = named(k.params, fmt::format("{}: {} params (published size)", k.name, format_params(k.params)));
    }
  }
  // A thousand trillion parameters is no model; a number that large is part of some other name.
  if (!out || !(out->params > 0 && out->params <= 1e15)) return std::nullopt;

  for (const std::string_view w : {"awq", "gptq", "int4", "w4a16", "4bit", "mxfp4", "nf4"}) {
    if (has_word(s, w)) {
      out->bytes = 0.5;
      out->quantization = fmt::format("4-bit ({} in the name)", w);
      return out;
    }
  }
  for (const std::string_view w : {"fp8", "int8", "w8a8", "w8a16", "8bit"}) {
    if (has_word(s, w)) {
      out->bytes = 1.0;
      out->quantization = fmt::format("8-bit ({} in the name)", w);
      return out;
    }
  }
  return out;
}

std::uint64_t seed_table_mib(std::string_view id) {
  // The seed matched substrings, so "llama70b" counts as 70B here too.
  const std::string s = lower(id);
  if (s.find("70b") != std::string::npos || s.find("65b") != std::string::npos) return 20000;
  if (s.find("13b") != std::string::npos || s.find("7b") != std::string::npos) return 12000;
  return 8000;
}

std::string format_params(double params) {
  if (params >= 1e12) return fmt::format("{:.2f} T", params / 1e12);
  if (params >= 100e9) return fmt::format("{:.0f} B", params / 1e9);
  if (params >= 10e9) return fmt::format("{:.1f} B", params / 1e9);
  if (params >= 1e9) return fmt::format("{:.2f} B", params / 1e9);
  if (params >= 1e6) return fmt::format("{:.0f} M", params / 1e6);
  if (params >= 1e3) return fmt::format("{:.0f} K", params / 1e3);
  return fmt::format("{:.0f}", params);
}

}  // namespace gf::estimate
