// SPDX-License-Identifier: MIT
// Importers for Hugging Face Gemma 2 and Gemma 3 text checkpoints (model_type gemma2, gemma3_text); spec:
// docs/models-gemma.md. Both: RMS norms scaling by 1 + weight, sandwich norms (post_attention_layernorm on the
// attention output, pre/post_feedforward_layernorm around the MLP), the embedding times sqrt(hidden_size), q·k scaled
// by query_pre_attn_scalar^-0.5, sliding-window and global layers. Gemma 2 soft-caps attention and final logits;
// Gemma 3 normalises q and k per head and gives its sliding layers their own RoPE (rope_local_base_freq).
#include <algorithm>
#include <cmath>
#include <string>

#include "config.h"
#include "importers/hf_decoder.h"
#include "importers/importers.h"

namespace tern::convert {
namespace {

struct GemmaFamily {
  const char* type;
  int64_t vocab, max_positions;
  double rope_theta;
  std::optional<double> attn_softcap, final_softcap;  // none: no soft-capping
  int64_t sliding_pattern;  // layer i slides unless (i + 1) % pattern == 0
  bool gemma3;
};

// transformers' configuration_gemma2.py and configuration_gemma3.py (Gemma3TextConfig).
const GemmaFamily kGemma2{"gemma2", 256000, 8192, 10000.0, 50.0, 30.0, 2, false};
const GemmaFamily kGemma3{"gemma3_text", 262208, 131072, 1000000.0, std::nullopt, std::nullopt, 6, true};

// A soft-capping field: a positive number, null for none, absent the class's default.
Result<float> softcap(const nlohmann::json& json, const Config& c, const std::string& key,
                      std::optional<double> fallback) {
  if (json.contains(key) && json[key].is_null()) return 0.0f;
  if (!c.has(key)) return float(fallback.value_or(0.0));
  TERN_ASSIGN_OR_RETURN(double v, c.positive_number(key));
  return float(v);
}

// The RoPE of one layer type. transformers 5 nests rope_parameters by layer type (rope_theta inside each);
// transformers 4 gives the global layers rope_theta with rope_scaling and Gemma 3's sliding layers
// rope_local_base_freq with the default rope.
Result<RopeTables> layer_rope(const Config& c, const GemmaFamily& f, const HfDecoder& m, bool sliding) {
  RopeConfig rope;
  rope.head_dim = m.head_dim;
  rope.max_position_embeddings = m.max_positions;
  TERN_ASSIGN_OR_RETURN(const double theta, c.positive_number("rope_theta", f.rope_theta));
  TERN_ASSIGN_OR_RETURN(const double local_theta, c.positive_number("rope_local_base_freq", 10000.0));
  if (c.has("partial_rotary_factor")) {
    TERN_ASSIGN_OR_RETURN(double prf, c.positive_number("partial_rotary_factor"));
    if (prf != 1.0) return c.field_error("partial_rotary_factor", "must be 1: Gemma rotates whole heads in transformers");
  }
  if (c.has("original_max_position_embeddings")) {
    TERN_ASSIGN_OR_RETURN(int64_t original, c.positive_int("original_max_position_embeddings"));
    rope.original_max_position_embeddings = original;
  }
  const bool local = f.gemma3 && sliding;
  rope.theta = local ? local_theta : theta;
  const nlohmann::json* params = c.get("rope_parameters");
  const char* layer_type = sliding ? "sliding_attention" : "full_attention";
  if (params && params->is_object() && (params->contains("sliding_attention") || params->contains("full_attention"))) {
    const nlohmann::json* entry = params->contains(layer_type) ? &(*params)[layer_type] : nullptr;
    if (!entry || entry->is_null()) {
      if (!local) return c.field_error(std::string("rope_parameters.") + layer_type, "is missing");
    } else {
      const Config pc(*entry, "config.json", std::string("rope_parameters.") + layer_type + ".");
      TERN_ASSIGN_OR_RETURN(rope.theta, pc.positive_number("rope_theta", rope.theta));
      rope.scaling = entry;
      rope.scaling_name = std::string("rope_parameters.") + layer_type;
    }
  } else if (!local) {
    rope.scaling = params ? params : c.get("rope_scaling");
    rope.scaling_name = params ? "rope_parameters" : "rope_scaling";
    if (params) {
      const Config pc(*params, "config.json", "rope_parameters.");
      TERN_ASSIGN_OR_RETURN(rope.theta, pc.positive_number("rope_theta", rope.theta));
    }
  }
  return rope_tables(rope);
}

Status import_gemma(const Checkpoint& checkpoint, GraphBuilder& g, const GemmaFamily& f) {
  const nlohmann::json& json = checkpoint.config();
  const Config c(json);
  HfDecoder m;
  m.model_type = f.type;
  m.gemma = true;
  TERN_ASSIGN_OR_RETURN(m.vocab, c.positive_int("vocab_size", f.vocab));
  TERN_ASSIGN_OR_RETURN(m.d, c.positive_int("hidden_size", 2304));
  TERN_ASSIGN_OR_RETURN(m.ffn, c.positive_int("intermediate_size", 9216));
  TERN_ASSIGN_OR_RETURN(m.layers, c.positive_int("num_hidden_layers", 26));
  TERN_ASSIGN_OR_RETURN(m.heads, c.positive_int("num_attention_heads", 8));
  TERN_ASSIGN_OR_RETURN(m.kv_heads, c.positive_int("num_key_value_heads", 4));
  TERN_ASSIGN_OR_RETURN(m.head_dim, c.positive_int("head_dim", 256));
  TERN_RETURN_IF_ERROR(hf_check_counts(checkpoint, c, "num_hidden_layers", m.layers, "num_attention_heads",
                                       std::max(m.heads, m.kv_heads), m.head_dim));
  TERN_ASSIGN_OR_RETURN(m.max_positions, c.positive_int("max_position_embeddings", f.max_positions));
  TERN_ASSIGN_OR_RETURN(double eps, c.positive_number("rms_norm_eps", 1e-6));
  m.eps = float(eps);
  TERN_ASSIGN_OR_RETURN(m.activation, hf_activation(c, "hidden_activation", "gelu_pytorch_tanh"));
  TERN_ASSIGN_OR_RETURN(m.tied, c.boolean("tie_word_embeddings", true));
  TERN_ASSIGN_OR_RETURN(m.qkv_bias, c.boolean("attention_bias", false));
  m.o_bias = m.qkv_bias;
  m.qk_norm = f.gemma3;
  if (f.gemma3)
    TERN_RETURN_IF_ERROR(hf_refuse_bool(c, "use_bidirectional_attention", false,
                                        "bidirectional attention is not a causal decoder"));
  TERN_ASSIGN_OR_RETURN(double scalar, c.positive_number("query_pre_attn_scalar", 256.0));
  m.attn_scale = float(std::pow(scalar, -0.5));
  m.embed_scale = float(std::sqrt(double(m.d)));
  TERN_ASSIGN_OR_RETURN(m.attn_softcap, softcap(json, c, "attn_logit_softcapping", f.attn_softcap));
  TERN_ASSIGN_OR_RETURN(m.final_softcap, softcap(json, c, "final_logit_softcapping", f.final_softcap));

  // Sliding layers: layer_types, else every layer but each sliding_window_pattern-th (Gemma 2: the even ones).
  int64_t pattern = f.sliding_pattern;
  if (f.gemma3) {
    TERN_ASSIGN_OR_RETURN(pattern, c.positive_int("sliding_window_pattern", f.sliding_pattern));
  }
  TERN_ASSIGN_OR_RETURN(std::vector<bool> sliding,
                        hf_layer_types(c, m.layers, [&](int64_t i) { return (i + 1) % pattern != 0; }));
  int64_t window = 4096;
  if (json.contains("sliding_window") && json["sliding_window"].is_null()) {
    window = 0;
  } else {
    TERN_ASSIGN_OR_RETURN(window, c.positive_int("sliding_window", 4096));
  }
  m.window.assign(size_t(m.layers), 0);
  for (int64_t i = 0; i < m.layers; ++i) m.window[size_t(i)] = sliding[size_t(i)] ? window : 0;
  TERN_RETURN_IF_ERROR(hf_check_shapes(c, m));

  // One RoPE for Gemma 2; Gemma 3 one per layer type (both checked, as transformers builds both; each stored only
  // when some layer uses it).
  m.rope_of_layer.assign(size_t(m.layers), 0);
  for (bool type : {false, true}) {
    if (!f.gemma3 && type) break;
    TERN_ASSIGN_OR_RETURN(RopeTables t, layer_rope(c, f, m, type));
    if (f.gemma3 && std::find(sliding.begin(), sliding.end(), type) == sliding.end()) continue;
    const size_t index = m.ropes.size();
    m.ropes.push_back(std::move(t));
    m.rope_names.push_back(!f.gemma3 ? "rope" : type ? "rope.sliding" : "rope.full");
    for (int64_t i = 0; i < m.layers; ++i)
      if (!f.gemma3 || sliding[size_t(i)] == type) m.rope_of_layer[size_t(i)] = index;
  }
  TERN_RETURN_IF_ERROR(hf_special_ids(checkpoint, c, 2, 1, &m));

  const int64_t windowed = std::count_if(m.window.begin(), m.window.end(), [](int64_t w) { return w > 0; });
  if (windowed > 0)
    m.summary = "sliding window " + std::to_string(window) + " on " + std::to_string(windowed) + "/" +
                std::to_string(m.layers) + " layers";
  if (m.attn_softcap > 0 || m.final_softcap > 0)
    m.summary += std::string(m.summary.empty() ? "" : ", ") + "soft-capping";
  return build_hf_decoder(checkpoint, g, m);
}

}  // namespace

Status import_gemma2(const Checkpoint& ck, GraphBuilder& g) { return import_gemma(ck, g, kGemma2); }
Status import_gemma3_text(const Checkpoint& ck, GraphBuilder& g) { return import_gemma(ck, g, kGemma3); }

}  // namespace tern::convert
