// SPDX-License-Identifier: MIT
// The decoder pieces every importer shares, in the spirit of llama.cpp's build_norm / build_attn / build_ffn: token
// embedding, positions, norms, the attention block with its per-layer kind, the MLP, the residual layouts (pre-LN,
// post-LN, Reformer's two streams), final norm and head. An importer maps its config, names its tensors and calls
// these; the graph's ops, values and their order come out the same whichever importer builds them.
//
// Each piece adds one value per op, named like the op: `[n_tokens, width]`, the width taken from the op's input or
// weights, so an importer never repeats a shape the tensors already give.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

// A LINEAR's weights: weight [out, in], bias [out] or -1.
struct LinearWeights {
  int32_t weight = -1;
  int32_t bias = -1;
};

// A norm: LAYER_NORM (gamma [d], beta [d] or -1) or RMS_NORM (gain [d]: x / rms(x) * (weight_offset + gain); Gemma
// stores gain - 1 and takes weight_offset 1). weight -1: no norm at this place (Transformer-XL pre-LN normalises
// inside its attention op). The one place a norm's kind is chosen.
enum class NormKind { kLayer, kRms };
struct Norm {
  int32_t weight = -1;
  int32_t bias = -1;
  float eps = 1e-5f;
  NormKind kind = NormKind::kLayer;
  float weight_offset = 0.0f;  // RMS only
};

// Where a residual block normalises: before its body, y = x + f(norm(x)) (pre-LN), or after the sum,
// y = norm(x + f(x)) (post-LN).
enum class NormAt { kBefore, kAfter };

// up [F, d] -> activation -> down [d, F]; gated: up is gate | up [2F, d] (gate rows first) -> GATED_ACTIVATION
// act(gate) * up [F] -> down [d, F] (SwiGLU, GeGLU). DecoderBuilder::mlp is the one place that lays it out.
struct Mlp {
  LinearWeights up, down;
  fb::ActivationKind activation = fb::ActivationKind::GELU_ERF;
  bool gated = false;
};

// One decoder layer's weights: the attention block's norm and output projection, the MLP block's norm and MLP, and
// for sandwich layers (Gemma 2 and 3) the norms on each block's output before its residual add (weight -1: none).
// The attention itself (projection and ATTENTION op) is the importer's AttentionBody.
struct DecoderLayer {
  NormAt norm_at = NormAt::kBefore;
  Norm attn_norm;
  LinearWeights attn_out;  // [d, H*dh]
  Norm post_attn_norm;     // on attn_out's output, before the residual add
  Norm mlp_norm;
  Mlp mlp;
  Norm post_mlp_norm;      // on the MLP's output, before the residual add
};

// The names of a layer's ops (and values), each after the layer's prefix; an importer keeps its checkpoint's.
struct LayerNames {
  std::string attn_norm, attn_out, resid_attn;
  std::string mlp_norm, up, act, down, resid_mlp;
  std::string post_attn_norm = "post_attn_norm", post_mlp_norm = "post_mlp_norm";  // sandwich layers only
};

// One ATTENTION op and the fused projection that feeds it.
struct AttentionOp {
  fb::AttentionParamsT params;
  // q|k|v (or Reformer LSH's qk|v) projection [k*H*dh, d], a LINEAR before the op; weight -1: the op reads the block
  // input itself (RelativeXL and Compressive take their projection among `weights`).
  LinearWeights qkv;
  std::vector<int32_t> weights;  // the op's own weights, as its kind takes them (schema/tern.fbs, ATTENTION)
};

// The attention of the rotary families (Llama, Mistral, Qwen, Phi-3, Gemma): a fused q|k|v LINEAR
// [(H + 2 KV) dh, d], optionally per-head RMS_NORM of the q and k columns (group dh; gain [(H + KV) dh] = q_norm
// repeated H times then k_norm repeated KV times; v copied), ROTARY on the H + KV query and key heads, then the
// ATTENTION op (kind, kv_heads, scale, logit_softcap in `params`).
struct RotaryAttention {
  LinearWeights qkv;
  Norm qk_norm;  // kind kRms, weight -1: none
  fb::RotaryParamsT rotary;
  std::vector<int32_t> rotary_weights;  // inv_freq [rotary_dim / 2], then long_inv_freq (LONGROPE)
  fb::AttentionParamsT params;
};
// The op names of a RotaryAttention, each after the layer's prefix.
struct RotaryNames {
  std::string qkv = "self_attn.qkv_proj", qk_norm = "self_attn.qk_norm", rotary = "self_attn.rotary",
              attn = "self_attn";
};

// The attention of one layer: block input [n, d] -> heads concatenated [n, H*dh], before the output projection.
using AttentionBody = std::function<Result<int32_t>(int32_t attn_in)>;

class DecoderBuilder {
 public:
  explicit DecoderBuilder(GraphBuilder& graph) : g_(graph) {}
  GraphBuilder& graph() { return g_; }

  // Adds value `name` [n, width] and the op that writes it (op and value share the name).
  Result<int32_t> op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                     std::vector<int32_t> weights, int64_t width, OpParams params, int32_t version = 1);

  // The model input "ids" [n] (int32).
  Result<int32_t> ids();
  // Token embedding, table [V, d] -> [n, d]. A scale other than 1 (Transformer-XL multiplies by sqrt(d)) or a
  // projection [d, d_embed] makes it an ADAPTIVE_EMBEDDING of one cluster, which has both.
  Result<int32_t> embedding(const std::string& name, int32_t ids, int32_t table, int32_t proj = -1,
                            float scale = 1.0f);
  // Token embedding table [V, d] -> [n, d] times `scale` as one EMBEDDING (Gemma: sqrt(d) as float32); a scale other
  // than 1 is written with op version 2.
  Result<int32_t> scaled_embedding(const std::string& name, int32_t ids, int32_t table, float scale);
  // x + positions; weights as the kind takes them (LEARNED: table [P, d]; AXIAL: rows, cols; SINUSOIDAL: none).
  Result<int32_t> positions(const std::string& name, int32_t x, fb::PositionKind kind, int64_t max_positions,
                            std::vector<int32_t> weights);
  Result<int32_t> norm(const std::string& name, int32_t x, const Norm& norm);
  Result<int32_t> linear(const std::string& name, int32_t x, const LinearWeights& w);  // -> [n, out]
  Result<int32_t> add(const std::string& name, int32_t a, int32_t b);
  Result<int32_t> concat(const std::string& name, int32_t a, int32_t b);  // [n, wa] | [n, wb] -> [n, wa + wb]
  Result<int32_t> mlp(const std::string& prefix, const LayerNames& names, int32_t x, const Mlp& mlp);
  // The op's projection LINEAR `qkv_name` (when it has one), then the ATTENTION op `name` -> [n, H*dh].
  Result<int32_t> attention(const std::string& qkv_name, const std::string& name, int32_t x, const AttentionOp& op);
  // The rotary families' attention on x [n, d] -> [n, H*dh] (RotaryAttention).
  Result<int32_t> rotary_attention(const std::string& prefix, const RotaryNames& names, int32_t x,
                                   const RotaryAttention& a);
  // ACTIVATION SOFTCAP: cap * tanh(x / cap).
  Result<int32_t> softcap(const std::string& name, int32_t x, float cap);

  // Residual blocks. The attention block reads `reads` and adds to `adds_to`: the same value in a plain decoder,
  // Reformer's two streams in a reversible one (x1 += Attn(norm(x2)); x2 += Mlp(norm(x1))).
  Result<int32_t> attention_block(const std::string& prefix, const LayerNames& names, const DecoderLayer& layer,
                                  int32_t reads, int32_t adds_to, const AttentionBody& attention);
  Result<int32_t> mlp_block(const std::string& prefix, const LayerNames& names, const DecoderLayer& layer,
                            int32_t reads, int32_t adds_to);
  // One decoder layer on x: the attention block, then the MLP block.
  Result<int32_t> layer(const std::string& prefix, const LayerNames& names, const DecoderLayer& layer, int32_t x,
                        const AttentionBody& attention);

  // The head LINEAR [V, d] (the embedding table itself when tied) as the model output `name`. With `softcap` > 0
  // (Gemma 2's final-logit soft-capping) the LINEAR is `name`.uncapped and an ACTIVATION SOFTCAP writes `name`.
  Result<int32_t> head(const std::string& name, int32_t x, const LinearWeights& w, float softcap = 0.0f);
  Status output(int32_t value) { return g_.add_output(value); }

 private:
  int64_t width(int32_t value) const { return g_.values()[size_t(value)].width; }
  int64_t rows(int32_t tensor) const { return g_.tensors()[size_t(tensor)].shape.at(0); }
  // pre-LN: norm, body, add; post-LN: body, add, norm.
  Result<int32_t> residual(const std::string& norm_name, const std::string& add_name, NormAt at, const Norm& norm,
                           int32_t reads, int32_t adds_to, const std::function<Result<int32_t>(int32_t)>& body);

  GraphBuilder& g_;
};

}  // namespace tern::convert
