// ATTENTION: qkv [n, 3*H*dh] (q | k | v column blocks) -> [n, H*dh]; causal softmax attention whose visible keys
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
#include "ops/relative_xl.h"

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
  return kind->validate(node, values);
}

uint64_t state_bytes(const Node& node, int64_t n, tern_kv_storage kv) { return attention_kind(node).state_bytes(node, n, kv); }
uint64_t dense_bytes(const Node& node, int64_t n) { return attention_kind(node).dense_bytes(node, n); }
Streaming streaming(const Node& node) { return attention_kind(node).streaming; }
int64_t sequence_limit(const Node& node, int64_t max_tokens) { return attention_kind(node).max_sequence(node, max_tokens); }

// Transformer-XL's kernels compute, at creation, r(p) [P, inner] and v·r(p) [P, heads] for the P distances a call of
// max_batch tokens reads, from the encodings pe(p) [P, d]: all three at once at their peak.
uint64_t setup_bytes(const Node& node, int64_t max_batch) {
  if (node.fb_op->params_as_AttentionParams()->kind_type() != fb::AttentionKind::RelativeXL) return 0;
  const auto xl = RelativeXL::from(node);
  if (!xl.ok()) return 0;  // validated before; never here
  const RelativeXL& x = xl.value();
  uint64_t bytes = 0;
  const uint64_t per_row = (uint64_t(x.inner()) + uint64_t(x.heads) + uint64_t(x.d)) * sizeof(float);
  return __builtin_mul_overflow(uint64_t(x.position_rows(max_batch)), per_row, &bytes) ? UINT64_MAX : bytes;
}

// The windowed kinds' q · k and p · v for every (query, key) pair the pattern shows: 4 * head_dim per pair. The
// other kinds (adaptive span, Transformer-XL, compressive, LSH, routing) do not count theirs.
uint64_t flops(const Node& node, int64_t pos0, int64_t n) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  switch (p->kind_type()) {
    case fb::AttentionKind::Dense:
    case fb::AttentionKind::SlidingWindow:
    case fb::AttentionKind::ChunkedLocal:
    case fb::AttentionKind::Strided:
    case fb::AttentionKind::Fixed: break;
    default: return 0;
  }
  const auto made = AttentionPattern::from(*p, std::string());
  if (!made.ok()) return 0;  // validated before; never here
  const AttentionPattern& pattern = made.value();
  // Heads see one pattern, or two under a split layout (the first half of the heads and the second).
  const int groups = pattern.split ? 2 : 1;
  const uint64_t heads_per_group = uint64_t(pattern.heads / groups);
  uint64_t pairs = 0;
  for (int g = 0; g < groups; ++g) {
    const int head = g == 0 ? 0 : pattern.heads - 1;
    uint64_t keys = 0;
    for (int64_t i = pos0; i < pos0 + n; ++i) {
      const int64_t lo = pattern.local_lo(head, i);
      keys += uint64_t(i - lo + 1);
      if (pattern.has_scattered(head)) {
        pattern.scattered(head, i, lo, [&](int64_t begin, int64_t end) { keys += uint64_t(end - begin); });
      }
    }
    pairs += heads_per_group * keys;
  }
  return pairs * 4 * uint64_t(p->head_dim());
}

// The projections of the kinds that carry them: RelativeXL's qkv and r_net, Compressive's qkv and conv weight.
// LSH rotations and routing centroids decide buckets and clusters, and stay float32 like every other weight here.
bool compressible(fb::AttentionKind kind, int slot) {
  if (kind == fb::AttentionKind::RelativeXL) return slot == 0 || slot == 1;
  if (kind == fb::AttentionKind::Compressive) return slot == 0 || slot == 2;
  return false;
}

}  // namespace

void ref::attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t n,
                    int64_t pos0, int heads, int head_dim, float scale, const AttentionPattern& pattern, float* out) {
  std::vector<double> p(size_t(pos0 + n));
  for (int h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = pos0 + r;
      const float* qi = q + r * q_stride + int64_t(h) * head_dim;
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        if (!pattern.visible(h, i, j)) continue;
        const float* kj = k + j * kv_stride + int64_t(h) * head_dim;
        double s = 0;
        for (int c = 0; c < head_dim; ++c) s += double(qi[c]) * double(kj[c]);
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        if (pattern.visible(h, i, j)) sum += (p[j] = std::exp(p[j] - mx));
      }
      for (int c = 0; c < head_dim; ++c) {
        double acc = 0;
        for (int64_t j = 0; j <= i; ++j) {
          if (pattern.visible(h, i, j)) acc += p[j] * double(v[j * kv_stride + int64_t(h) * head_dim + c]);
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
