// SPDX-License-Identifier: MIT
// Importer for Hugging Face GPT-2 checkpoints ("model_type": "gpt2", GPT2LMHeadModel); spec: docs/models-gpt2.md.
//
// ids -> EMBEDDING wte + POSITION (LEARNED, wpe) -> per layer, pre-LN:
//   h = x + c_proj(ATTENTION[Dense](c_attn(ln_1(x))));  x = h + mlp.c_proj(act(mlp.c_fc(ln_2(h))))
// -> ln_f -> head (wte, tied) = logits. Conv1D weights are stored [in, out]; the converter transposes them to the
// LINEAR's [out, in]. Tensor names with or without the "transformer." prefix.
#include <cmath>
#include <string>

#include "config.h"
#include "importers/decoder_builder.h"
#include "importers/hf_decoder.h"
#include "importers/importers.h"
#include "importers/tensor_source.h"

namespace tern::convert {
namespace {

struct Gpt2Config {
  int64_t vocab = 0, positions = 0, d = 0, layers = 0, heads = 0, inner = 0;
  fb::ActivationKind activation = fb::ActivationKind::GELU_TANH;
  float eps = 1e-5f;
  bool scale_attn = true;
  bool tied = true;
};

// Missing fields take GPT2Config's defaults (transformers' configuration_gpt2.py).
Result<Gpt2Config> read_config(const Config& c) {
  Gpt2Config r;
  TERN_ASSIGN_OR_RETURN(r.vocab, c.positive_int("vocab_size", 50257));
  TERN_ASSIGN_OR_RETURN(r.positions, c.positive_int("n_positions", 1024));
  TERN_ASSIGN_OR_RETURN(r.d, c.positive_int("n_embd", 768));
  TERN_ASSIGN_OR_RETURN(r.layers, c.positive_int("n_layer", 12));
  TERN_ASSIGN_OR_RETURN(r.heads, c.positive_int("n_head", 12));
  TERN_ASSIGN_OR_RETURN(r.inner, c.positive_int("n_inner", 4 * r.d));  // null: 4 * n_embd
  TERN_ASSIGN_OR_RETURN(r.activation, hf_activation(c, "activation_function", "gelu_new"));
  TERN_ASSIGN_OR_RETURN(double eps, c.positive_number("layer_norm_epsilon", 1e-5));
  r.eps = float(eps);
  // scale_attn_weights false: q·k unscaled, which the op's scale 1 computes exactly.
  TERN_ASSIGN_OR_RETURN(r.scale_attn, c.boolean("scale_attn_weights", true));
  TERN_RETURN_IF_ERROR(hf_refuse_bool(c, "scale_attn_by_inverse_layer_idx", false,
                                      "per-layer attention scaling is not supported"));
  TERN_RETURN_IF_ERROR(hf_refuse_bool(c, "reorder_and_upcast_attn", false,
                                      "the reordered, upcast attention path is not supported"));
  TERN_ASSIGN_OR_RETURN(r.tied, c.boolean("tie_word_embeddings", true));
  if (r.d % r.heads != 0)
    return c.field_error("n_head", std::to_string(r.heads) + " does not divide n_embd " + std::to_string(r.d));
  return r;
}

const LayerNames kLayerNames{"ln_1", "attn.c_proj", "resid_attn", "ln_2", "mlp.c_fc", "mlp.act", "mlp.c_proj",
                             "resid_mlp"};

// A Conv1D: weight [in, out] stored transposed as [out, in], bias [out].
Result<LinearWeights> conv1d(TensorSource& src, const std::string& prefix, int64_t in, int64_t out) {
  LinearWeights w;
  TERN_ASSIGN_OR_RETURN(w.weight, src.add_transposed(prefix + ".weight", in, out));
  TERN_ASSIGN_OR_RETURN(w.bias, src.add(prefix + ".bias", {out}));
  return w;
}

}  // namespace

Status import_gpt2(const Checkpoint& checkpoint, GraphBuilder& g) {
  const Config c(checkpoint.config());
  TERN_ASSIGN_OR_RETURN(const Gpt2Config r, read_config(c));
  const int64_t d = r.d, dh = r.d / r.heads;
  TERN_RETURN_IF_ERROR(hf_check_counts(checkpoint, c, "n_layer", r.layers, "n_head", r.heads, dh));
  // GPT2LMHeadModel saves "transformer.h.0...", GPT2Model "h.0...".
  const std::string t = checkpoint.find("transformer.wte.weight") ? "transformer." : "";
  TensorSource src(checkpoint, g);
  DecoderBuilder b(g);

  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t wte, src.add(t + "wte.weight", {r.vocab, d}));
  TERN_ASSIGN_OR_RETURN(int32_t wpe, src.add(t + "wpe.weight", {r.positions, d}));
  TERN_ASSIGN_OR_RETURN(int32_t x, b.embedding(t + "wte", ids, wte));
  TERN_ASSIGN_OR_RETURN(x, b.positions(t + "wpe", x, fb::PositionKind::LEARNED, r.positions, {wpe}));
  const float scale = r.scale_attn ? float(1.0 / std::sqrt(double(dh))) : 1.0f;
  for (int64_t i = 0; i < r.layers; ++i) {
    const std::string p = t + "h." + std::to_string(i) + ".";
    // Older checkpoints keep the causal mask buffers; they are the causal attention itself.
    checkpoint.find(p + "attn.bias");
    checkpoint.find(p + "attn.masked_bias");
    DecoderLayer layer;
    TERN_ASSIGN_OR_RETURN(layer.attn_norm, src.norm(p + "ln_1", d, r.eps));
    TERN_ASSIGN_OR_RETURN(layer.attn_out, conv1d(src, p + "attn.c_proj", d, d));
    TERN_ASSIGN_OR_RETURN(layer.mlp_norm, src.norm(p + "ln_2", d, r.eps));
    TERN_ASSIGN_OR_RETURN(layer.mlp.up, conv1d(src, p + "mlp.c_fc", d, r.inner));
    TERN_ASSIGN_OR_RETURN(layer.mlp.down, conv1d(src, p + "mlp.c_proj", r.inner, d));
    layer.mlp.activation = r.activation;
    AttentionOp attn{attention_params(int32_t(r.heads), int32_t(dh), scale, fb::DenseT{}), {}, {}};
    TERN_ASSIGN_OR_RETURN(attn.qkv, conv1d(src, p + "attn.c_attn", d, 3 * d));  // q | k | v columns -> rows
    TERN_ASSIGN_OR_RETURN(x, b.layer(p, kLayerNames, layer, x,
                                     [&](int32_t in) { return b.attention(p + "attn.c_attn", p + "attn", in, attn); }));
  }
  TERN_ASSIGN_OR_RETURN(const Norm ln_f, src.norm(t + "ln_f", d, r.eps));
  TERN_ASSIGN_OR_RETURN(x, b.norm(t + "ln_f", x, ln_f));
  LinearWeights head{wte, -1};
  if (!r.tied) {
    if (!checkpoint.find("lm_head.weight"))
      return InvalidModel("missing tensor 'lm_head.weight' (config.json: tie_word_embeddings is false, so the head "
                          "is its own tensor)");
    TERN_ASSIGN_OR_RETURN(head.weight, src.add("lm_head.weight", {r.vocab, d}));
  }
  TERN_RETURN_IF_ERROR(b.head("logits", x, head).status());

  HfDecoder ids_only;
  ids_only.model_type = "gpt2";  // its tokenizer adds no BOS unless tokenizer_config.json says so
  ids_only.vocab = r.vocab;
  TERN_RETURN_IF_ERROR(hf_special_ids(checkpoint, c, 50256, 50256, &ids_only));
  ModelMetadata& m = g.metadata();
  m.architecture = "gpt2";
  m.description = "gpt2: " + std::to_string(r.layers) + " layers, d " + std::to_string(d) + ", " +
                  std::to_string(r.heads) + " heads, learned positions " + std::to_string(r.positions);
  m.vocab_kind = fb::VocabKind::EXTERNAL;
  m.vocab_note = "GPT-2 byte-level BPE (vocab.json + merges.txt); without tokenizer.json beside config.json the "
                 "model takes ids only";
  m.vocab_size = r.vocab;
  hf_write_special_ids(ids_only, &m);
  m.max_context = r.positions;
  return Status::Ok();
}

}  // namespace tern::convert
