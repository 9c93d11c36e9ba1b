// ATTENTION: qkv [n, 3*H*dh] (q | k | v column blocks) -> [n, H*dh]; causal softmax attention whose visible keys
// follow the op's kind (ops/attention_pattern.h; kind AdaptiveSpan: ops/adaptive_span.h). State: the keys and values
// later queries can still reach. Weights: kind AdaptiveSpan has key_pe [dh, max_span] and span [H] or -1.
// Kind RelativeXL (ops/relative_xl.h) reads the layer input h [n, d] instead, and keeps a memory of layer inputs.
// Kind Compressive (ops/compressive.h) reads its attention input a [n, d] and keeps a memory and a compressed memory.
// Kind Lsh (ops/lsh.h) reads qk | v [n, 2*H*dh], has one weight (rotations), keeps no state and runs whole sequences.
// Kind Routing (ops/routing.h) reads qkv, has one weight (centroids), keeps no state and runs whole sequences.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/kernels.h"
#include "ops/adaptive_span.h"
#include "ops/attention_pattern.h"
#include "ops/compressive.h"
#include "ops/lsh.h"
#include "ops/op.h"
#include "ops/reference.h"
#include "ops/relative_xl.h"
#include "ops/routing.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  // The verifier accepts a union whose type is set but whose table is absent.
  if (p->kind_type() != fb::AttentionKind::NONE && p->kind() == nullptr) return InvalidModel(node.label() + ": attention kind parameters are missing");
  if (p->heads() < 1 || p->head_dim() < 1 || p->heads() > 4096 || p->head_dim() > 4096) {
    return InvalidModel(node.label() + ": heads and head_dim must be in [1, 4096]");
  }
  if (!(std::isfinite(p->scale()) && p->scale() > 0)) return InvalidModel(node.label() + ": scale must be positive and finite");
  if (!p->causal()) return Unsupported(node.label() + ": non-causal attention is not supported by a streaming decoder");
  const int64_t inner = int64_t(p->heads()) * p->head_dim();
  if (p->kind_type() == fb::AttentionKind::RelativeXL) {
    auto xl = RelativeXL::from(node);
    if (!xl.ok()) return xl.status();
    TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, xl.value().d));
    return expect_width(node, values, true, 0, inner);
  }
  if (p->kind_type() == fb::AttentionKind::Compressive) {
    auto c = Compressive::from(node);
    if (!c.ok()) return c.status();
    TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, c.value().d));
    return expect_width(node, values, true, 0, inner);
  }
  if (p->kind_type() == fb::AttentionKind::Lsh) {
    // Reformer LSH (ops/lsh.h): shared query-key and values, qkv [n, 2*H*dh]; weight: rotations.
    auto lsh = LshAttention::from(node);
    if (!lsh.ok()) return lsh.status();
    TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, 2 * inner));
    return expect_width(node, values, true, 0, inner);
  }
  if (p->kind_type() == fb::AttentionKind::Routing) {
    // Routing Transformer (ops/routing.h): qkv as the windowed kinds; weight: centroids.
    auto routing = RoutingAttention::from(node);
    if (!routing.ok()) return routing.status();
  } else if (p->kind_type() == fb::AttentionKind::AdaptiveSpan) {
    if (node.weights.size() > 2) return InvalidModel(node.label() + ": kind AdaptiveSpan takes at most 2 weights");
    auto span = AdaptiveSpan::from(node);
    if (!span.ok()) return span.status();
  } else {
    auto pattern = AttentionPattern::from(*p, node.label());
    if (!pattern.ok()) return pattern.status();
    for (const TensorInfo* w : node.weights) {
      if (w) return InvalidModel(node.label() + ": weight '" + w->name + "' given, but only kinds AdaptiveSpan and RelativeXL have weights");
    }
  }
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, 3 * inner));
  return expect_width(node, values, true, 0, inner);
}

uint64_t state_bytes(const Node& node, int64_t n) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const uint64_t key_bytes = uint64_t(p->head_dim()) * sizeof(float);
  // Transformer-XL: the memory of mem_len layer inputs, full (of zeros) from the first token on.
  if (p->kind_type() == fb::AttentionKind::RelativeXL) return RelativeXL::from(node).value().state_bytes();
  if (p->kind_type() == fb::AttentionKind::Compressive) {
    // The memory and the compressed memory: attention inputs, d floats a row.
    const Compressive c = Compressive::from(node).value();
    return uint64_t(c.state_rows(n)) * uint64_t(c.d) * sizeof(float);
  }
  if (p->kind_type() == fb::AttentionKind::Lsh) return 0;  // whole sequences only: nothing carries over
  if (p->kind_type() == fb::AttentionKind::Routing) return 0;
  if (p->kind_type() == fb::AttentionKind::AdaptiveSpan) {
    // Each head keeps its own reach: one key and one value per kept position, summed over the heads.
    auto span = AdaptiveSpan::from(node);
    return 2ull * key_bytes * uint64_t(span.value().state_keys(n));
  }
  auto pattern = AttentionPattern::from(*p, "");
  // One key and one value per head for every kept position.
  return 2ull * uint64_t(p->heads()) * key_bytes * uint64_t(pattern.value().state_keys(n));
}

uint64_t dense_bytes(const Node& node, int64_t n) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  // Transformer-XL's and the compressive kind's scores of one call: n queries against the memories and the call.
  uint64_t keys = uint64_t(n);
  if (p->kind_type() == fb::AttentionKind::RelativeXL) keys += uint64_t(p->kind_as_RelativeXL()->mem_len());
  if (p->kind_type() == fb::AttentionKind::Compressive) {
    const auto* c = p->kind_as_Compressive();
    keys += uint64_t(std::max(0, c->mem_len())) + uint64_t(std::max(0, c->rate() - 1)) + uint64_t(std::max(0, c->cmem_len()));
  }
  return uint64_t(p->heads()) * uint64_t(n) * keys * sizeof(float);
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

// Dense, windowed, sparse and adaptive-span kernels attend causally over their KV cache or ring, so a call split
// into appends gives the same rows. Not RelativeXL and Compressive: their memory moves once per call, so a split
// call would move it differently; nor Lsh and Routing, which need the whole sequence.
bool runs_in_appends(const Node& node) {
  switch (node.fb_op->params_as_AttentionParams()->kind_type()) {
    case fb::AttentionKind::RelativeXL:
    case fb::AttentionKind::Compressive:
    case fb::AttentionKind::Lsh:
    case fb::AttentionKind::Routing:
      return false;
    default:
      return true;
  }
}

extern const OpDef kAttentionOp = {fb::OpCode::ATTENTION, "ATTENTION", 1, 0, 7, fb::OpParams::AttentionParams,
                                   validate, cpu::make_attention, state_bytes, dense_bytes, false, runs_in_appends};

}  // namespace tern
