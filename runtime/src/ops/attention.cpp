// SPDX-License-Identifier: MIT
// ATTENTION: qkv [n, (H + 2*KV)*dh] (q | k | v column blocks; KV key/value heads, H by default) -> [n, H*dh]; causal softmax attention whose visible keys
// follow the op's kind (ops/attention_pattern.h; kind AdaptiveSpan: ops/adaptive_span.h). State: the keys and values
// later queries can still reach. Weights: kind AdaptiveSpan has key_pe [dh, max_span] and span [H] or -1.
// Kind RelativeXL (ops/relative_xl.h) reads the layer input h [n, d] instead, and keeps a memory of layer inputs.
// Kind Compressive (ops/compressive.h) reads its attention input a [n, d] and keeps a memory and a compressed memory.
// Kind Lsh (ops/lsh.h) reads qk | v [n, 2*H*dh] and has one weight (rotations); kind Routing (ops/routing.h) reads qkv
// and has one weight (centroids). Both run a first call whole and keep a cache that later calls continue from.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/attention_kinds.h"
#include "ops/attention_pattern.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

// The checks every kind shares, then the kind's own (ops/attention_kinds.cpp).
Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  // The verifier accepts a union whose type is set but whose table is absent.
  if (p->kind_type() != fb::AttentionKind::NONE && p->kind() == nullptr) return InvalidModel(node.label() + ": attention kind parameters are missing");
  if (p->heads() < 1 || p->head_dim() < 1 || p->heads() > 4096 || p->head_dim() > 4096) {
    return InvalidModel(node.label() + ": heads and head_dim must be in [1, 4096]");
  }
  if (!(std::isfinite(p->scale()) && p->scale() > 0)) return InvalidModel(node.label() + ": scale must be positive and finite");
  if (!p->causal()) return Unsupported(node.label() + ": non-causal attention is not supported by a streaming decoder");
  const AttentionKindDef* kind = find_attention_kind(p->kind_type());
  if (!kind) return Unsupported(node.label() + ": attention kind " + std::to_string(int(p->kind_type())) + " is not supported");
  if (p->kv_heads() != 0 && (p->kv_heads() < 1 || p->kv_heads() > p->heads() || p->heads() % p->kv_heads() != 0)) {
    return InvalidModel(node.label() + ": kv_heads " + std::to_string(p->kv_heads()) + " must divide heads " +
                        std::to_string(p->heads()));
  }
  if (p->kv_heads() != 0 && p->kv_heads() != p->heads() && !kind->grouped_kv) {
    return Unsupported(node.label() + ": " + kind->name + " attention takes one key/value head per query head (kv_heads " +
                       std::to_string(p->kv_heads()) + " of " + std::to_string(p->heads()) + ")");
  }
  if (!(std::isfinite(p->logit_softcap()) && p->logit_softcap() >= 0.0f)) {
    return InvalidModel(node.label() + ": logit_softcap must be finite and non-negative");
  }
  if (p->logit_softcap() > 0.0f && !kind->soft_caps) {
    return Unsupported(node.label() + ": " + kind->name + " attention does not soft-cap its scores");
  }
  return kind->validate(node, values);
}

uint64_t state_bytes(const Node& node, int64_t n, tern_kv_storage kv) { return attention_kind(node).state_bytes(node, n, kv); }
uint64_t dense_bytes(const Node& node, int64_t n) { return attention_kind(node).dense_bytes(node, n); }
Streaming streaming(const Node& node) { return attention_kind(node).streaming; }
int64_t sequence_limit(const Node& node, int64_t max_tokens) { return attention_kind(node).max_sequence(node, max_tokens); }

uint64_t setup_bytes(const Node& node, int64_t max_batch) {
  const AttentionKindDef& kind = attention_kind(node);
  return kind.setup_bytes ? kind.setup_bytes(node, max_batch) : 0;
}
uint64_t flops(const Node& node, int64_t pos0, int64_t n) {
  const AttentionKindDef& kind = attention_kind(node);
  return kind.flops ? kind.flops(node, pos0, n) : 0;
}
// The converter asks before there is a Node: by kind, from the kind table.
bool compressible(fb::AttentionKind kind, int slot) {
  const AttentionKindDef* def = find_attention_kind(kind);
  return def && slot >= 0 && slot < 32 && (def->compressible_slots >> slot & 1u) != 0;
}

}  // namespace

void ref::attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t n,
                    int64_t pos0, int heads, int head_dim, float scale, const AttentionPattern& pattern, float* out,
                    int kv_heads, float softcap) {
  std::vector<double> p(size_t(pos0 + n));
  const int group = heads / (kv_heads > 0 ? kv_heads : heads);  // query heads per key/value head
  for (int h = 0; h < heads; ++h) {
    const int64_t kv_col = int64_t(h / group) * head_dim;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = pos0 + r;
      const float* qi = q + r * q_stride + int64_t(h) * head_dim;
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        if (!pattern.visible(h, i, j)) continue;
        const float* kj = k + j * kv_stride + kv_col;
        double s = 0;
        for (int c = 0; c < head_dim; ++c) s += double(qi[c]) * double(kj[c]);
        p[j] = softcap > 0 ? softcap * std::tanh(s * scale / softcap) : s * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        if (pattern.visible(h, i, j)) sum += (p[j] = std::exp(p[j] - mx));
      }
      for (int c = 0; c < head_dim; ++c) {
        double acc = 0;
        for (int64_t j = 0; j <= i; ++j) {
          if (pattern.visible(h, i, j)) acc += p[j] * double(v[j * kv_stride + kv_col + c]);
        }
        out[r * int64_t(heads) * head_dim + int64_t(h) * head_dim + c] = float(acc / sum);
      }
    }
  }
}

extern const OpDef kAttentionOp = {fb::OpCode::ATTENTION, "ATTENTION", 1, 0, 7, fb::OpParams::AttentionParams,
                                   validate, state_bytes, dense_bytes, streaming, sequence_limit,
                                   setup_bytes, flops, compressible};

}  // namespace tern
