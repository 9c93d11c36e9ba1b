// SPDX-License-Identifier: MIT
#include "importers/hf_decoder.h"

#include <filesystem>
#include <functional>
#include <optional>

#include "format/input_file.h"
#include "importers/decoder_builder.h"
#include "importers/tensor_source.h"
#include "json_text.h"

namespace tern::convert {

Result<fb::ActivationKind> hf_activation(const Config& c, const std::string& key, const std::string& fallback) {
  TERN_ASSIGN_OR_RETURN(std::string act, c.string(key, fallback));
  // transformers' ACT2FN: gelu is erf's, gelu_new and gelu_pytorch_tanh are the tanh approximation.
  if (act == "silu" || act == "swish") return fb::ActivationKind::SILU;
  if (act == "gelu") return fb::ActivationKind::GELU_ERF;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh") return fb::ActivationKind::GELU_TANH;
  if (act == "relu") return fb::ActivationKind::RELU;
  return c.field_error(key, "'" + clip(act) +
                                "' is not an activation the runtime runs (silu, swish, gelu, gelu_new, "
                                "gelu_pytorch_tanh, relu)");
}

Result<std::vector<bool>> hf_layer_types(const Config& c, int64_t layers,
                                         const std::function<bool(int64_t)>& fallback) {
  std::vector<bool> sliding(static_cast<size_t>(layers), false);
  const nlohmann::json* types = c.get("layer_types");
  if (!types) {
    for (int64_t i = 0; i < layers; ++i) sliding[size_t(i)] = fallback(i);
    return sliding;
  }
  if (!types->is_array() || int64_t(types->size()) != layers)
    return c.field_error("layer_types", "must be a list of num_hidden_layers (" + std::to_string(layers) +
                                            ") strings, got " + Config::show(*types));
  for (int64_t i = 0; i < layers; ++i) {
    const nlohmann::json& t = (*types)[size_t(i)];
    if (t == "sliding_attention") {
      sliding[size_t(i)] = true;
    } else if (t != "full_attention") {
      return c.field_error("layer_types", "entry " + std::to_string(i) +
                                              " must be \"sliding_attention\" or \"full_attention\", got " +
                                              Config::show(t));
    }
  }
  return sliding;
}

namespace {

// An id or a list of ids (eos_token_id); `first` -1 when absent.
Status read_ids(const Config& c, const std::string& key, int32_t* first, std::vector<int32_t>* rest) {
  const nlohmann::json* v = c.get(key);
  if (!v) return Status::Ok();
  std::vector<int32_t> ids;
  auto one = [&](const nlohmann::json& x) -> Status {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > uint64_t(INT32_MAX))
      return c.field_error(key, "must be a token id or a list of them, got " + Config::show(*v));
    ids.push_back(int32_t(x.get<uint64_t>()));
    return Status::Ok();
  };
  if (v->is_array()) {
    for (const auto& x : *v) TERN_RETURN_IF_ERROR(one(x));
  } else {
    TERN_RETURN_IF_ERROR(one(*v));
  }
  if (ids.empty()) return Status::Ok();
  *first = ids[0];
  if (rest) rest->assign(ids.begin() + 1, ids.end());
  return Status::Ok();
}

}  // namespace

Status read_generation_config(const Checkpoint& checkpoint, HfDecoder* out);
Status read_add_bos(const Checkpoint& checkpoint, bool family_default, HfDecoder* out);

Status hf_special_ids(const Checkpoint& checkpoint, const Config& c, std::optional<int32_t> bos,
                      std::optional<int32_t> eos, HfDecoder* out) {
  out->bos_id = bos.value_or(-1);
  out->eos_id = eos.value_or(-1);
  out->extra_eos_ids.clear();
  TERN_RETURN_IF_ERROR(read_ids(c, "bos_token_id", &out->bos_id, nullptr));
  TERN_RETURN_IF_ERROR(read_ids(c, "eos_token_id", &out->eos_id, &out->extra_eos_ids));
  TERN_RETURN_IF_ERROR(read_generation_config(checkpoint, out));
  const std::string& t = out->model_type;
  const bool bos_first = t == "llama" || t == "mistral" || t == "phi3" || t == "gemma2" || t == "gemma3_text";
  TERN_RETURN_IF_ERROR(read_add_bos(checkpoint, bos_first, out));
  // An id the logits cannot reach (a default such as GPT-2's 50256 on a smaller vocabulary) is no special token.
  if (out->bos_id >= out->vocab) out->bos_id = -1;
  if (out->eos_id >= out->vocab) out->eos_id = -1;
  std::vector<int32_t> extra;
  for (int32_t id : out->extra_eos_ids)
    if (id < out->vocab) extra.push_back(id);
  out->extra_eos_ids = std::move(extra);
  return Status::Ok();
}

Result<std::optional<nlohmann::json>> hf_read_json_beside(const std::string& dir, const std::string& name,
                                                          const char* what) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<nlohmann::json>();
  TERN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  TERN_ASSIGN_OR_RETURN(const std::string text, file.read_all(kMaxConfigBytes, what));
  auto parsed = parse_json(text);
  if (!parsed.ok()) return InvalidModel(name + ": " + parsed.status().message());
  return std::optional<nlohmann::json>(std::move(parsed).value());
}

Status read_generation_config(const Checkpoint& checkpoint, HfDecoder* out) {
  TERN_ASSIGN_OR_RETURN(const auto gen, hf_read_json_beside(checkpoint.dir(), "generation_config.json", "a generation config"));
  if (!gen) return Status::Ok();
  const Config g(*gen, "generation_config.json");
  TERN_RETURN_IF_ERROR(read_ids(g, "bos_token_id", &out->bos_id, nullptr));
  if (g.has("eos_token_id")) {
    out->extra_eos_ids.clear();
    TERN_RETURN_IF_ERROR(read_ids(g, "eos_token_id", &out->eos_id, &out->extra_eos_ids));
  }
  return Status::Ok();
}

// tokenizer_config.json's add_bos_token when the file says it; `family_default` otherwise.
Status read_add_bos(const Checkpoint& checkpoint, bool family_default, HfDecoder* out) {
  out->add_bos = family_default;
  TERN_ASSIGN_OR_RETURN(const auto json, hf_read_json_beside(checkpoint.dir(), "tokenizer_config.json", "a tokenizer config"));
  if (!json) return Status::Ok();
  const Config t(*json, "tokenizer_config.json");
  TERN_ASSIGN_OR_RETURN(out->add_bos, t.boolean("add_bos_token", family_default));
  return Status::Ok();
}

Status hf_refuse_bool(const Config& c, const std::string& key, bool allowed, const std::string& why) {
  TERN_ASSIGN_OR_RETURN(bool v, c.boolean(key, allowed));
  if (v != allowed) return c.field_error(key, std::string("must be ") + (allowed ? "true" : "false") + ": " + why);
  return Status::Ok();
}

Status hf_check_counts(const Checkpoint& checkpoint, const Config& c, const char* layers_key, int64_t layers,
                       const char* heads_key, int64_t heads, int64_t head_dim) {
  constexpr int64_t kMaxHeads = 4096;  // the runtime's ATTENTION limit on heads and on head_dim
  if (uint64_t(layers) > checkpoint.tensor_count())
    return c.field_error(layers_key, std::to_string(layers) + " layers, but the checkpoint holds " +
                                         std::to_string(checkpoint.tensor_count()) + " tensors");
  if (heads > kMaxHeads) return c.field_error(heads_key, std::to_string(heads) + " is above the 4096 heads supported");
  if (head_dim > kMaxHeads)
    return c.field_error("head_dim", std::to_string(head_dim) + " is above the 4096 head size supported");
  return Status::Ok();
}

void hf_write_special_ids(const HfDecoder& m, ModelMetadata* meta) {
  meta->bos_id = m.bos_id;
  meta->eos_id = m.eos_id;
  meta->extra_eos_ids = m.extra_eos_ids;
  meta->add_bos = m.add_bos;
}

Status hf_check_shapes(const Config& c, const HfDecoder& m) {
  if (m.heads % m.kv_heads != 0)
    return c.field_error("num_key_value_heads", std::to_string(m.kv_heads) + " must divide num_attention_heads " +
                                                    std::to_string(m.heads));
  for (int64_t i = 0; i < m.layers; ++i)
    if (m.window[size_t(i)] < 0) return c.field_error("sliding_window", "must be positive");
  return Status::Ok();
}

namespace {

const LayerNames kLayerNames{"input_layernorm", "self_attn.o_proj", "resid_attn", "pre_feedforward_layernorm",
                             "mlp.gate_up_proj", "mlp.act", "mlp.down_proj", "resid_mlp",
                             "post_attention_layernorm", "post_feedforward_layernorm"};

Result<Norm> rms(TensorSource& src, const HfDecoder& m, const std::string& name, int64_t width) {
  Norm n;
  n.kind = NormKind::kRms;
  n.eps = m.eps;
  n.weight_offset = m.gemma ? 1.0f : 0.0f;
  TERN_ASSIGN_OR_RETURN(n.weight, src.add(name, {width}));
  return n;
}

Result<LinearWeights> stacked_linear(TensorSource& src, const std::string& name, const std::string& p,
                                     const std::vector<std::pair<std::string, int64_t>>& parts, int64_t in,
                                     bool bias) {
  std::vector<TensorSource::Part> w, b;
  for (const auto& [part, rows] : parts) {
    w.push_back({p + part + ".weight", {rows, in}});
    b.push_back({p + part + ".bias", {rows}});
  }
  LinearWeights out;
  TERN_ASSIGN_OR_RETURN(out.weight, src.add_stacked(name + ".weight", w));
  if (bias) {
    TERN_ASSIGN_OR_RETURN(out.bias, src.add_stacked(name + ".bias", b));
  }
  return out;
}

Result<int32_t> build_layer(const HfDecoder& m, int64_t i, int32_t x, const std::vector<std::vector<int32_t>>& rope_w,
                            TensorSource& src, DecoderBuilder& b) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int64_t d = m.d, H = m.heads, KV = m.kv_heads, dh = m.head_dim, I = m.ffn;
  DecoderLayer layer;
  // Llama's post_attention_layernorm is the MLP block's pre-norm; Gemma's is the sandwich norm on the attention
  // output, with pre_feedforward_layernorm before the MLP.
  TERN_ASSIGN_OR_RETURN(layer.attn_norm, rms(src, m, p + "input_layernorm.weight", d));
  if (m.gemma) {
    TERN_ASSIGN_OR_RETURN(layer.post_attn_norm, rms(src, m, p + "post_attention_layernorm.weight", d));
    TERN_ASSIGN_OR_RETURN(layer.mlp_norm, rms(src, m, p + "pre_feedforward_layernorm.weight", d));
    TERN_ASSIGN_OR_RETURN(layer.post_mlp_norm, rms(src, m, p + "post_feedforward_layernorm.weight", d));
  } else {
    TERN_ASSIGN_OR_RETURN(layer.mlp_norm, rms(src, m, p + "post_attention_layernorm.weight", d));
  }
  TERN_ASSIGN_OR_RETURN(layer.attn_out, src.linear(p + "self_attn.o_proj", d, H * dh, m.o_bias));
  layer.mlp.gated = true;
  layer.mlp.activation = m.activation;
  if (m.fused_gate_up) {
    TERN_ASSIGN_OR_RETURN(layer.mlp.up, src.linear(p + "mlp.gate_up_proj", 2 * I, d, m.mlp_bias));
  } else {
    TERN_ASSIGN_OR_RETURN(layer.mlp.up, stacked_linear(src, p + "mlp.gate_up_proj", p + "mlp.",
                                                       {{"gate_proj", I}, {"up_proj", I}}, d, m.mlp_bias));
  }
  TERN_ASSIGN_OR_RETURN(layer.mlp.down, src.linear(p + "mlp.down_proj", d, I, m.mlp_bias));

  RotaryAttention a;
  if (m.fused_qkv) {
    TERN_ASSIGN_OR_RETURN(a.qkv, src.linear(p + "self_attn.qkv_proj", (H + 2 * KV) * dh, d, m.qkv_bias));
  } else {
    TERN_ASSIGN_OR_RETURN(a.qkv, stacked_linear(src, p + "self_attn.qkv_proj", p + "self_attn.",
                                                {{"q_proj", H * dh}, {"k_proj", KV * dh}, {"v_proj", KV * dh}}, d,
                                                m.qkv_bias));
  }
  if (m.qk_norm) {
    a.qk_norm.kind = NormKind::kRms;
    a.qk_norm.eps = m.eps;
    a.qk_norm.weight_offset = m.gemma ? 1.0f : 0.0f;
    TERN_ASSIGN_OR_RETURN(a.qk_norm.weight,
                          src.add_stacked(p + "self_attn.qk_norm.weight",
                                          {{p + "self_attn.q_norm.weight", {dh}, H}, {p + "self_attn.k_norm.weight", {dh}, KV}}));
  }
  const size_t r = m.rope_of_layer[size_t(i)];
  a.rotary = rotary_params(m.ropes[r], int32_t(H + KV), int32_t(dh));
  a.rotary_weights = rope_w[r];
  AttentionKind kind = fb::DenseT{};
  if (m.window[size_t(i)] > 0) kind = fb::SlidingWindowT{{}, int32_t(m.window[size_t(i)])};
  a.params = attention_params(int32_t(H), int32_t(dh), m.attn_scale, std::move(kind));
  a.params.kv_heads = int32_t(KV);
  a.params.logit_softcap = m.attn_softcap;
  return b.layer(p, kLayerNames, layer, x,
                 [&](int32_t in) { return b.rotary_attention(p, RotaryNames{}, in, a); });
}

}  // namespace

Status build_hf_decoder(const Checkpoint& checkpoint, GraphBuilder& g, const HfDecoder& m) {
  TensorSource src(checkpoint, g);
  DecoderBuilder b(g);
  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t embed_w, src.add("model.embed_tokens.weight", {m.vocab, m.d}));
  TERN_ASSIGN_OR_RETURN(int32_t x, m.embed_scale == 1.0f ? b.embedding("model.embed_tokens", ids, embed_w)
                                                          : b.scaled_embedding("model.embed_tokens", ids, embed_w,
                                                                               m.embed_scale));
  // Each distinct RoPE's tables, stored once and read by every layer that uses it.
  std::vector<std::vector<int32_t>> rope_w;
  for (size_t r = 0; r < m.ropes.size(); ++r) {
    const RopeTables& t = m.ropes[r];
    const int64_t half = t.rotary_dim / 2;
    std::vector<int32_t> w;
    TERN_ASSIGN_OR_RETURN(int32_t f, src.add_constant(m.rope_names[r] + ".inv_freq", {half}, t.inv_freq));
    w.push_back(f);
    if (!t.long_inv_freq.empty()) {
      TERN_ASSIGN_OR_RETURN(int32_t lf, src.add_constant(m.rope_names[r] + ".long_inv_freq", {half}, t.long_inv_freq));
      w.push_back(lf);
    }
    rope_w.push_back(std::move(w));
  }
  for (int64_t i = 0; i < m.layers; ++i) {
    TERN_ASSIGN_OR_RETURN(x, build_layer(m, i, x, rope_w, src, b));
  }
  TERN_ASSIGN_OR_RETURN(const Norm final_norm, rms(src, m, "model.norm.weight", m.d));
  TERN_ASSIGN_OR_RETURN(x, b.norm("model.norm", x, final_norm));
  LinearWeights head{embed_w, -1};
  if (!m.tied) {
    if (!checkpoint.find("lm_head.weight"))
      return InvalidModel("missing tensor 'lm_head.weight' (config.json: tie_word_embeddings is false, so the head "
                          "is its own tensor)");
    TERN_ASSIGN_OR_RETURN(head.weight, src.add("lm_head.weight", {m.vocab, m.d}));
  }
  TERN_RETURN_IF_ERROR(b.head("logits", x, head, m.final_softcap).status());

  ModelMetadata& meta = g.metadata();
  meta.architecture = m.model_type;
  meta.description = m.model_type + ": " + std::to_string(m.layers) + " layers, d " + std::to_string(m.d) + ", " +
                     std::to_string(m.heads) + " heads" +
                     (m.kv_heads != m.heads ? " (" + std::to_string(m.kv_heads) + " kv)" : std::string()) +
                     ", head_dim " + std::to_string(m.head_dim) + ", rope " + m.ropes[0].type +
                     (m.summary.empty() ? "" : ", " + m.summary);
  meta.vocab_kind = fb::VocabKind::EXTERNAL;
  meta.vocab_note = "the checkpoint's Hugging Face tokenizer; without tokenizer.json or tokenizer.model beside "
                    "config.json the model takes ids only";
  meta.vocab_size = m.vocab;
  hf_write_special_ids(m, &meta);
  meta.max_context = m.max_positions;
  return Status::Ok();
}

}  // namespace tern::convert
