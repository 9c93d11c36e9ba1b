// SPDX-License-Identifier: MIT
// Importer for Tern's reference family ("model_type": "tern-reference"); spec: converter/reference-family.md.
#include <cmath>
#include <string>

#include "config.h"
#include "importers/decoder_builder.h"
#include "importers/importers.h"
#include "importers/reference_attention.h"
#include "importers/tensor_source.h"

namespace tern::convert {
namespace {

struct ReferenceConfig {
  int64_t vocab = 0;          // V
  int64_t d = 0;              // hidden_size
  int64_t layers = 0;         // N
  int64_t heads = 0;          // H; head_dim = d / H
  int64_t ffn = 0;            // F, intermediate_size
  int64_t max_positions = 0;  // P
  int64_t segment_length = 0; // the evaluation's tokens per call (optional; 0: none)
  bool learned_positions = true;
  bool no_positions = false;  // "none": no POSITION op; causal attention alone places the tokens
  bool pre_ln = true;
  bool final_norm = true;
  fb::ActivationKind activation = fb::ActivationKind::GELU_ERF;
  bool linear_bias = true;
  float eps = 1e-5f;
  bool tied_head = true;
  bool head_bias = false;
  std::vector<LayerAttention> attention;  // per layer
};

Result<ReferenceConfig> read_config(const nlohmann::json& json) {
  const Config c(json);
  ReferenceConfig r;
  TERN_ASSIGN_OR_RETURN(r.vocab, c.positive_int("vocab_size"));
  TERN_ASSIGN_OR_RETURN(r.d, c.positive_int("hidden_size"));
  TERN_ASSIGN_OR_RETURN(r.layers, c.positive_int("num_layers"));
  TERN_ASSIGN_OR_RETURN(r.heads, c.positive_int("num_heads"));
  TERN_ASSIGN_OR_RETURN(r.ffn, c.positive_int("intermediate_size", 4 * r.d));
  TERN_ASSIGN_OR_RETURN(r.max_positions, c.positive_int("max_position_embeddings"));
  TERN_ASSIGN_OR_RETURN(r.segment_length, c.integer("segment_length", 0, 0));
  if (r.segment_length > r.max_positions) {
    return c.field_error("segment_length", "must be at most max_position_embeddings (" +
                                               std::to_string(r.max_positions) + "), got " +
                                               std::to_string(r.segment_length));
  }
  TERN_ASSIGN_OR_RETURN(std::string positions,
                        c.choice("position_embedding", {"learned", "sinusoidal", "none"}, std::string("learned")));
  TERN_ASSIGN_OR_RETURN(std::string norm, c.choice("norm_position", {"pre", "post"}, std::string("pre")));
  r.learned_positions = positions == "learned";
  r.no_positions = positions == "none";
  r.pre_ln = norm == "pre";
  TERN_ASSIGN_OR_RETURN(r.final_norm, c.boolean("final_norm", r.pre_ln));
  TERN_ASSIGN_OR_RETURN(std::string act, c.choice("activation", {"gelu", "gelu_tanh", "relu"}, std::string("gelu")));
  r.activation = act == "gelu"        ? fb::ActivationKind::GELU_ERF
                 : act == "gelu_tanh" ? fb::ActivationKind::GELU_TANH
                                      : fb::ActivationKind::RELU;
  TERN_ASSIGN_OR_RETURN(r.linear_bias, c.boolean("linear_bias", true));
  TERN_ASSIGN_OR_RETURN(double eps, c.positive_number("layer_norm_eps", 1e-5));
  r.eps = float(eps);
  TERN_ASSIGN_OR_RETURN(r.tied_head, c.boolean("tie_word_embeddings", true));
  TERN_ASSIGN_OR_RETURN(r.head_bias, c.boolean("lm_head_bias", false));

  if (r.d % r.heads != 0)
    return c.error("num_heads " + std::to_string(r.heads) + " does not divide hidden_size " + std::to_string(r.d));
  TERN_ASSIGN_OR_RETURN(r.attention, read_attention(c, r.layers, r.heads));
  return r;
}

// The compressive kind's Conv1d weight [d, d, rate] (out, in, tap) as the runtime's [d, rate*d] (out, tap, in), and
// its bias when the checkpoint has one.
Result<LinearWeights> conv_weights(const Checkpoint& checkpoint, GraphBuilder& g, TensorSource& src,
                                   const std::string& prefix, int64_t d, int64_t rate) {
  TERN_ASSIGN_OR_RETURN(const TensorView* view, src.require(prefix + ".weight", {d, d, rate}));
  TERN_ASSIGN_OR_RETURN(int32_t w, g.add_tensor(prefix + ".weight", fb::DType::F32, {d, rate * d},
                                                [view, d, rate, &checkpoint](uint8_t* dst, size_t size) -> Status {
                                                  if (size != size_t(d * d * rate) * sizeof(float))
                                                    return InvalidArgument("size mismatch");
                                                  std::vector<float> raw(size_t(d * d * rate));
                                                  TERN_RETURN_IF_ERROR(checkpoint.read_f32(*view, raw.data()));
                                                  auto* out = reinterpret_cast<float*>(dst);
                                                  for (int64_t o = 0; o < d; ++o)
                                                    for (int64_t c = 0; c < d; ++c)
                                                      for (int64_t t = 0; t < rate; ++t)
                                                        out[(o * rate + t) * d + c] =
                                                            raw[size_t((o * d + c) * rate + t)];
                                                  return Status::Ok();
                                                }));
  int32_t b = -1;
  if (checkpoint.find(prefix + ".bias")) {
    TERN_ASSIGN_OR_RETURN(b, src.add(prefix + ".bias", {d}));
  }
  return LinearWeights{w, b};
}

// What names group g's tensors and ops: ".g<g>" in a grouped layer; nothing in a layer of one group of every head,
// whose names stay attn.qkv.*, qkv and attn.
std::string group_tag(const LayerAttention& layer, size_t g) { return layer.grouped ? ".g" + std::to_string(g) : ""; }

// One group of a layer's heads: its fused q|k|v projection and, for routing, its centroids.
struct GroupWeights {
  LinearWeights qkv;
  int32_t centroids = -1;
};

// Fused projection of heads [h0, h1): weight [3 * (h1 - h0) * dh, d] = those heads' rows of q, then k, then v; bias
// likewise, named attn.qkv<tag>.*.
Result<GroupWeights> group_projection(const ReferenceConfig& r, const std::string& p, const std::string& tag,
                                      int64_t h0, int64_t h1, TensorSource& src) {
  const int64_t d = r.d, dh = d / r.heads;
  GroupWeights w;
  TERN_ASSIGN_OR_RETURN(w.qkv.weight, src.add_concat_rows(p + "attn.qkv" + tag + ".weight",
                                                          {p + "attn.q.weight", p + "attn.k.weight", p + "attn.v.weight"},
                                                          {d, d}, h0 * dh, h1 * dh));
  if (r.linear_bias) {
    TERN_ASSIGN_OR_RETURN(w.qkv.bias, src.add_concat_rows(p + "attn.qkv" + tag + ".bias",
                                                            {p + "attn.q.bias", p + "attn.k.bias", p + "attn.v.bias"},
                                                            {d}, h0 * dh, h1 * dh));
  }
  return w;
}

// The attention of layer `p` on its input `attn_in` [n, d] -> [n, d] (heads concatenated, before the output
// projection). A grouped layer runs one qkv LINEAR and one ATTENTION op per head group, each with its own kind and
// state, and joins their outputs in head order with CONCAT: schema/tern.fbs, ATTENTION.
Result<int32_t> build_attention(const ReferenceConfig& r, const LayerAttention& layer, const std::string& p,
                                int32_t attn_in, const std::vector<GroupWeights>& weights, const LinearWeights& conv,
                                DecoderBuilder& b) {
  const auto head_dim = int32_t(r.d / r.heads);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  int32_t joined = -1;
  int64_t h0 = 0;
  for (size_t g = 0; g < layer.groups.size(); ++g) {
    const HeadGroup& group = layer.groups[g];
    const int64_t h1 = h0 + group.heads;
    const std::string tag = group_tag(layer, g);
    const GroupWeights& w = weights[g];
    AttentionOp op{attention_params(int32_t(group.heads), head_dim, scale, group.kind), w.qkv, {}};
    std::string name = p + "attn" + tag;
    if (group.kind.AsCompressive()) {
      // A compressive layer's ATTENTION op reads the attention input itself (it keeps those rows as its memory).
      op.weights = {w.qkv.weight, w.qkv.bias, conv.weight, conv.bias};
      op.qkv = {};
      name = p + "attn";
    } else if (w.centroids >= 0) {
      op.weights = {w.centroids};
    }
    TERN_ASSIGN_OR_RETURN(int32_t out, b.attention(p + "qkv" + tag, name, attn_in, op));
    if (joined < 0) {
      joined = out;
    } else {  // heads [0, h1): the last join is the layer's "attn"
      TERN_ASSIGN_OR_RETURN(joined, b.concat(h1 == r.heads ? p + "attn" : p + "attn.heads0-" + std::to_string(h1),
                                             joined, out));
    }
    h0 = h1;
  }
  return joined;
}

// The reference family's op names within a layer (converter/reference-family.md).
const LayerNames kLayerNames{"attn_norm", "attn_out", "resid_attn", "mlp_norm", "fc1", "act", "fc2", "resid_mlp"};

// One transformer block reading value `x`; returns the block's output value.
Result<int32_t> build_layer(const ReferenceConfig& r, int64_t i, int32_t x, const Checkpoint& checkpoint,
                            TensorSource& src, DecoderBuilder& b) {
  const std::string p = "layers." + std::to_string(i) + ".";
  const int64_t d = r.d, F = r.ffn;
  const int64_t head_dim = d / r.heads;
  const LayerAttention& attention = r.attention[size_t(i)];

  DecoderLayer layer;
  layer.norm_at = r.pre_ln ? NormAt::kBefore : NormAt::kAfter;
  TERN_ASSIGN_OR_RETURN(layer.attn_norm, src.norm(p + "attn_norm", d, r.eps));
  std::vector<GroupWeights> groups;
  int64_t h0 = 0;
  for (size_t gi = 0; gi < attention.groups.size(); ++gi) {
    TERN_ASSIGN_OR_RETURN(GroupWeights w,
                          group_projection(r, p, group_tag(attention, gi), h0, h0 + attention.groups[gi].heads, src));
    groups.push_back(w);
    h0 += attention.groups[gi].heads;
  }
  TERN_ASSIGN_OR_RETURN(layer.attn_out, src.linear(p + "attn.out", d, d, r.linear_bias));
  // Routing heads' trained centroids, one set per routing head: attn.centroids, or attn.groups.<g>.centroids.
  for (size_t gi = 0; gi < attention.groups.size(); ++gi) {
    if (const fb::RoutingT* routing = attention.groups[gi].kind.AsRouting()) {
      const std::string name =
          attention.grouped ? p + "attn.groups." + std::to_string(gi) + ".centroids" : p + "attn.centroids";
      TERN_ASSIGN_OR_RETURN(groups[gi].centroids, src.add(name, {attention.groups[gi].heads - routing->local_heads,
                                                                 routing->clusters, head_dim}));
    }
  }
  TERN_ASSIGN_OR_RETURN(layer.mlp_norm, src.norm(p + "mlp_norm", d, r.eps));
  TERN_ASSIGN_OR_RETURN(layer.mlp.up, src.linear(p + "mlp.fc1", F, d, r.linear_bias));
  TERN_ASSIGN_OR_RETURN(layer.mlp.down, src.linear(p + "mlp.fc2", d, F, r.linear_bias));
  layer.mlp.activation = r.activation;
  const fb::CompressiveT* compressive = attention.groups[0].kind.AsCompressive();
  LinearWeights conv;
  if (compressive && compressive->compression == fb::Compression::CONV) {
    TERN_ASSIGN_OR_RETURN(conv, conv_weights(checkpoint, b.graph(), src, p + "attn.compress", d, compressive->rate));
  }
  return b.layer(p, kLayerNames, layer, x,
                 [&](int32_t in) { return build_attention(r, attention, p, in, groups, conv, b); });
}

}  // namespace

Status import_reference(const Checkpoint& checkpoint, GraphBuilder& g) {
  TERN_ASSIGN_OR_RETURN(const ReferenceConfig r, read_config(checkpoint.config()));
  const int64_t V = r.vocab, d = r.d, P = r.max_positions;
  TensorSource src(checkpoint, g);
  DecoderBuilder b(g);

  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t embed_w, src.add("embed.weight", {V, d}));
  TERN_ASSIGN_OR_RETURN(int32_t x, b.embedding("embed", ids, embed_w));
  int32_t pos_w = -1;
  if (r.learned_positions) {
    TERN_ASSIGN_OR_RETURN(pos_w, src.add("pos_embed.weight", {P, d}));
  }
  if (!r.no_positions) {
    const auto kind = r.learned_positions ? fb::PositionKind::LEARNED : fb::PositionKind::SINUSOIDAL;
    TERN_ASSIGN_OR_RETURN(x, b.positions("pos", x, kind, P, {pos_w}));
  }
  for (int64_t i = 0; i < r.layers; ++i) {
    TERN_ASSIGN_OR_RETURN(x, build_layer(r, i, x, checkpoint, src, b));
  }
  if (r.final_norm) {
    TERN_ASSIGN_OR_RETURN(const Norm final_norm, src.norm("final_norm", d, r.eps));
    TERN_ASSIGN_OR_RETURN(x, b.norm("final_norm", x, final_norm));
  }
  // Tied head: the head reads the embedding table itself, stored once in the file.
  LinearWeights head{embed_w, -1};
  if (!r.tied_head) {
    TERN_ASSIGN_OR_RETURN(head.weight, src.add("lm_head.weight", {V, d}));
  }
  if (r.head_bias) {
    TERN_ASSIGN_OR_RETURN(head.bias, src.add("lm_head.bias", {V}));
  }
  TERN_RETURN_IF_ERROR(b.head("logits", x, head).status());

  ModelMetadata& m = g.metadata();
  m.architecture = "tern-reference";
  m.description = "tern-reference: " + std::to_string(r.layers) + " layers, d " + std::to_string(d) + ", " +
                  std::to_string(r.heads) + " heads, " + (r.pre_ln ? "pre-LN" : "post-LN");
  m.vocab_kind = fb::VocabKind::BYTES;
  m.vocab_size = V;
  m.max_context = P;
  m.segment_length = r.segment_length;
  return Status::Ok();
}

}  // namespace tern::convert
