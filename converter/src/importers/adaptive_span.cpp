// SPDX-License-Identifier: MIT
// Importer for facebookresearch/adaptive-span models ("model_type": "adaptive-span"); spec: converter/adaptive-span.md.
//
// Per layer (post-LN): h = norm1(h + Out(Attn(h))); h = norm2(h + Fc2(relu(Fc1(h)))); then log_softmax(out_emb(h)).
// Attention is the ATTENTION op of kind AdaptiveSpan, with the model's key_pe shared by every layer.
#include <cmath>
#include <string>
#include <vector>

#include "config.h"
#include "importers/decoder_builder.h"
#include "importers/importers.h"
#include "importers/tensor_source.h"

namespace tern::convert {
namespace {

struct SpanConfig {
  int64_t vocab = 0;   // V
  int64_t d = 0;       // model_params.hidden_size
  int64_t ffn = 0;     // model_params.inner_hidden_size
  int64_t layers = 0;  // model_params.nb_layers
  int64_t block = 0;   // model_params.block_size: the evaluation block, kept for the record
  int64_t heads = 0;   // model_params.nb_heads; head_dim = d / heads
  int64_t span = 0;    // model_params.attn_span: L
  bool adaptive = false;  // adapt_span_params.adapt_span_enabled
  int64_t ramp = 0;       // adapt_span_params.adapt_span_ramp: R
  bool cache = false;     // adapt_span_params.adapt_span_cache: only the cache length of the reference code
};

// A nested object of config.json, e.g. "model_params"; `json` must outlive the returned Config.
Result<Config> group(const Config& c, const std::string& key) {
  const nlohmann::json* g = c.get(key);
  if (!g) return c.field_error(key, "is missing");
  if (!g->is_object()) return c.field_error(key, "must be an object, got " + Config::show(*g));
  return Config(*g, "config.json", key + ".");
}

Result<SpanConfig> read_config(const nlohmann::json& json) {
  const Config c(json);
  SpanConfig s;
  TERN_ASSIGN_OR_RETURN(s.vocab, c.positive_int("vocab_size"));
  TERN_ASSIGN_OR_RETURN(const Config m, group(c, "model_params"));
  TERN_ASSIGN_OR_RETURN(s.d, m.positive_int("hidden_size"));
  TERN_ASSIGN_OR_RETURN(s.ffn, m.positive_int("inner_hidden_size"));
  TERN_ASSIGN_OR_RETURN(s.layers, m.positive_int("nb_layers"));
  TERN_ASSIGN_OR_RETURN(s.block, m.positive_int("block_size"));
  TERN_ASSIGN_OR_RETURN(s.heads, m.positive_int("nb_heads"));
  TERN_ASSIGN_OR_RETURN(s.span, m.positive_int("attn_span"));
  if (s.d % s.heads != 0)
    return m.field_error("nb_heads", std::to_string(s.heads) + " does not divide hidden_size " + std::to_string(s.d));

  TERN_ASSIGN_OR_RETURN(const Config a, group(c, "adapt_span_params"));
  TERN_ASSIGN_OR_RETURN(s.adaptive, a.boolean("adapt_span_enabled"));
  if (s.adaptive) {
    TERN_ASSIGN_OR_RETURN(s.ramp, a.positive_int("adapt_span_ramp"));
  }
  TERN_ASSIGN_OR_RETURN(s.cache, a.boolean("adapt_span_cache", false));

  // Variants of the reference code this importer does not build.
  if (c.has("adapt_io_params")) {
    TERN_ASSIGN_OR_RETURN(const Config io, group(c, "adapt_io_params"));
    TERN_ASSIGN_OR_RETURN(bool adapt_io, io.boolean("adapt_io_enabled", false));
    if (adapt_io) return Unsupported("config.json: adaptive input/output (adapt_io_params.adapt_io_enabled) is not supported");
  }
  if (c.has("pers_mem_params")) {
    TERN_ASSIGN_OR_RETURN(const Config pm, group(c, "pers_mem_params"));
    TERN_ASSIGN_OR_RETURN(int64_t pers_mem, pm.integer("pers_mem_size", 0, 0));
    if (pers_mem > 0) return Unsupported("config.json: persistent memory (pers_mem_params.pers_mem_size > 0) is not supported");
  }
  return s;
}

// The buffer mask_template, when the checkpoint carries it, must be linspace(1 - L, 0, L): the runtime computes the
// mask from the distance and relies on that.
Status check_mask_template(const Checkpoint& checkpoint, const std::string& name, int64_t L) {
  const TensorView* view = checkpoint.find(name);
  if (!view) return Status::Ok();
  if (view->shape != std::vector<int64_t>{L})
    return InvalidModel(view->file + ": tensor '" + name + "' has shape " + shape_string(view->shape) + ", expected [" +
                        std::to_string(L) + "]");
  std::vector<float> t(size_t(view->numel()));
  TERN_RETURN_IF_ERROR(checkpoint.read_f32(*view, t.data()));
  for (int64_t l = 0; l < L; ++l) {
    if (std::fabs(double(t[size_t(l)]) - double(1 - L + l)) > 1e-3)
      return InvalidModel(view->file + ": tensor '" + name + "' is not linspace(1 - attn_span, 0, attn_span)");
  }
  return Status::Ok();
}

// The reference code's op names within a layer (TransformerSeqLayer's modules).
const LayerNames kLayerNames{"norm1", "attn_out", "resid_attn", "norm2", "fc1", "relu", "fc2", "resid_ff"};

// One TransformerSeqLayer reading value `h`; returns its output value. `p` is "[module.]layers.<i>.".
Result<int32_t> build_layer(const SpanConfig& s, const std::string& p, int32_t h, int32_t key_pe,
                            const Checkpoint& checkpoint, TensorSource& src, DecoderBuilder& b) {
  const int64_t d = s.d, F = s.ffn;
  const auto head_dim = int32_t(d / s.heads);
  const float eps = 1e-5f;  // torch.nn.LayerNorm's default

  // Projections have no bias. qkv.weight [3d, d] = rows of proj_query, proj_key, proj_val (head-major inside each).
  AttentionOp attn{attention_params(int32_t(s.heads), head_dim, float(1.0 / std::sqrt(double(head_dim))),
                                    fb::AdaptiveSpanT{{}, int32_t(s.span), int32_t(s.ramp)}),
                   {}, {}};
  TERN_ASSIGN_OR_RETURN(
      attn.qkv.weight,
      src.add_concat(p + "attn.proj_qkv.weight",
                     {p + "attn.proj_query.weight", p + "attn.proj_key.weight", p + "attn.proj_val.weight"}, {d, d}));
  DecoderLayer layer;
  layer.norm_at = NormAt::kAfter;
  TERN_ASSIGN_OR_RETURN(layer.attn_out, src.linear(p + "attn.proj_out", d, d, false));
  int32_t span_w = -1;
  if (s.adaptive) {
    const std::string mask = p + "attn.attn.adaptive_span._mask.";
    TERN_ASSIGN_OR_RETURN(span_w, src.add_reshaped(mask + "current_val", {s.heads, 1, 1}, {s.heads}));
    TERN_RETURN_IF_ERROR(check_mask_template(checkpoint, mask + "mask_template", s.span));
  }
  attn.weights = {key_pe, span_w};
  TERN_ASSIGN_OR_RETURN(layer.attn_norm, src.norm(p + "norm1", d, eps));
  TERN_ASSIGN_OR_RETURN(layer.mlp.up, src.linear(p + "ff.fc1", F, d, true));
  TERN_ASSIGN_OR_RETURN(layer.mlp.down, src.linear(p + "ff.fc2", d, F, true));
  layer.mlp.activation = fb::ActivationKind::RELU;
  TERN_ASSIGN_OR_RETURN(layer.mlp_norm, src.norm(p + "norm2", d, eps));
  return b.layer(p, kLayerNames, layer, h, [&](int32_t in) { return b.attention(p + "qkv", p + "attn", in, attn); });
}

}  // namespace

Status import_adaptive_span(const Checkpoint& checkpoint, GraphBuilder& g) {
  TERN_ASSIGN_OR_RETURN(const SpanConfig s, read_config(checkpoint.config()));
  const int64_t V = s.vocab, d = s.d, head_dim = s.d / s.heads;
  // Checkpoints saved from the reference code's DataParallel wrapper name every parameter "module.<name>".
  const std::string prefix = checkpoint.find("module.in_emb.weight") ? "module." : "";
  TensorSource src(checkpoint, g);
  DecoderBuilder b(g);

  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t emb_w, src.add(prefix + "in_emb.weight", {V, d}));
  TERN_ASSIGN_OR_RETURN(int32_t h, b.embedding("in_emb", ids, emb_w));
  // key_pe [1, head_dim, L] in the checkpoint, shared by all layers and heads; stored once as [head_dim, L].
  TERN_ASSIGN_OR_RETURN(int32_t key_pe, src.add_reshaped(prefix + "key_pe", {1, head_dim, s.span}, {head_dim, s.span}));
  for (int64_t i = 0; i < s.layers; ++i) {
    TERN_ASSIGN_OR_RETURN(h,
                          build_layer(s, prefix + "layers." + std::to_string(i) + ".", h, key_pe, checkpoint, src, b));
  }
  TERN_ASSIGN_OR_RETURN(const LinearWeights out, src.linear(prefix + "out_emb", V, d, true));
  TERN_ASSIGN_OR_RETURN(int32_t scores, b.linear("out_emb", h, out));
  // The model's output is log_softmax(out_emb(h)): log-probabilities, which are also valid logits.
  TERN_ASSIGN_OR_RETURN(int32_t logits,
                        b.op(fb::OpCode::LOG_SOFTMAX, "logits", {scores}, {}, V, fb::LogSoftmaxParamsT{}));
  TERN_RETURN_IF_ERROR(b.output(logits));

  ModelMetadata& m = g.metadata();
  m.architecture = "adaptive-span";
  m.description = "adaptive-span: " + std::to_string(s.layers) + " layers, d " + std::to_string(d) + ", " +
                  std::to_string(s.heads) + " heads, attn_span " + std::to_string(s.span) +
                  (s.adaptive ? ", learned spans (ramp " + std::to_string(s.ramp) + ")" : ", fixed span") +
                  ", block_size " + std::to_string(s.block);
  m.vocab_kind = fb::VocabKind::EXTERNAL;
  m.vocab_size = V;
  m.vocab_note =
      "ids index the dictionary that facebookresearch/adaptive-span's data.py builds from the training data "
      "(train.txt tokens in order of first appearance, plus <eos> per line; cached in corpus.pt)";
  m.max_context = 0;  // attention reaches a bounded span back, over a sequence of any length
  return Status::Ok();
}

}  // namespace tern::convert
