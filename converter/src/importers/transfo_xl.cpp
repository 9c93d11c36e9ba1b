// SPDX-License-Identifier: MIT
// Importer for Hugging Face Transformer-XL checkpoints ("model_type": "transfo-xl", TransfoXLLMHeadModel);
// spec: converter/transfo-xl.md. Semantics the runtime follows: runtime/src/ops/relative_xl.h and ops/adaptive.h.
//
// ids -> ADAPTIVE_EMBEDDING (x sqrt(d_model)) -> per layer:
//   post-LN: a = ATTENTION[RelativeXL](h); h1 = LN_attn(h + o_net a); h = LN_ff(h1 + CoreNet(h1))
//   pre-LN:  a = ATTENTION[RelativeXL, LN_attn inside](h); h1 = h + o_net a; h = h1 + CoreNet(LN_ff(h1))
// -> ADAPTIVE_LOG_SOFTMAX (log-probabilities). Tied tensors (tie_word_embeddings, tie_projs, shared r biases) are
// one tensor of the file referenced by several ops.
#include <cmath>
#include <string>
#include <vector>

#include "config.h"
#include "importers/decoder_builder.h"
#include "importers/importers.h"
#include "importers/tensor_source.h"

namespace tern::convert {
namespace {

constexpr int kMaxClusters = 16;  // the runtime's kMaxAdaptiveClusters

struct XlConfig {
  int64_t vocab = 0, d = 0, d_embed = 0, heads = 0, d_head = 0, d_inner = 0, layers = 0, div_val = 1;
  int64_t mem_len = 0, clamp_len = 0;
  int64_t tgt_len = 0;  // the evaluation's segment, where the config keeps one (HF's current configs do not)
  std::vector<int64_t> cutoffs;
  std::vector<bool> tie_projs;  // [clusters]
  bool same_length = true, pre_ln = false, untie_r = true, tie_weight = true;
  float eps = 1e-5f;
  int64_t clusters() const { return int64_t(cutoffs.size()) + 1; }
  int64_t cluster_dim(int64_t i) const {
    int64_t dim = d_embed;
    for (int64_t k = 0; k < i; ++k) dim /= div_val;
    return dim;
  }
  int64_t begin(int64_t i) const { return i == 0 ? 0 : cutoffs[size_t(i - 1)]; }
  int64_t end(int64_t i) const { return i == clusters() - 1 ? vocab : cutoffs[size_t(i)]; }
};

// A signed integer field (HF writes e.g. "sample_softmax": -1), with a fallback when absent.
Result<int64_t> signed_int(const Config& c, const std::string& key, int64_t fallback) {
  const nlohmann::json* v = c.get(key);
  if (!v) return fallback;
  if (!v->is_number_integer()) return c.field_error(key, "must be an integer, got " + Config::show(*v));
  return v->get<int64_t>();
}

// Missing fields take TransfoXLConfig's defaults, as HF's from_pretrained does.
Result<XlConfig> read_config(const nlohmann::json& json) {
  const Config c(json);
  XlConfig x;
  TERN_ASSIGN_OR_RETURN(x.vocab, c.positive_int("vocab_size", 267735));
  TERN_ASSIGN_OR_RETURN(x.d, c.positive_int("d_model", 1024));
  TERN_ASSIGN_OR_RETURN(x.d_embed, c.positive_int("d_embed", 1024));
  TERN_ASSIGN_OR_RETURN(x.heads, c.positive_int("n_head", 16));
  TERN_ASSIGN_OR_RETURN(x.d_head, c.positive_int("d_head", 64));
  TERN_ASSIGN_OR_RETURN(x.d_inner, c.positive_int("d_inner", 4096));
  TERN_ASSIGN_OR_RETURN(x.layers, c.positive_int("n_layer", 18));
  TERN_ASSIGN_OR_RETURN(x.div_val, c.positive_int("div_val", 4));
  TERN_ASSIGN_OR_RETURN(x.mem_len, c.integer("mem_len", 0, 1600));
  TERN_ASSIGN_OR_RETURN(x.tgt_len, c.integer("tgt_len", 0, 0));
  TERN_ASSIGN_OR_RETURN(const int64_t clamp, signed_int(c, "clamp_len", 1000));
  x.clamp_len = clamp > 0 ? clamp : 0;  // HF clamps only when clamp_len > 0
  TERN_ASSIGN_OR_RETURN(x.same_length, c.boolean("same_length", true));
  TERN_ASSIGN_OR_RETURN(x.pre_ln, c.boolean("pre_lnorm", false));
  TERN_ASSIGN_OR_RETURN(x.untie_r, c.boolean("untie_r", true));
  TERN_ASSIGN_OR_RETURN(double eps, c.positive_number("layer_norm_epsilon", 1e-5));
  x.eps = float(eps);
  TERN_ASSIGN_OR_RETURN(const bool legacy_tie, c.boolean("tie_weight", true));
  TERN_ASSIGN_OR_RETURN(x.tie_weight, c.boolean("tie_word_embeddings", legacy_tie));
  TERN_ASSIGN_OR_RETURN(const int64_t attn_type, signed_int(c, "attn_type", 0));
  if (attn_type != 0) return c.field_error("attn_type", "must be 0 (relative positions; HF implements no other)");
  TERN_ASSIGN_OR_RETURN(const int64_t sample_softmax, signed_int(c, "sample_softmax", -1));
  if (sample_softmax > 0) return Unsupported("config.json: sampled softmax (sample_softmax > 0) is not supported");
  if (x.d % 2 != 0) return c.field_error("d_model", "must be even (sinusoidal positions), got " + std::to_string(x.d));

  const nlohmann::json* cutoffs = c.get("cutoffs");
  if (!cutoffs) {
    x.cutoffs = {20000, 40000, 200000};
  } else {
    if (!cutoffs->is_array()) return c.field_error("cutoffs", "must be a list of integers, got " + Config::show(*cutoffs));
    for (const auto& v : *cutoffs) {
      if (!v.is_number_unsigned()) return c.field_error("cutoffs", "must be a list of positive integers, got " + Config::show(*cutoffs));
      const auto cut = int64_t(v.get<uint64_t>());
      if (cut <= (x.cutoffs.empty() ? 0 : x.cutoffs.back()) || cut >= x.vocab)
        return c.field_error("cutoffs", "must increase strictly within (0, vocab_size), got " + Config::show(*cutoffs));
      x.cutoffs.push_back(cut);
    }
  }
  if (x.clusters() > kMaxClusters)
    return c.field_error("cutoffs", "has " + std::to_string(x.cutoffs.size()) + " entries; at most " +
                                        std::to_string(kMaxClusters - 1) + " are supported");
  for (int64_t i = 0; i < x.clusters(); ++i) {
    if (x.div_val > 1 && x.cluster_dim(i) < 1)
      return c.field_error("div_val", "leaves cluster " + std::to_string(i) + " with no width (d_embed " +
                                          std::to_string(x.d_embed) + ")");
  }
  // tie_projs: HF writes the list; older configs give proj_share_all_but_first instead.
  const nlohmann::json* tie = c.get("tie_projs");
  if (tie) {
    if (!tie->is_array() || int64_t(tie->size()) != x.clusters())
      return c.field_error("tie_projs", "must list " + std::to_string(x.clusters()) + " booleans (one per cluster), got " +
                                            Config::show(*tie));
    for (const auto& v : *tie) {
      if (!v.is_boolean()) return c.field_error("tie_projs", "must list booleans, got " + Config::show(*tie));
      x.tie_projs.push_back(v.get<bool>());
    }
  } else {
    TERN_ASSIGN_OR_RETURN(const bool share, c.boolean("proj_share_all_but_first", true));
    x.tie_projs.assign(size_t(x.clusters()), share);
    x.tie_projs[0] = false;
  }
  return x;
}

// A tied copy (e.g. crit.out_layers.0.weight saved next to the embedding it is tied to): HF ignores it, so does
// this importer, after checking its shape.
Status check_tied_copy(const Checkpoint& checkpoint, const TensorSource& src, const std::string& name,
                       const std::vector<int64_t>& shape) {
  if (!checkpoint.find(name)) return Status::Ok();
  return src.require(name, shape).status();
}

// HF's op names within a layer (dec_attn, pos_ff).
const LayerNames kLayerNames{"attn_norm", "o_net", "resid_attn", "ff_norm", "fc1", "relu", "fc2", "resid_ff"};

Result<int32_t> build_layer(const XlConfig& x, int64_t l, int32_t h, int32_t inv_freq, TensorSource& t,
                            DecoderBuilder& b) {
  const std::string p = "transformer.layers." + std::to_string(l) + ".";
  const int64_t d = x.d, inner = x.heads * x.d_head;
  TERN_ASSIGN_OR_RETURN(int32_t qkv, t.add(p + "dec_attn.qkv_net.weight", {3 * inner, d}));
  TERN_ASSIGN_OR_RETURN(int32_t r_net, t.add(p + "dec_attn.r_net.weight", {inner, d}));
  const std::string bias = x.untie_r ? p + "dec_attn." : "transformer.";
  TERN_ASSIGN_OR_RETURN(int32_t r_w, t.add(bias + "r_w_bias", {x.heads, x.d_head}));
  TERN_ASSIGN_OR_RETURN(int32_t r_r, t.add(bias + "r_r_bias", {x.heads, x.d_head}));
  DecoderLayer layer;
  layer.norm_at = x.pre_ln ? NormAt::kBefore : NormAt::kAfter;
  TERN_ASSIGN_OR_RETURN(layer.attn_out, t.linear(p + "dec_attn.o_net", d, inner, false));
  TERN_ASSIGN_OR_RETURN(const Norm attn_norm, t.norm(p + "dec_attn.layer_norm", d, x.eps));
  TERN_ASSIGN_OR_RETURN(layer.mlp.up, t.linear(p + "pos_ff.CoreNet.0", x.d_inner, d, true));
  TERN_ASSIGN_OR_RETURN(layer.mlp.down, t.linear(p + "pos_ff.CoreNet.3", d, x.d_inner, true));
  layer.mlp.activation = fb::ActivationKind::RELU;
  TERN_ASSIGN_OR_RETURN(layer.mlp_norm, t.norm(p + "pos_ff.layer_norm", d, x.eps));

  // Pre-LN normalises [memory; h] inside the attention op; post-LN normalises after the residual.
  AttentionOp attn{attention_params(int32_t(x.heads), int32_t(x.d_head), float(1.0 / std::sqrt(double(x.d_head))),
                                    fb::RelativeXLT{{}, int32_t(x.mem_len), int32_t(x.clamp_len), x.same_length, x.eps}),
                   {}, {qkv, r_net, r_w, r_r, -1, -1, inv_freq}};
  if (x.pre_ln) {
    attn.weights[4] = attn_norm.weight;
    attn.weights[5] = attn_norm.bias;
  } else {
    layer.attn_norm = attn_norm;
  }
  const std::string n = "layers." + std::to_string(l) + ".";
  return b.layer(n, kLayerNames, layer, h, [&](int32_t in) { return b.attention("", n + "attn", in, attn); });
}

// Adaptive input: one table with div_val 1 (projected when d_embed != d_model), else one table per cluster.
Result<int32_t> build_embedding(const XlConfig& x, int32_t ids, TensorSource& t, DecoderBuilder& b) {
  const std::string e = "transformer.word_emb.";
  const auto scale = float(std::sqrt(double(x.d)));
  if (x.div_val == 1) {
    TERN_ASSIGN_OR_RETURN(int32_t table, t.add(e + "emb_layers.0.weight", {x.vocab, x.d_embed}));
    int32_t proj = -1;
    if (x.d_embed != x.d) {
      TERN_ASSIGN_OR_RETURN(proj, t.add(e + "emb_projs.0", {x.d, x.d_embed}));
    }
    return b.embedding("word_emb", ids, table, proj, scale);
  }
  fb::AdaptiveEmbeddingParamsT p;
  p.scale = scale;
  p.cutoffs = x.cutoffs;
  std::vector<int32_t> weights;
  for (int64_t i = 0; i < x.clusters(); ++i) {
    const std::string s = std::to_string(i);
    TERN_ASSIGN_OR_RETURN(int32_t table,
                          t.add(e + "emb_layers." + s + ".weight", {x.end(i) - x.begin(i), x.cluster_dim(i)}));
    TERN_ASSIGN_OR_RETURN(int32_t proj, t.add(e + "emb_projs." + s, {x.d, x.cluster_dim(i)}));
    weights.push_back(table);
    weights.push_back(proj);
  }
  return b.op(fb::OpCode::ADAPTIVE_EMBEDDING, "word_emb", {ids}, weights, x.d, p);
}

// Projected adaptive log-softmax (crit); with div_val 1 every cluster reads its rows of one output layer.
Result<int32_t> build_softmax(const XlConfig& x, int32_t h, const Checkpoint& checkpoint, TensorSource& t,
                              DecoderBuilder& b) {
  const int64_t C = x.clusters() - 1;
  std::vector<int32_t> weights = {-1, -1};
  if (C > 0) {
    TERN_ASSIGN_OR_RETURN(weights[0], t.add("crit.cluster_weight", {C, x.d_embed}));
    TERN_ASSIGN_OR_RETURN(weights[1], t.add("crit.cluster_bias", {C}));
  }
  for (int64_t i = 0; i < x.clusters(); ++i) {
    const std::string s = std::to_string(i);
    const bool shared = x.div_val == 1;  // one [V, d_embed] layer, sliced by rows
    const int64_t di = shared ? x.d_embed : x.cluster_dim(i);
    const std::vector<int64_t> w_shape = shared ? std::vector<int64_t>{x.vocab, di} : std::vector<int64_t>{x.end(i) - x.begin(i), di};
    const std::string layer = shared ? "0" : s;
    int32_t w;
    if (x.tie_weight) {
      TERN_RETURN_IF_ERROR(check_tied_copy(checkpoint, t, "crit.out_layers." + layer + ".weight", w_shape));
      TERN_ASSIGN_OR_RETURN(w, t.add("transformer.word_emb.emb_layers." + layer + ".weight", w_shape));
    } else {
      TERN_ASSIGN_OR_RETURN(w, t.add("crit.out_layers." + layer + ".weight", w_shape));
    }
    TERN_ASSIGN_OR_RETURN(int32_t bias, t.add("crit.out_layers." + layer + ".bias", {w_shape[0]}));
    int32_t proj = -1;
    if (!shared || x.d != x.d_embed) {
      const std::vector<int64_t> p_shape = {x.d, di};
      if (x.tie_projs[size_t(i)]) {
        TERN_RETURN_IF_ERROR(check_tied_copy(checkpoint, t, "crit.out_projs." + s, p_shape));
        TERN_ASSIGN_OR_RETURN(proj,
                              t.add("transformer.word_emb.emb_projs." + (shared ? std::string("0") : s), p_shape));
      } else {
        TERN_ASSIGN_OR_RETURN(proj, t.add("crit.out_projs." + s, p_shape));
      }
    }
    weights.insert(weights.end(), {w, bias, proj});
  }
  return b.op(fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "logits", {h}, weights, x.vocab,
              fb::AdaptiveLogSoftmaxParamsT{{}, x.cutoffs});
}

}  // namespace

Status import_transfo_xl(const Checkpoint& checkpoint, GraphBuilder& g) {
  TERN_ASSIGN_OR_RETURN(const XlConfig x, read_config(checkpoint.config()));
  TensorSource t(checkpoint, g);
  DecoderBuilder b(g);
  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t h, build_embedding(x, ids, t, b));
  // HF's frequency buffer, when saved: float32 values the runtime then uses as they are.
  int32_t inv_freq = -1;
  if (checkpoint.find("transformer.pos_emb.inv_freq")) {
    TERN_ASSIGN_OR_RETURN(inv_freq, t.add("transformer.pos_emb.inv_freq", {x.d / 2}));
  }
  for (int64_t l = 0; l < x.layers; ++l) {
    TERN_ASSIGN_OR_RETURN(h, build_layer(x, l, h, inv_freq, t, b));
  }
  TERN_ASSIGN_OR_RETURN(int32_t log_probs, build_softmax(x, h, checkpoint, t, b));
  TERN_RETURN_IF_ERROR(b.output(log_probs));

  ModelMetadata& m = g.metadata();
  m.architecture = "transfo-xl";
  m.description = "transfo-xl: " + std::to_string(x.layers) + " layers, d " + std::to_string(x.d) + ", " +
                  std::to_string(x.heads) + " heads x " + std::to_string(x.d_head) + ", mem_len " +
                  std::to_string(x.mem_len) + (x.pre_ln ? ", pre-LN" : ", post-LN") +
                  (x.same_length ? ", same_length" : "") + ", clamp_len " + std::to_string(x.clamp_len) + ", " +
                  std::to_string(x.clusters()) + " softmax cluster" + (x.clusters() > 1 ? "s" : "") + ", div_val " +
                  std::to_string(x.div_val);
  m.vocab_kind = fb::VocabKind::EXTERNAL;
  m.vocab_size = x.vocab;
  m.vocab_note =
      "ids index the word-level vocabulary of Hugging Face's TransfoXLTokenizer for this checkpoint (vocab.pkl: "
      "idx2sym; transfo-xl-wt103: 267,735 WikiText-103 words, <eos> = 0); converter/transfo-xl.md";
  m.max_context = 0;  // the memory is bounded; a stream can go on for any length
  m.segment_length = x.tgt_len;
  return Status::Ok();
}

}  // namespace tern::convert
