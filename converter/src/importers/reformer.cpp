// SPDX-License-Identifier: MIT
// Importer for Hugging Face Reformer checkpoints ("model_type": "reformer", ReformerModelWithLMHead); spec:
// converter/reformer.md.
//
// Two reversible streams x1 = x2 = embedding + positions; per layer
//   x1 = x1 + Wo · Attn(LayerNorm_a(x2))                      (Attn: chunked local, or LSH)
//   x2 = x2 + W2 · act(W1 · LayerNorm_f(x1) + b1) + b2
// then logits = lm_head(LayerNorm([x1 | x2])). Local layers become ATTENTION of kind ChunkedLocal over q | k | v;
// LSH layers ATTENTION of kind Lsh over qk | v, with rotations from the checkpoint or drawn from the hash seed.
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "config.h"
#include "importers/decoder_builder.h"
#include "importers/importers.h"
#include "importers/tensor_source.h"

namespace tern::convert {
namespace {

constexpr int64_t kMaxBuckets = int64_t(1) << 24;  // the runtime's limits (runtime/src/ops/lsh.cpp)
constexpr int64_t kMaxWindow = int64_t(1) << 24;
constexpr int64_t kMaxRotations = int64_t(1) << 30;

struct ReformerConfig {
  int64_t vocab = 0, d = 0, heads = 0, dh = 0, ffn = 0;
  std::vector<std::string> layers;  // "lsh" | "local"
  fb::ActivationKind act = fb::ActivationKind::RELU;
  double eps = 1e-12;
  bool axial = true;
  std::vector<int64_t> axial_shape, axial_dims;  // [s0, s1], [d0, d1]
  int64_t max_positions = 0;
  int64_t local_chunk = 0, local_before = 0;
  int64_t lsh_chunk = 0, lsh_before = 0, hashes = 0;
  std::vector<int64_t> buckets;  // factors
  std::optional<uint64_t> hash_seed;
  bool has(const char* kind) const {
    for (const auto& l : layers) if (l == kind) return true;
    return false;
  }
  // HF _get_least_common_mult_chunk_len and _get_min_chunk_len over the kinds present.
  int64_t lcm_chunk() const {
    int64_t v = 1;
    if (has("lsh")) v = std::lcm(v, lsh_chunk);
    if (has("local")) v = std::lcm(v, local_chunk);
    return v;
  }
  int64_t min_chunk() const {
    if (has("lsh") && has("local")) return std::min(lsh_chunk, local_chunk);
    return has("lsh") ? lsh_chunk : local_chunk;
  }
};

// A list of positive integers (e.g. axial_pos_shape).
Result<std::vector<int64_t>> int_list(const Config& c, const std::string& key, size_t min_size, size_t max_size) {
  const nlohmann::json* v = c.get(key);
  if (!v) return c.field_error(key, "is missing");
  if (!v->is_array() || v->size() < min_size || v->size() > max_size) {
    return c.field_error(key, "must be a list of " + std::to_string(min_size) + (min_size == max_size ? "" : ".." + std::to_string(max_size)) +
                                  " positive integers, got " + Config::show(*v));
  }
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    if (!e.is_number_unsigned() || e.get<uint64_t>() < 1 || e.get<uint64_t>() > uint64_t(INT32_MAX)) {
      return c.field_error(key, "must hold positive integers, got " + Config::show(*v));
    }
    out.push_back(int64_t(e.get<uint64_t>()));
  }
  return out;
}

Result<ReformerConfig> read_config(const nlohmann::json& json) {
  const Config c(json);
  ReformerConfig r;
  TERN_ASSIGN_OR_RETURN(r.vocab, c.positive_int("vocab_size"));
  TERN_ASSIGN_OR_RETURN(r.d, c.positive_int("hidden_size"));
  TERN_ASSIGN_OR_RETURN(r.heads, c.positive_int("num_attention_heads"));
  TERN_ASSIGN_OR_RETURN(r.dh, c.positive_int("attention_head_size"));
  TERN_ASSIGN_OR_RETURN(r.ffn, c.positive_int("feed_forward_size"));
  if (r.heads > 4096 || r.dh > 4096) return c.error("num_attention_heads and attention_head_size must be at most 4096");

  const nlohmann::json* layers = c.get("attn_layers");
  if (!layers) return c.field_error("attn_layers", "is missing");
  if (!layers->is_array() || layers->empty()) return c.field_error("attn_layers", "must be a non-empty list of \"lsh\" and \"local\"");
  for (size_t i = 0; i < layers->size(); ++i) {
    const auto& e = (*layers)[i];
    if (!e.is_string() || (e.get<std::string>() != "lsh" && e.get<std::string>() != "local")) {
      return c.field_error("attn_layers", "entry " + std::to_string(i) + " is " + Config::show(e) +
                                               "; only \"lsh\" and \"local\" layers exist");
    }
    r.layers.push_back(e.get<std::string>());
  }
  if (c.has("num_hidden_layers")) {
    TERN_ASSIGN_OR_RETURN(int64_t n, c.positive_int("num_hidden_layers"));
    if (n != int64_t(r.layers.size())) {
      return c.field_error("num_hidden_layers", "is " + std::to_string(n) + " but attn_layers lists " +
                                                    std::to_string(r.layers.size()) + " layers");
    }
  }
  TERN_ASSIGN_OR_RETURN(const std::string act,
                        c.choice("hidden_act", {"relu", "gelu", "gelu_new", "gelu_pytorch_tanh"}));
  r.act = act == "relu" ? fb::ActivationKind::RELU : act == "gelu" ? fb::ActivationKind::GELU_ERF : fb::ActivationKind::GELU_TANH;
  TERN_ASSIGN_OR_RETURN(r.eps, c.positive_number("layer_norm_eps", 1e-12));
  TERN_ASSIGN_OR_RETURN(const bool decoder, c.boolean("is_decoder"));
  if (!decoder) return Unsupported("config.json: is_decoder is false: only causal ReformerModelWithLMHead models are supported");
  TERN_ASSIGN_OR_RETURN(const bool tied, c.boolean("tie_word_embeddings", false));
  if (tied) {
    return Unsupported("config.json: tie_word_embeddings is true, but Reformer's LM head reads 2 * hidden_size features "
                       "and cannot share the [vocab, hidden_size] word embeddings");
  }
  TERN_ASSIGN_OR_RETURN(r.max_positions, c.positive_int("max_position_embeddings"));
  TERN_ASSIGN_OR_RETURN(r.axial, c.boolean("axial_pos_embds"));
  if (r.axial) {
    TERN_ASSIGN_OR_RETURN(r.axial_shape, int_list(c, "axial_pos_shape", 2, 2));
    TERN_ASSIGN_OR_RETURN(r.axial_dims, int_list(c, "axial_pos_embds_dim", 2, 2));
    if (r.axial_dims[0] + r.axial_dims[1] != r.d) {
      return c.field_error("axial_pos_embds_dim", "must sum to hidden_size " + std::to_string(r.d));
    }
    if (r.axial_shape[0] * r.axial_shape[1] > (int64_t(1) << 32)) return c.field_error("axial_pos_shape", "is too large");
  }
  if (r.has("local")) {
    TERN_ASSIGN_OR_RETURN(r.local_chunk, c.positive_int("local_attn_chunk_length"));
    TERN_ASSIGN_OR_RETURN(r.local_before, c.integer("local_num_chunks_before", 0));
    TERN_ASSIGN_OR_RETURN(int64_t after, c.integer("local_num_chunks_after", 0));
    if (after != 0) return c.field_error("local_num_chunks_after", "must be 0 for a causal LM (HF's ReformerModelWithLMHead asserts it)");
  }
  if (r.has("lsh")) {
    TERN_ASSIGN_OR_RETURN(r.lsh_chunk, c.positive_int("lsh_attn_chunk_length"));
    TERN_ASSIGN_OR_RETURN(r.lsh_before, c.integer("lsh_num_chunks_before", 0));
    TERN_ASSIGN_OR_RETURN(int64_t after, c.integer("lsh_num_chunks_after", 0));
    if (after != 0) return c.field_error("lsh_num_chunks_after", "must be 0 for a causal LM (HF's ReformerModelWithLMHead asserts it)");
    TERN_ASSIGN_OR_RETURN(r.hashes, c.positive_int("num_hashes"));
    if (r.hashes > 1024) return c.field_error("num_hashes", "must be at most 1024");
    const nlohmann::json* nb = c.get("num_buckets");
    if (!nb) {
      return c.field_error("num_buckets", "is missing or null: HF then picks it from the first sequence it sees "
                                          "(about 2 * n / lsh_attn_chunk_length); set it to the value the model was trained with");
    }
    if (nb->is_array()) {
      TERN_ASSIGN_OR_RETURN(r.buckets, int_list(c, "num_buckets", 1, 16));
    } else {
      TERN_ASSIGN_OR_RETURN(int64_t b, c.positive_int("num_buckets"));
      r.buckets = {b};
    }
    int64_t total = 1;
    for (int64_t f : r.buckets) {
      if (f % 2 != 0 || f < 2) {
        return c.field_error("num_buckets", "must hold even bucket counts (each round hashes by argmax over [xR, -xR]), got " + Config::show(*nb));
      }
      total *= f;
      if (total > kMaxBuckets) return c.field_error("num_buckets", "gives more than 2^24 buckets");
    }
  }
  // The runtime's limits (runtime/src/ops/lsh.cpp, attention_pattern.cpp), checked here so that a file never fails
  // to load for them.
  if (r.has("lsh")) {
    if (r.lsh_chunk * (1 + r.lsh_before) > kMaxWindow) {
      return c.error("an LSH window of lsh_attn_chunk_length * (1 + lsh_num_chunks_before) keys exceeds 2^24");
    }
    int64_t rot_half = 0;
    for (int64_t f : r.buckets) rot_half += f / 2;
    if (r.heads * r.dh * r.hashes * rot_half > kMaxRotations) return c.error("the LSH rotations would exceed 2^30 values");
  }
  if (r.has("local") && r.local_chunk * (1 + r.local_before) > (int64_t(1) << 31)) {
    return c.error("a local window of local_attn_chunk_length * (1 + local_num_chunks_before) keys exceeds 2^31");
  }
  const int64_t lcm = r.lcm_chunk();
  if (lcm > (int64_t(1) << 30)) return c.error("the least common multiple of the chunk lengths is too large");
  if (c.has("hash_seed")) {
    const nlohmann::json* s = c.get("hash_seed");
    if (!s->is_number_unsigned()) return c.field_error("hash_seed", "must be a non-negative integer or null, got " + Config::show(*s));
    r.hash_seed = s->get<uint64_t>();
  }
  return r;
}

// Rotations drawn when the checkpoint has none: standard normal floats in row-major order of [H, dh, hashes, rot/2]
// from Box-Muller on a SplitMix64 stream (converter/reformer.md states the generator exactly).
class RotationGenerator {
 public:
  explicit RotationGenerator(uint64_t seed) : state_(seed) {}
  void fill(float* out, size_t count) {
    for (size_t i = 0; i < count; i += 2) {
      const double u1 = (double(next() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
      const double u2 = double(next() >> 11) * 0x1.0p-53;          // [0, 1)
      const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * M_PI * u2;
      out[i] = float(r * std::cos(t));
      if (i + 1 < count) out[i + 1] = float(r * std::sin(t));
    }
  }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// Scalar buffers some HF versions save. The float32 ones must hold HF's values; the float16 ones are unused.
Result<float> scalar(const Checkpoint& checkpoint, const std::string& name, float expected, bool must_match) {
  const TensorView* v = checkpoint.find(name);
  if (!v) return expected;
  if (v->numel() != 1) return InvalidModel(v->file + ": tensor '" + name + "' must be a scalar");
  float value = 0.0f;
  TERN_RETURN_IF_ERROR(to_f32(*v, &value, /*allow_non_finite=*/true));  // compared below
  if (must_match && value != expected) {
    return Unsupported(v->file + ": tensor '" + name + "' is " + std::to_string(value) + "; HF's Reformer uses " +
                       std::to_string(expected));
  }
  return value;
}

// HF's module names within a ReformerLayer; the attention block's output is stream 1 (HF's attn_output), the feed
// forward's stream 2 (hidden_states).
const LayerNames kLayerNames{"attention.layer_norm",    "attention.output",   "stream1",
                             "feed_forward.layer_norm", "feed_forward.dense", "feed_forward.act",
                             "feed_forward.output",     "stream2"};

struct Streams {
  int32_t x1 = -1, x2 = -1;  // HF: attn_output and hidden_states
};

// One ReformerLayer. `rotations` is the generated tensor shared by LSH layers without their own (-1 if none yet).
Result<Streams> build_layer(const ReformerConfig& r, int64_t i, Streams s, const Checkpoint& checkpoint,
                            TensorSource& src, DecoderBuilder& b, int32_t* shared_rotations, uint64_t seed,
                            bool* drew) {
  const std::string p = "reformer.encoder.layers." + std::to_string(i) + ".";
  const std::string sa = p + "attention.self_attention.";
  const int64_t d = r.d, inner = r.heads * r.dh, F = r.ffn;
  const bool lsh = r.layers[size_t(i)] == "lsh";

  DecoderLayer layer;  // pre-LN on two streams
  TERN_ASSIGN_OR_RETURN(layer.attn_norm, src.norm(p + "attention.layer_norm", d, float(r.eps)));
  TERN_ASSIGN_OR_RETURN(layer.attn_out, src.linear(p + "attention.output.dense", d, inner, false));
  TERN_ASSIGN_OR_RETURN(layer.mlp_norm, src.norm(p + "feed_forward.layer_norm", d, float(r.eps)));
  TERN_ASSIGN_OR_RETURN(layer.mlp.up, src.linear(p + "feed_forward.dense.dense", F, d, true));
  TERN_ASSIGN_OR_RETURN(layer.mlp.down, src.linear(p + "feed_forward.output.dense", d, F, true));
  layer.mlp.activation = r.act;
  TERN_ASSIGN_OR_RETURN(float mask_value, scalar(checkpoint, sa + "mask_value_float32", -1e9f, true));
  (void)mask_value;
  TERN_ASSIGN_OR_RETURN(float mask16, scalar(checkpoint, sa + "mask_value_float16", -1e4f, false));
  (void)mask16;

  fb::AttentionParamsT attn;
  attn.heads = int32_t(r.heads);
  attn.head_dim = int32_t(r.dh);
  attn.causal = true;
  int32_t proj_w = -1, rot = -1;
  if (lsh) {
    TERN_ASSIGN_OR_RETURN(proj_w, src.add_concat(sa + "query_key_value.weight",
                                                 {sa + "query_key.weight", sa + "value.weight"}, {inner, d}));
    TERN_ASSIGN_OR_RETURN(float self_mask, scalar(checkpoint, sa + "self_mask_value_float32", -1e5f, true));
    TERN_ASSIGN_OR_RETURN(float self16, scalar(checkpoint, sa + "self_mask_value_float16", -1e3f, false));
    (void)self16;
    int64_t rot_size = 0;
    for (int64_t f : r.buckets) rot_size += f;
    const std::vector<int64_t> rot_shape = {r.heads, r.dh, r.hashes, rot_size / 2};
    if (checkpoint.find(sa + "rotations")) {
      TERN_ASSIGN_OR_RETURN(rot, src.add(sa + "rotations", rot_shape));
    } else {
      if (*shared_rotations < 0) {
        const size_t count = size_t(r.heads * r.dh * r.hashes * (rot_size / 2));
        auto draw = [seed, count](uint8_t* dst, size_t size) -> Status {
          if (size != count * sizeof(float)) return InvalidArgument("destination size mismatch");
          RotationGenerator(seed).fill(reinterpret_cast<float*>(dst), count);
          return Status::Ok();
        };
        TERN_ASSIGN_OR_RETURN(*shared_rotations,
                              b.graph().add_tensor("lsh_rotations", fb::DType::F32, rot_shape, std::move(draw)));
      }
      rot = *shared_rotations;
      *drew = true;
    }
    fb::LshT k;
    k.chunk = int32_t(r.lsh_chunk);
    k.chunks_before = int32_t(r.lsh_before);
    k.chunks_after = 0;
    k.hashes = int32_t(r.hashes);
    for (int64_t f : r.buckets) k.buckets.push_back(int32_t(f));
    k.pad_to = int32_t(r.lcm_chunk());
    k.pad_above = int32_t(r.min_chunk());
    k.self_mask_value = self_mask;
    k.key_norm_eps = 1e-6f;  // HF _len_norm
    attn.kind = AttentionKind(std::move(k));
    attn.scale = float(1.0 / std::sqrt(double(r.dh)));  // keys: * rsqrt(attention_head_size)
  } else {
    TERN_ASSIGN_OR_RETURN(proj_w,
                          src.add_concat(sa + "query_key_value.weight",
                                         {sa + "query.weight", sa + "key.weight", sa + "value.weight"}, {inner, d}));
    // HF: chunks of local_attn_chunk_length seeing local_num_chunks_before chunks back, keys / sqrt(dh); its circular
    // wrap only reaches later chunks, which the causal mask hides (converter/reformer.md).
    attn.kind = AttentionKind(fb::ChunkedLocalT{{}, int32_t(r.local_chunk), int32_t(r.local_before), 0});
    attn.scale = float(1.0 / std::sqrt(double(r.dh)));
  }

  // The projection has no bias; a local layer's op takes no rotations (-1).
  const AttentionOp op{attn, {proj_w, -1}, {rot}};
  TERN_ASSIGN_OR_RETURN(int32_t y1, b.attention_block(p, kLayerNames, layer, s.x2, s.x1, [&](int32_t in) {
    return b.attention(p + "attention.projection", p + "attention.self_attention", in, op);
  }));
  TERN_ASSIGN_OR_RETURN(int32_t y2, b.mlp_block(p, kLayerNames, layer, y1, s.x2));
  return Streams{y1, y2};
}

}  // namespace

Status import_reformer(const Checkpoint& checkpoint, const ImportOptions& options, GraphBuilder& g) {
  TERN_ASSIGN_OR_RETURN(const ReformerConfig r, read_config(checkpoint.config()));
  const int64_t V = r.vocab, d = r.d;
  const uint64_t seed = options.hash_seed ? *options.hash_seed : r.hash_seed.value_or(0);
  TensorSource src(checkpoint, g);
  DecoderBuilder b(g);

  TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
  TERN_ASSIGN_OR_RETURN(int32_t emb_w, src.add("reformer.embeddings.word_embeddings.weight", {V, d}));
  TERN_ASSIGN_OR_RETURN(int32_t e, b.embedding("reformer.embeddings.word_embeddings", ids, emb_w));
  fb::PositionKind pos_kind = fb::PositionKind::LEARNED;
  int64_t max_positions = 0;
  std::vector<int32_t> pos_w;
  int64_t positions = 0;
  if (r.axial) {
    const int64_t s0 = r.axial_shape[0], s1 = r.axial_shape[1], d0 = r.axial_dims[0], d1 = r.axial_dims[1];
    TERN_ASSIGN_OR_RETURN(int32_t rows,
                          src.add_reshaped("reformer.embeddings.position_embeddings.weights.0", {s0, 1, d0}, {s0, d0}));
    TERN_ASSIGN_OR_RETURN(int32_t cols,
                          src.add_reshaped("reformer.embeddings.position_embeddings.weights.1", {1, s1, d1}, {s1, d1}));
    pos_kind = fb::PositionKind::AXIAL;
    max_positions = s0 * s1;
    pos_w = {rows, cols};
    positions = std::min(s0 * s1, r.max_positions);
  } else {
    TERN_ASSIGN_OR_RETURN(int32_t table,
                          src.add("reformer.embeddings.position_embeddings.embedding.weight", {r.max_positions, d}));
    max_positions = r.max_positions;
    pos_w = {table};
    positions = r.max_positions;
  }
  TERN_ASSIGN_OR_RETURN(int32_t h, b.positions("reformer.embeddings.position_embeddings", e, pos_kind, max_positions,
                                               pos_w));

  Streams s{h, h};
  int32_t shared_rotations = -1;
  bool drew = false;
  for (int64_t i = 0; i < int64_t(r.layers.size()); ++i) {
    TERN_ASSIGN_OR_RETURN(s, build_layer(r, i, s, checkpoint, src, b, &shared_rotations, seed, &drew));
  }
  TERN_ASSIGN_OR_RETURN(const Norm final_norm, src.norm("reformer.encoder.layer_norm", 2 * d, float(r.eps)));
  LinearWeights head;
  TERN_ASSIGN_OR_RETURN(head.weight, src.add("lm_head.decoder.weight", {V, 2 * d}));
  // The head's bias is lm_head.bias, saved by some versions a second time as lm_head.decoder.bias (the same tensor).
  const bool bias = checkpoint.find("lm_head.bias") != nullptr, twin = checkpoint.find("lm_head.decoder.bias") != nullptr;
  if (!bias && !twin) return InvalidModel("missing tensor 'lm_head.bias' (or its twin 'lm_head.decoder.bias')");
  if (bias && twin) {
    TERN_ASSIGN_OR_RETURN(const TensorView* a, src.require("lm_head.bias", {V}));
    TERN_ASSIGN_OR_RETURN(const TensorView* b, src.require("lm_head.decoder.bias", {V}));
    std::vector<float> va(static_cast<size_t>(V)), vb(static_cast<size_t>(V));
    TERN_RETURN_IF_ERROR(checkpoint.read_f32(*a, va.data()));
    TERN_RETURN_IF_ERROR(checkpoint.read_f32(*b, vb.data()));
    if (va != vb) return InvalidModel("'lm_head.bias' and 'lm_head.decoder.bias' differ; HF ties them to one tensor");
  }
  TERN_ASSIGN_OR_RETURN(head.bias, src.add(bias ? "lm_head.bias" : "lm_head.decoder.bias", {V}));
  TERN_ASSIGN_OR_RETURN(int32_t cat, b.concat("reformer.encoder.streams", s.x1, s.x2));
  TERN_ASSIGN_OR_RETURN(int32_t norm, b.norm("reformer.encoder.layer_norm", cat, final_norm));
  TERN_RETURN_IF_ERROR(b.head("logits", norm, head).status());

  // The longest input HF runs: it pads to the lcm of the chunk lengths first, and the padded length must fit the
  // positions.
  const int64_t lcm = r.lcm_chunk();
  const int64_t context = positions % lcm == 0 || positions <= r.min_chunk() ? positions : positions / lcm * lcm;
  ModelMetadata& m = g.metadata();
  m.architecture = "reformer";
  std::string layers;
  for (const auto& l : r.layers) layers += (layers.empty() ? "" : ",") + l;
  std::string buckets;
  for (int64_t f : r.buckets) buckets += (buckets.empty() ? "" : "x") + std::to_string(f);
  m.description = "reformer: " + std::to_string(r.layers.size()) + " layers [" + layers + "], d " + std::to_string(d) +
                  ", " + std::to_string(r.heads) + " heads x " + std::to_string(r.dh) +
                  (r.axial ? ", axial positions" : ", learned positions") +
                  (r.has("lsh") ? ", lsh chunk " + std::to_string(r.lsh_chunk) + " buckets " + buckets + " hashes " +
                                      std::to_string(r.hashes) +
                                      (drew ? ", rotations drawn from seed " + std::to_string(seed)
                                            : ", rotations from the checkpoint")
                                : "") +
                  (r.has("local") ? ", local chunk " + std::to_string(r.local_chunk) : "");
  m.vocab_size = V;
  if (V == 258) {  // HF google/reformer-enwik8: id = byte + 2; 0 is padding, 1 unused (its model card's decode)
    m.vocab_kind = fb::VocabKind::SHIFTED_BYTES;
    m.byte_offset = 2;
    m.pad_id = 0;
  } else {  // a spiece.model beside config.json makes it SENTENCEPIECE (tokenizer_file.h)
    m.vocab_kind = fb::VocabKind::EXTERNAL;
    m.vocab_note = "ids index the checkpoint's own tokenizer (HF ReformerTokenizer, a SentencePiece model)";
  }
  m.max_context = context;
  return Status::Ok();
}

}  // namespace tern::convert
