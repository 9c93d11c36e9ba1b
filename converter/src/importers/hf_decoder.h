// SPDX-License-Identifier: MIT
// The Hugging Face decoders with rotary positions and RMS norms (Llama, Mistral, Qwen 2 and 3, Phi-3, Gemma 2 and
// 3): one description the family importers fill from their config (llama_family.cpp, gemma.cpp), and one build that
// reads the checkpoint's tensors by their Hugging Face names and lays the graph out with DecoderBuilder:
//
//   ids -> EMBEDDING (x embed_scale) -> per layer:
//     h = x + [post_attn_norm](o_proj(ATTENTION(ROTARY([qk RMS_NORM](qkv_proj(input_layernorm(x)))))))
//     x = h + [post_feedforward_layernorm](down(GATED_ACTIVATION(gate|up(pre_ff_norm(h)))))
//   -> norm -> lm_head (or the embedding, tied) [-> SOFTCAP] = logits
//
// Specs: docs/models-llama.md, docs/models-gemma.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "config.h"
#include "format/status.h"
#include "graph_builder.h"
#include "importers/rope_tables.h"

namespace tern::convert {

struct HfDecoder {
  std::string model_type;
  int64_t vocab = 0, d = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  int64_t max_positions = 0;  // max_position_embeddings: the file's max_context
  float eps = 1e-6f;          // rms_norm_eps
  fb::ActivationKind activation = fb::ActivationKind::SILU;  // of the gate
  bool tied = false;
  bool qkv_bias = false;      // q, k, v projections
  bool o_bias = false;        // o_proj
  bool mlp_bias = false;      // gate, up, down
  bool qk_norm = false;       // per-head q_norm / k_norm (Qwen 3, Gemma 3)
  bool fused_qkv = false;     // Phi-3: self_attn.qkv_proj
  bool fused_gate_up = false;  // Phi-3: mlp.gate_up_proj
  bool gemma = false;         // norms scale by 1 + weight; sandwich norms around attention and MLP
  float embed_scale = 1.0f;
  float attn_scale = 0.0f;    // multiplies q·k
  float attn_softcap = 0.0f;  // attention-logit soft-capping; 0: none
  float final_softcap = 0.0f; // final-logit soft-capping; 0: none
  std::vector<int64_t> window;  // per layer: 0 dense, else the sliding window
  std::vector<RopeTables> ropes;       // the distinct RoPEs
  std::vector<size_t> rope_of_layer;   // per layer: its index in ropes
  std::vector<std::string> rope_names; // per RoPE: its tensors' name prefix ("rope", "rope.sliding", ...)
  int32_t bos_id = -1, eos_id = -1;
  std::vector<int32_t> extra_eos_ids;
  // The tokenizer starts every text with bos_id: tokenizer_config.json's add_bos_token, else the family's
  // tokenizer class default (Llama's and Gemma's true; Qwen's and GPT-2's false).
  bool add_bos = false;
  std::string summary;  // the description's tail, e.g. "GQA 8/2, sliding window 4096 on every layer"
};

// Fields every family reads alike ------------------------------------------------------------------------------

// A gate or MLP activation by its Hugging Face name (hidden_act, hidden_activation, activation_function); `key`
// names the field in the error for one the runtime cannot run.
Result<fb::ActivationKind> hf_activation(const Config& c, const std::string& key, const std::string& fallback);

// Per layer: whether it is a sliding-window layer. `layer_types` (sliding_attention / full_attention) when the
// config has it, else `fallback(i)`.
Result<std::vector<bool>> hf_layer_types(const Config& c, int64_t layers, const std::function<bool(int64_t)>& fallback);

// bos_token_id and eos_token_id (an int or a list: the first is eos, the rest extra ids) from config.json, then
// generation_config.json beside it, which wins where it sets them. Defaults: the family's. `out->vocab` must be
// set: an id at or past it is dropped (-1), as no logit can name it.
Status hf_special_ids(const Checkpoint& checkpoint, const Config& c, std::optional<int32_t> bos,
                      std::optional<int32_t> eos, HfDecoder* out);

// A JSON file `name` in `dir` (generation_config.json, tokenizer_config.json): its value, or nothing when the
// directory has none. `what` names the file's kind in a size error.
Result<std::optional<nlohmann::json>> hf_read_json_beside(const std::string& dir, const std::string& name,
                                                          const char* what);

// Refuses `key` when present and not `allowed` (e.g. attention_bias true on a family without biases).
Status hf_refuse_bool(const Config& c, const std::string& key, bool allowed, const std::string& why);

// kv heads dividing heads, head_dim even, and the like: checked once for every family.
Status hf_check_shapes(const Config& c, const HfDecoder& m);
// The special ids hf_special_ids read (bos, eos, the extra end ids, add_bos) into the model's metadata.
void hf_write_special_ids(const HfDecoder& m, ModelMetadata* meta);
// Before anything is sized by them: a layer count above the checkpoint's tensors (each layer has several), or heads
// or a head size above the runtime's attention limit (4096), is refused naming its key.
Status hf_check_counts(const Checkpoint& checkpoint, const Config& c, const char* layers_key, int64_t layers,
                       const char* heads_key, int64_t heads, int64_t head_dim);

// The checkpoint to graph -------------------------------------------------------------------------------------------

Status build_hf_decoder(const Checkpoint& checkpoint, GraphBuilder& graph, const HfDecoder& m);

}  // namespace tern::convert
