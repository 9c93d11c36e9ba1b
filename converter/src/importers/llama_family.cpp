// SPDX-License-Identifier: MIT
// Importers for Hugging Face Llama, Mistral, Qwen2, Qwen3 and Phi-3 checkpoints (model_type llama, mistral, qwen2,
// qwen3, phi3); spec: docs/models-llama.md. Each reads its config class's fields with that class's defaults
// (transformers' configuration_<family>.py) into an HfDecoder, which hf_decoder.cpp builds.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "config.h"
#include "importers/hf_decoder.h"
#include "importers/importers.h"

namespace tern::convert {
namespace {

// One config class's __init__ defaults, and what its modeling file does with the fields.
struct Family {
  const char* type;
  int64_t vocab, hidden, intermediate, layers, heads;
  std::optional<int64_t> kv_heads;  // none: num_attention_heads
  std::optional<int64_t> head_dim;  // none: hidden_size / num_attention_heads
  int64_t max_positions;
  double eps;
  std::optional<int32_t> bos, eos;
  bool has_attention_bias;    // attention_bias puts biases on q, k, v and o
  bool fixed_qkv_bias;        // Qwen2: q, k, v always have biases, o never
  bool has_mlp_bias;
  bool qk_norm;
  bool phi3_names;            // qkv_proj, gate_up_proj; partial rotary; original_max_position_embeddings
  enum { kNoWindow, kEveryLayer, kQwen } window_rule;
  std::optional<int64_t> sliding_window;  // the class's default
};

// transformers' configuration_llama.py, configuration_mistral.py, configuration_qwen2.py, configuration_qwen3.py,
// configuration_phi3.py.
const Family kLlama{"llama", 32000, 4096, 11008, 32, 32, std::nullopt, std::nullopt, 2048, 1e-6, 1, 2,
                    true, false, true, false, false, Family::kNoWindow, std::nullopt};
const Family kMistral{"mistral", 32000, 4096, 14336, 32, 32, 8, std::nullopt, 4096 * 32, 1e-6, 1, 2,
                      false, false, false, false, false, Family::kEveryLayer, 4096};
const Family kQwen2{"qwen2", 151936, 4096, 22016, 32, 32, 32, std::nullopt, 32768, 1e-6, std::nullopt, std::nullopt,
                    false, true, false, false, false, Family::kQwen, 4096};
const Family kQwen3{"qwen3", 151936, 4096, 22016, 32, 32, 32, 128, 32768, 1e-6, std::nullopt, std::nullopt,
                    true, false, false, true, false, Family::kQwen, 4096};
const Family kPhi3{"phi3", 32064, 3072, 8192, 32, 32, std::nullopt, std::nullopt, 4096, 1e-5, 1, 32000,
                   false, false, false, false, true, Family::kEveryLayer, std::nullopt};

// The sliding_window field: a positive integer; null means no window, absent the class's default.
Result<int64_t> window_field(const nlohmann::json& json, const Config& c, std::optional<int64_t> fallback) {
  if (json.contains("sliding_window") && json["sliding_window"].is_null()) return int64_t(0);
  if (!c.has("sliding_window")) return fallback.value_or(0);
  return c.positive_int("sliding_window");
}

// Window of each layer: 0 dense.
Result<std::vector<int64_t>> windows(const nlohmann::json& json, const Config& c, const Family& f, int64_t layers) {
  std::vector<int64_t> out(size_t(layers), 0);
  if (f.window_rule == Family::kNoWindow) return out;  // the class ignores sliding_window
  TERN_ASSIGN_OR_RETURN(const int64_t w, window_field(json, c, f.sliding_window));
  if (f.window_rule == Family::kEveryLayer) {
    for (auto& x : out) x = w;
    return out;
  }
  // Qwen: sliding_window applies only with use_sliding_window, on layers from max_window_layers on (or those
  // layer_types calls sliding_attention).
  TERN_ASSIGN_OR_RETURN(bool use, c.boolean("use_sliding_window", false));
  TERN_ASSIGN_OR_RETURN(int64_t from, c.integer("max_window_layers", 0, 28));
  const bool windowed = use && w > 0;
  TERN_ASSIGN_OR_RETURN(std::vector<bool> sliding,
                        hf_layer_types(c, layers, [&](int64_t i) { return windowed && i >= from; }));
  for (int64_t i = 0; i < layers; ++i) out[size_t(i)] = windowed && sliding[size_t(i)] ? w : 0;
  return out;
}

Status import_family(const Checkpoint& checkpoint, GraphBuilder& g, const Family& f) {
  const nlohmann::json& json = checkpoint.config();
  const Config c(json);
  HfDecoder m;
  m.model_type = f.type;
  TERN_ASSIGN_OR_RETURN(m.vocab, c.positive_int("vocab_size", f.vocab));
  TERN_ASSIGN_OR_RETURN(m.d, c.positive_int("hidden_size", f.hidden));
  TERN_ASSIGN_OR_RETURN(m.ffn, c.positive_int("intermediate_size", f.intermediate));
  TERN_ASSIGN_OR_RETURN(m.layers, c.positive_int("num_hidden_layers", f.layers));
  TERN_ASSIGN_OR_RETURN(m.heads, c.positive_int("num_attention_heads", f.heads));
  TERN_ASSIGN_OR_RETURN(m.kv_heads, c.positive_int("num_key_value_heads", f.kv_heads.value_or(m.heads)));
  if (!f.head_dim && !c.has("head_dim") && m.d % m.heads != 0)
    return c.field_error("num_attention_heads", std::to_string(m.heads) + " does not divide hidden_size " +
                                                    std::to_string(m.d) + " (and head_dim is not given)");
  TERN_ASSIGN_OR_RETURN(m.head_dim, c.positive_int("head_dim", f.head_dim.value_or(m.d / m.heads)));
  TERN_RETURN_IF_ERROR(hf_check_counts(checkpoint, c, "num_hidden_layers", m.layers, "num_attention_heads",
                                       std::max(m.heads, m.kv_heads), m.head_dim));
  TERN_ASSIGN_OR_RETURN(m.max_positions, c.positive_int("max_position_embeddings", f.max_positions));
  TERN_ASSIGN_OR_RETURN(double eps, c.positive_number("rms_norm_eps", f.eps));
  m.eps = float(eps);
  TERN_ASSIGN_OR_RETURN(m.activation, hf_activation(c, "hidden_act", "silu"));
  TERN_ASSIGN_OR_RETURN(m.tied, c.boolean("tie_word_embeddings", false));
  if (f.has_attention_bias) {
    TERN_ASSIGN_OR_RETURN(m.qkv_bias, c.boolean("attention_bias", false));
    m.o_bias = m.qkv_bias;
  } else if (!f.fixed_qkv_bias) {
    TERN_RETURN_IF_ERROR(hf_refuse_bool(c, "attention_bias", false,
                                        std::string(f.type) + " attention has no biases in transformers"));
  }
  if (f.fixed_qkv_bias) m.qkv_bias = true;
  if (f.has_mlp_bias) {
    TERN_ASSIGN_OR_RETURN(m.mlp_bias, c.boolean("mlp_bias", false));
  }
  m.qk_norm = f.qk_norm;
  m.fused_qkv = m.fused_gate_up = f.phi3_names;
  m.attn_scale = float(1.0 / std::sqrt(double(m.head_dim)));
  TERN_ASSIGN_OR_RETURN(m.window, windows(json, c, f, m.layers));
  TERN_RETURN_IF_ERROR(hf_check_shapes(c, m));

  RopeConfig rope;
  const nlohmann::json* params = c.get("rope_parameters");  // transformers 5: rope_theta inside
  rope.scaling = params ? params : c.get("rope_scaling");
  rope.scaling_name = params ? "rope_parameters" : "rope_scaling";
  const nlohmann::json no_params = nlohmann::json::object();  // outlives rc, which keeps a reference
  const Config rc(params ? *params : no_params, "config.json", "rope_parameters.");
  TERN_ASSIGN_OR_RETURN(const double theta, c.positive_number("rope_theta", 10000.0));
  TERN_ASSIGN_OR_RETURN(rope.theta, rc.positive_number("rope_theta", theta));
  TERN_ASSIGN_OR_RETURN(double prf, c.positive_number("partial_rotary_factor", 1.0));
  TERN_ASSIGN_OR_RETURN(rope.partial_rotary_factor, rc.positive_number("partial_rotary_factor", prf));
  if (!f.phi3_names && rope.partial_rotary_factor != 1.0)
    return c.field_error("partial_rotary_factor", std::string("must be 1: ") + f.type +
                                                      " rotates whole heads in transformers");
  rope.head_dim = m.head_dim;
  rope.max_position_embeddings = m.max_positions;
  if (f.phi3_names) {
    TERN_ASSIGN_OR_RETURN(int64_t original, c.positive_int("original_max_position_embeddings", 4096));
    rope.original_max_position_embeddings = original;
  } else if (c.has("original_max_position_embeddings")) {
    TERN_ASSIGN_OR_RETURN(int64_t original, c.positive_int("original_max_position_embeddings"));
    rope.original_max_position_embeddings = original;
  }
  TERN_ASSIGN_OR_RETURN(RopeTables tables, rope_tables(rope));
  m.ropes = {std::move(tables)};
  m.rope_of_layer.assign(size_t(m.layers), 0);
  m.rope_names = {"rope"};
  TERN_RETURN_IF_ERROR(hf_special_ids(checkpoint, c, f.bos, f.eos, &m));

  int64_t windowed = 0;
  for (int64_t w : m.window) windowed += w > 0;
  if (windowed > 0)
    m.summary = "sliding window " + std::to_string(*std::max_element(m.window.begin(), m.window.end())) + " on " +
                std::to_string(windowed) + "/" + std::to_string(m.layers) + " layers";
  return build_hf_decoder(checkpoint, g, m);
}

}  // namespace

Status import_llama(const Checkpoint& ck, GraphBuilder& g) { return import_family(ck, g, kLlama); }
Status import_mistral(const Checkpoint& ck, GraphBuilder& g) { return import_family(ck, g, kMistral); }
Status import_qwen2(const Checkpoint& ck, GraphBuilder& g) { return import_family(ck, g, kQwen2); }
Status import_qwen3(const Checkpoint& ck, GraphBuilder& g) { return import_family(ck, g, kQwen3); }
Status import_phi3(const Checkpoint& ck, GraphBuilder& g) { return import_family(ck, g, kPhi3); }

}  // namespace tern::convert
