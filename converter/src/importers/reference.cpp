// Importer for Tern's reference family ("model_type": "tern-reference"); spec: converter/reference-family.md.
#include <cmath>
#include <string>

#include "config.h"
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

// Adds value `name` [n, width] and the op that writes it (op and value share the name).
class Emitter {
 public:
  explicit Emitter(GraphBuilder& graph) : g_(graph) {}
  Result<int32_t> op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                     std::vector<int32_t> weights, int64_t width, OpParams params) {
    TERN_ASSIGN_OR_RETURN(int32_t out, g_.add_value(name, fb::DType::F32, width));
    TERN_RETURN_IF_ERROR(
        g_.add_op(code, name, std::move(inputs), {out}, std::move(weights), std::move(params)).status());
    return out;
  }

 private:
  GraphBuilder& g_;
};

// Weight and optional bias of `<prefix>.weight` [out, in] / `<prefix>.bias` [out]; bias -1 when absent.
Result<std::vector<int32_t>> linear_weights(TensorSource& src, const std::string& prefix, int64_t out, int64_t in,
                                            bool bias) {
  TERN_ASSIGN_OR_RETURN(int32_t w, src.add(prefix + ".weight", {out, in}));
  int32_t b = -1;
  if (bias) {
    TERN_ASSIGN_OR_RETURN(b, src.add(prefix + ".bias", {out}));
  }
  return std::vector<int32_t>{w, b};
}

Result<std::vector<int32_t>> norm_weights(TensorSource& src, const std::string& prefix, int64_t d) {
  TERN_ASSIGN_OR_RETURN(int32_t w, src.add(prefix + ".weight", {d}));
  TERN_ASSIGN_OR_RETURN(int32_t b, src.add(prefix + ".bias", {d}));
  return std::vector<int32_t>{w, b};
}

// The compressive kind's Conv1d weight [d, d, rate] (out, in, tap) as the runtime's [d, rate*d] (out, tap, in), and
// its bias when the checkpoint has one.
Result<std::vector<int32_t>> conv_weights(const Checkpoint& checkpoint, GraphBuilder& g, TensorSource& src,
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
  return std::vector<int32_t>{w, b};
}

// What names group g's tensors and ops: ".g<g>" in a grouped layer; nothing in a layer of one group of every head,
// whose names stay attn.qkv.*, qkv and attn.
std::string group_tag(const LayerAttention& layer, size_t g) { return layer.grouped ? ".g" + std::to_string(g) : ""; }

// One group of a layer's heads: its fused q|k|v projection and, for routing, its centroids.
struct GroupWeights {
  int32_t qkv_w = -1, qkv_b = -1, centroids = -1;
};

// Fused projection of heads [h0, h1): weight [3 * (h1 - h0) * dh, d] = those heads' rows of q, then k, then v; bias
// likewise, named attn.qkv<tag>.*.
Result<GroupWeights> group_projection(const ReferenceConfig& r, const std::string& p, const std::string& tag,
                                      int64_t h0, int64_t h1, TensorSource& src) {
  const int64_t d = r.d, dh = d / r.heads;
  GroupWeights w;
  TERN_ASSIGN_OR_RETURN(w.qkv_w, src.add_concat_rows(p + "attn.qkv" + tag + ".weight",
                                                     {p + "attn.q.weight", p + "attn.k.weight", p + "attn.v.weight"},
                                                     {d, d}, h0 * dh, h1 * dh));
  if (r.linear_bias) {
    TERN_ASSIGN_OR_RETURN(w.qkv_b, src.add_concat_rows(p + "attn.qkv" + tag + ".bias",
                                                       {p + "attn.q.bias", p + "attn.k.bias", p + "attn.v.bias"}, {d},
                                                       h0 * dh, h1 * dh));
  }
  return w;
}

// The attention of layer `p` on its input `attn_in` [n, d] -> [n, d] (heads concatenated, before the output
// projection). A grouped layer runs one qkv LINEAR and one ATTENTION op per head group, each with its own kind and
// state, and joins their outputs in head order with CONCAT: schema/tern.fbs, ATTENTION.
Result<int32_t> build_attention(const ReferenceConfig& r, const LayerAttention& layer, const std::string& p,
                                int32_t attn_in, const std::vector<GroupWeights>& weights,
                                const std::vector<int32_t>& conv, Emitter& e) {
  using fb::OpCode;
  const auto head_dim = int32_t(r.d / r.heads);
  const float scale = float(1.0 / std::sqrt(double(head_dim)));
  int32_t joined = -1;
  int64_t h0 = 0;
  for (size_t g = 0; g < layer.groups.size(); ++g) {
    const HeadGroup& group = layer.groups[g];
    const int64_t h1 = h0 + group.heads, width = group.heads * head_dim;
    const params::Attention attn{int32_t(group.heads), head_dim, scale, true, group.kind};
    const std::string tag = group_tag(layer, g);
    const GroupWeights& w = weights[g];
    int32_t out = -1;
    if (std::holds_alternative<params::Compressive>(group.kind)) {
      // A compressive layer's ATTENTION op reads the attention input itself (it keeps those rows as its memory).
      TERN_ASSIGN_OR_RETURN(out, e.op(OpCode::ATTENTION, p + "attn", {attn_in}, {w.qkv_w, w.qkv_b, conv[0], conv[1]},
                                      width, attn));
    } else {
      TERN_ASSIGN_OR_RETURN(int32_t qkv, e.op(OpCode::LINEAR, p + "qkv" + tag, {attn_in}, {w.qkv_w, w.qkv_b},
                                              3 * width, params::Linear{}));
      std::vector<int32_t> attn_weights;
      if (w.centroids >= 0) attn_weights = {w.centroids};
      TERN_ASSIGN_OR_RETURN(out, e.op(OpCode::ATTENTION, p + "attn" + tag, {qkv}, attn_weights, width, attn));
    }
    if (joined < 0) {
      joined = out;
    } else {  // heads [0, h1): the last join is the layer's "attn"
      const std::string name = h1 == r.heads ? p + "attn" : p + "attn.heads0-" + std::to_string(h1);
      TERN_ASSIGN_OR_RETURN(joined, e.op(OpCode::CONCAT, name, {joined, out}, {}, h1 * head_dim, params::Concat{}));
    }
    h0 = h1;
  }
  return joined;
}

// One transformer block reading value `x`; returns the block's output value.
Result<int32_t> build_layer(const ReferenceConfig& r, int64_t i, int32_t x, const Checkpoint& checkpoint, GraphBuilder& g,
                            TensorSource& src, Emitter& e) {
  using fb::OpCode;
  const std::string p = "layers." + std::to_string(i) + ".";
  const int64_t d = r.d, F = r.ffn;
  const params::LayerNorm ln{r.eps};
  const int64_t head_dim = d / r.heads;
  const LayerAttention& layer = r.attention[size_t(i)];

  TERN_ASSIGN_OR_RETURN(auto attn_norm_w, norm_weights(src, p + "attn_norm", d));
  std::vector<GroupWeights> groups;
  int64_t h0 = 0;
  for (size_t gi = 0; gi < layer.groups.size(); ++gi) {
    TERN_ASSIGN_OR_RETURN(GroupWeights w,
                          group_projection(r, p, group_tag(layer, gi), h0, h0 + layer.groups[gi].heads, src));
    groups.push_back(w);
    h0 += layer.groups[gi].heads;
  }
  TERN_ASSIGN_OR_RETURN(auto out_w, linear_weights(src, p + "attn.out", d, d, r.linear_bias));
  // Routing heads' trained centroids, one set per routing head: attn.centroids, or attn.groups.<g>.centroids.
  for (size_t gi = 0; gi < layer.groups.size(); ++gi) {
    if (const auto* routing = std::get_if<params::Routing>(&layer.groups[gi].kind)) {
      const std::string name = layer.grouped ? p + "attn.groups." + std::to_string(gi) + ".centroids" : p + "attn.centroids";
      TERN_ASSIGN_OR_RETURN(groups[gi].centroids,
                            src.add(name, {layer.groups[gi].heads - routing->local_heads, routing->clusters, head_dim}));
    }
  }
  TERN_ASSIGN_OR_RETURN(auto mlp_norm_w, norm_weights(src, p + "mlp_norm", d));
  TERN_ASSIGN_OR_RETURN(auto fc1_w, linear_weights(src, p + "mlp.fc1", F, d, r.linear_bias));
  TERN_ASSIGN_OR_RETURN(auto fc2_w, linear_weights(src, p + "mlp.fc2", d, F, r.linear_bias));
  const auto* compressive = std::get_if<params::Compressive>(&layer.groups[0].kind);
  std::vector<int32_t> conv = {-1, -1};
  if (compressive && compressive->compression == fb::Compression::CONV) {
    TERN_ASSIGN_OR_RETURN(conv, conv_weights(checkpoint, g, src, p + "attn.compress", d, compressive->rate));
  }

  // Attention block: pre-LN reads LN_a(x), post-LN reads x and normalises after the residual.
  int32_t attn_in = x;
  if (r.pre_ln) {
    TERN_ASSIGN_OR_RETURN(attn_in, e.op(OpCode::LAYER_NORM, p + "attn_norm", {x}, attn_norm_w, d, ln));
  }
  TERN_ASSIGN_OR_RETURN(int32_t a, build_attention(r, layer, p, attn_in, groups, conv, e));
  TERN_ASSIGN_OR_RETURN(int32_t a_out, e.op(OpCode::LINEAR, p + "attn_out", {a}, out_w, d, params::Linear{}));
  TERN_ASSIGN_OR_RETURN(int32_t resid_attn, e.op(OpCode::ADD, p + "resid_attn", {x, a_out}, {}, d, params::Add{}));

  int32_t h = resid_attn;  // MLP block input and the residual it adds to
  int32_t mlp_in = resid_attn;
  if (r.pre_ln) {
    TERN_ASSIGN_OR_RETURN(mlp_in, e.op(OpCode::LAYER_NORM, p + "mlp_norm", {resid_attn}, mlp_norm_w, d, ln));
  } else {
    TERN_ASSIGN_OR_RETURN(h, e.op(OpCode::LAYER_NORM, p + "attn_norm", {resid_attn}, attn_norm_w, d, ln));
    mlp_in = h;
  }
  TERN_ASSIGN_OR_RETURN(int32_t fc1, e.op(OpCode::LINEAR, p + "fc1", {mlp_in}, fc1_w, F, params::Linear{}));
  TERN_ASSIGN_OR_RETURN(int32_t act,
                        e.op(OpCode::ACTIVATION, p + "act", {fc1}, {}, F, params::Activation{r.activation}));
  TERN_ASSIGN_OR_RETURN(int32_t fc2, e.op(OpCode::LINEAR, p + "fc2", {act}, fc2_w, d, params::Linear{}));
  TERN_ASSIGN_OR_RETURN(int32_t resid_mlp, e.op(OpCode::ADD, p + "resid_mlp", {h, fc2}, {}, d, params::Add{}));
  if (r.pre_ln) return resid_mlp;
  return e.op(OpCode::LAYER_NORM, p + "mlp_norm", {resid_mlp}, mlp_norm_w, d, ln);
}

}  // namespace

Status import_reference(const Checkpoint& checkpoint, GraphBuilder& g) {
  using fb::OpCode;
  TERN_ASSIGN_OR_RETURN(const ReferenceConfig r, read_config(checkpoint.config()));
  const int64_t V = r.vocab, d = r.d, P = r.max_positions;
  TensorSource src(checkpoint, g);
  Emitter e(g);

  TERN_ASSIGN_OR_RETURN(int32_t ids, g.add_value("ids", fb::DType::I32, 1));
  TERN_RETURN_IF_ERROR(g.add_input(ids));

  TERN_ASSIGN_OR_RETURN(int32_t embed_w, src.add("embed.weight", {V, d}));
  TERN_ASSIGN_OR_RETURN(int32_t x, e.op(OpCode::EMBEDDING, "embed", {ids}, {embed_w}, d, params::Embedding{}));

  int32_t pos_w = -1;
  if (r.learned_positions) {
    TERN_ASSIGN_OR_RETURN(pos_w, src.add("pos_embed.weight", {P, d}));
  }
  if (!r.no_positions) {
    const params::Position pos{r.learned_positions ? fb::PositionKind::LEARNED : fb::PositionKind::SINUSOIDAL, P};
    TERN_ASSIGN_OR_RETURN(x, e.op(OpCode::POSITION, "pos", {x}, {pos_w}, d, pos));
  }

  for (int64_t i = 0; i < r.layers; ++i) {
    TERN_ASSIGN_OR_RETURN(x, build_layer(r, i, x, checkpoint, g, src, e));
  }

  if (r.final_norm) {
    TERN_ASSIGN_OR_RETURN(auto w, norm_weights(src, "final_norm", d));
    TERN_ASSIGN_OR_RETURN(x, e.op(OpCode::LAYER_NORM, "final_norm", {x}, w, d, params::LayerNorm{r.eps}));
  }

  // Tied head: the head reads the embedding table itself, stored once in the file.
  int32_t head_w = embed_w;
  if (!r.tied_head) {
    TERN_ASSIGN_OR_RETURN(head_w, src.add("lm_head.weight", {V, d}));
  }
  int32_t head_b = -1;
  if (r.head_bias) {
    TERN_ASSIGN_OR_RETURN(head_b, src.add("lm_head.bias", {V}));
  }
  TERN_ASSIGN_OR_RETURN(int32_t logits, e.op(OpCode::LINEAR, "logits", {x}, {head_w, head_b}, V, params::Linear{}));
  TERN_RETURN_IF_ERROR(g.add_output(logits));

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
