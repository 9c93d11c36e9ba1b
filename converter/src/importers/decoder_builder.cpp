// SPDX-License-Identifier: MIT
#include "importers/decoder_builder.h"

namespace tern::convert {

Result<int32_t> DecoderBuilder::op(fb::OpCode code, const std::string& name, std::vector<int32_t> inputs,
                                   std::vector<int32_t> weights, int64_t width, OpParams params, int32_t version) {
  TERN_ASSIGN_OR_RETURN(int32_t out, g_.add_value(name, fb::DType::F32, width));
  TERN_RETURN_IF_ERROR(
      g_.add_op(code, name, std::move(inputs), {out}, std::move(weights), std::move(params), version).status());
  return out;
}

Result<int32_t> DecoderBuilder::ids() {
  TERN_ASSIGN_OR_RETURN(int32_t ids, g_.add_value("ids", fb::DType::I32, 1));
  TERN_RETURN_IF_ERROR(g_.add_input(ids));
  return ids;
}

Result<int32_t> DecoderBuilder::embedding(const std::string& name, int32_t ids, int32_t table, int32_t proj,
                                          float scale) {
  if (proj < 0 && scale == 1.0f) {
    return op(fb::OpCode::EMBEDDING, name, {ids}, {table}, g_.tensors()[size_t(table)].shape.at(1),
              fb::EmbeddingParamsT{});
  }
  fb::AdaptiveEmbeddingParamsT p;  // no cutoffs: one cluster, every id
  p.scale = scale;
  const int64_t d = proj < 0 ? g_.tensors()[size_t(table)].shape.at(1) : rows(proj);
  return op(fb::OpCode::ADAPTIVE_EMBEDDING, name, {ids}, {table, proj}, d, p);
}

Result<int32_t> DecoderBuilder::scaled_embedding(const std::string& name, int32_t ids, int32_t table, float scale) {
  fb::EmbeddingParamsT p;
  p.scale = scale;
  return op(fb::OpCode::EMBEDDING, name, {ids}, {table}, g_.tensors()[size_t(table)].shape.at(1), p,
            scale == 1.0f ? 1 : 2);
}

Result<int32_t> DecoderBuilder::positions(const std::string& name, int32_t x, fb::PositionKind kind,
                                          int64_t max_positions, std::vector<int32_t> weights) {
  return op(fb::OpCode::POSITION, name, {x}, std::move(weights), width(x),
            fb::PositionParamsT{{}, kind, max_positions});
}

Result<int32_t> DecoderBuilder::norm(const std::string& name, int32_t x, const Norm& n) {
  if (n.kind == NormKind::kRms) {
    fb::RmsNormParamsT p;
    p.eps = n.eps;
    p.weight_offset = n.weight_offset;
    return op(fb::OpCode::RMS_NORM, name, {x}, {n.weight}, width(x), p);
  }
  return op(fb::OpCode::LAYER_NORM, name, {x}, {n.weight, n.bias}, width(x), fb::LayerNormParamsT{{}, n.eps});
}

Result<int32_t> DecoderBuilder::linear(const std::string& name, int32_t x, const LinearWeights& w) {
  return op(fb::OpCode::LINEAR, name, {x}, {w.weight, w.bias}, rows(w.weight), fb::LinearParamsT{});
}

Result<int32_t> DecoderBuilder::add(const std::string& name, int32_t a, int32_t b) {
  return op(fb::OpCode::ADD, name, {a, b}, {}, width(a), fb::AddParamsT{});
}

Result<int32_t> DecoderBuilder::concat(const std::string& name, int32_t a, int32_t b) {
  return op(fb::OpCode::CONCAT, name, {a, b}, {}, width(a) + width(b), fb::ConcatParamsT{});
}

Result<int32_t> DecoderBuilder::mlp(const std::string& prefix, const LayerNames& names, int32_t x, const Mlp& m) {
  TERN_ASSIGN_OR_RETURN(int32_t up, linear(prefix + names.up, x, m.up));
  int32_t act = -1;
  if (m.gated) {
    fb::GatedActivationParamsT p;
    p.kind = m.activation;
    TERN_ASSIGN_OR_RETURN(act, op(fb::OpCode::GATED_ACTIVATION, prefix + names.act, {up}, {}, width(up) / 2, p));
  } else {
    fb::ActivationParamsT p;
    p.kind = m.activation;
    TERN_ASSIGN_OR_RETURN(act, op(fb::OpCode::ACTIVATION, prefix + names.act, {up}, {}, width(up), p));
  }
  return linear(prefix + names.down, act, m.down);
}

Result<int32_t> DecoderBuilder::attention(const std::string& qkv_name, const std::string& name, int32_t x,
                                          const AttentionOp& a) {
  int32_t in = x;
  if (a.qkv.weight >= 0) {
    TERN_ASSIGN_OR_RETURN(in, linear(qkv_name, x, a.qkv));
  }
  fb::AttentionParamsT params = a.params;
  if (params.kv_heads == params.heads) params.kv_heads = 0;  // 0 means `heads`: a file older runtimes read
  const int32_t version = params.kv_heads != 0 || params.logit_softcap != 0.0f ? 2 : 1;
  return op(fb::OpCode::ATTENTION, name, {in}, a.weights, int64_t(params.heads) * params.head_dim, params, version);
}

Result<int32_t> DecoderBuilder::rotary_attention(const std::string& prefix, const RotaryNames& names, int32_t x,
                                                 const RotaryAttention& a) {
  TERN_ASSIGN_OR_RETURN(int32_t qkv, linear(prefix + names.qkv, x, a.qkv));
  if (a.qk_norm.weight >= 0) {
    fb::RmsNormParamsT p;
    p.eps = a.qk_norm.eps;
    p.weight_offset = a.qk_norm.weight_offset;
    p.group = a.params.head_dim;
    TERN_ASSIGN_OR_RETURN(qkv, op(fb::OpCode::RMS_NORM, prefix + names.qk_norm, {qkv}, {a.qk_norm.weight}, width(qkv), p));
  }
  TERN_ASSIGN_OR_RETURN(qkv, op(fb::OpCode::ROTARY, prefix + names.rotary, {qkv}, a.rotary_weights, width(qkv),
                                a.rotary));
  return attention("", prefix + names.attn, qkv, AttentionOp{a.params, {}, {}});
}

Result<int32_t> DecoderBuilder::softcap(const std::string& name, int32_t x, float cap) {
  fb::ActivationParamsT p;
  p.kind = fb::ActivationKind::SOFTCAP;
  p.cap = cap;
  return op(fb::OpCode::ACTIVATION, name, {x}, {}, width(x), p);
}

Result<int32_t> DecoderBuilder::residual(const std::string& norm_name, const std::string& add_name, NormAt at,
                                         const Norm& n, int32_t reads, int32_t adds_to,
                                         const std::function<Result<int32_t>(int32_t)>& body) {
  const bool has_norm = n.weight >= 0;
  int32_t in = reads;
  if (at == NormAt::kBefore && has_norm) {
    TERN_ASSIGN_OR_RETURN(in, norm(norm_name, reads, n));
  }
  TERN_ASSIGN_OR_RETURN(int32_t f, body(in));
  TERN_ASSIGN_OR_RETURN(int32_t sum, add(add_name, adds_to, f));
  if (at == NormAt::kBefore || !has_norm) return sum;
  return norm(norm_name, sum, n);
}

Result<int32_t> DecoderBuilder::attention_block(const std::string& prefix, const LayerNames& names,
                                                const DecoderLayer& layer, int32_t reads, int32_t adds_to,
                                                const AttentionBody& attention) {
  return residual(prefix + names.attn_norm, prefix + names.resid_attn, layer.norm_at, layer.attn_norm, reads, adds_to,
                  [&](int32_t in) -> Result<int32_t> {
                    TERN_ASSIGN_OR_RETURN(int32_t heads, attention(in));
                    TERN_ASSIGN_OR_RETURN(int32_t out, linear(prefix + names.attn_out, heads, layer.attn_out));
                    if (layer.post_attn_norm.weight < 0) return out;
                    return norm(prefix + names.post_attn_norm, out, layer.post_attn_norm);
                  });
}

Result<int32_t> DecoderBuilder::mlp_block(const std::string& prefix, const LayerNames& names,
                                          const DecoderLayer& layer, int32_t reads, int32_t adds_to) {
  return residual(prefix + names.mlp_norm, prefix + names.resid_mlp, layer.norm_at, layer.mlp_norm, reads, adds_to,
                  [&](int32_t in) -> Result<int32_t> {
                    TERN_ASSIGN_OR_RETURN(int32_t out, mlp(prefix, names, in, layer.mlp));
                    if (layer.post_mlp_norm.weight < 0) return out;
                    return norm(prefix + names.post_mlp_norm, out, layer.post_mlp_norm);
                  });
}

Result<int32_t> DecoderBuilder::layer(const std::string& prefix, const LayerNames& names, const DecoderLayer& layer,
                                      int32_t x, const AttentionBody& attention) {
  TERN_ASSIGN_OR_RETURN(int32_t h, attention_block(prefix, names, layer, x, x, attention));
  return mlp_block(prefix, names, layer, h, h);
}

Result<int32_t> DecoderBuilder::head(const std::string& name, int32_t x, const LinearWeights& w, float cap) {
  TERN_ASSIGN_OR_RETURN(int32_t logits, linear(cap > 0.0f ? name + ".uncapped" : name, x, w));
  if (cap > 0.0f) {
    TERN_ASSIGN_OR_RETURN(logits, softcap(name, logits, cap));
  }
  TERN_RETURN_IF_ERROR(g_.add_output(logits));
  return logits;
}

}  // namespace tern::convert
