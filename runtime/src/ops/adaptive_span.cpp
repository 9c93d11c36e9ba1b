// SPDX-License-Identifier: MIT
#include "ops/adaptive_span.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention_kinds.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

constexpr int64_t kMaxSpan = int64_t(1) << 31;

}  // namespace

Result<AdaptiveSpan> AdaptiveSpan::from(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto* k = p->kind_as_AdaptiveSpan();
  const std::string where = node.label();
  AdaptiveSpan a;
  a.heads = p->heads();
  a.kv_heads = p->kv_heads() > 0 ? p->kv_heads() : p->heads();
  a.head_dim = p->head_dim();
  a.max_span = k->max_span();
  a.ramp = k->ramp();
  if (a.max_span < 1 || a.max_span > kMaxSpan) {
    return InvalidModel(where + ": max_span " + std::to_string(a.max_span) + " must be in [1, 2^31]");
  }
  const TensorInfo* key_pe = node.weights.size() > 0 ? node.weights[0] : nullptr;
  const TensorInfo* span = node.weights.size() > 1 ? node.weights[1] : nullptr;
  if (!key_pe) return InvalidModel(where + ": adaptive span attention needs its key_pe weight [head_dim, max_span]");
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {a.head_dim, a.max_span}));
  a.key_pe = key_pe->f32();
  if (span) {
    TERN_RETURN_IF_ERROR(expect_shape(node, 1, {a.heads}));
    if (a.ramp < 1 || a.ramp > kMaxSpan) {
      return InvalidModel(where + ": ramp " + std::to_string(a.ramp) + " must be in [1, 2^31] when the span is learned");
    }
    a.span = span->f32();
    for (int h = 0; h < a.heads; ++h) {
      if (!std::isfinite(a.span[h])) return InvalidModel(where + ": span of head " + std::to_string(h) + " is not finite");
    }
  }
  // m_h(d) never grows with d, so the reach is the last distance before the first zero.
  a.reach.assign(size_t(a.heads), a.max_span);
  if (a.masked()) {
    for (int h = 0; h < a.heads; ++h) {
      int64_t lo = 0, hi = a.max_span;  // m(lo) > 0 (or lo = 0), and the answer is in [lo, hi]
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (a.mask(h, mid) > 0.0f) lo = mid; else hi = mid - 1;
      }
      a.reach[size_t(h)] = lo;
    }
  }
  return a;
}

float AdaptiveSpan::mask(int head, int64_t d) const {
  if (!span) return 1.0f;
  // The reference codebase: clamp((mask_template + current_val * max_size) / ramp_size + 1, 0, 1) in float32, with
  // mask_template = linspace(1 - L, 0, L), whose entry for distance d is 1 - d. The product is rounded on its own
  // (no fused multiply-add) as it is there.
  volatile float zl = span[head] * float(max_span);
  const float m = (float(1 - d) + zl) / float(ramp) + 1.0f;
  return std::min(1.0f, std::max(0.0f, m));
}

std::vector<int64_t> AdaptiveSpan::kv_reach() const {
  const HeadLayout l = layout();
  std::vector<int64_t> kv(size_t(l.kv_heads), 0);
  for (int h = 0; h < heads; ++h) kv[size_t(l.kv_head(h))] = std::max(kv[size_t(l.kv_head(h))], reach[size_t(h)]);
  return kv;
}

int64_t AdaptiveSpan::state_keys(int64_t n) const {
  int64_t keys = 0;
  for (int64_t r : kv_reach()) keys += std::min(n, r);
  return keys;
}

HeadLayout AdaptiveSpan::layout() const {
  return head_layout(fb::AttentionKind::AdaptiveSpan, heads, head_dim, kv_heads);
}

void ref::adaptive_span_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                                  int64_t n, int64_t pos0, float scale, const AdaptiveSpan& a, float* out) {
  const int dh = a.head_dim;
  const int64_t L = a.max_span;
  std::vector<double> score(size_t(L) + 1);  // [L + 1], by distance
  std::vector<double> acc(static_cast<size_t>(dh));
  const HeadLayout heads = a.layout();
  for (int h = 0; h < a.heads; ++h) {
    const int64_t reach = a.reach[size_t(h)];
    const int64_t kv_col = int64_t(heads.kv_head(h)) * dh;  // key/value head h / (heads / kv_heads)
    for (int64_t r = 0; r < n; ++r) {
      const int64_t i = pos0 + r;
      const float* qi = q + r * q_stride + int64_t(h) * dh;
      double mx = -INFINITY;
      for (int64_t d = 1; d <= reach; ++d) {
        const int64_t j = i - d;
        const float* kj = j >= 0 ? k + j * kv_stride + kv_col : nullptr;  // j < 0: a zero key
        double s = 0;
        for (int c = 0; c < dh; ++c) s += double(qi[c]) * ((kj ? double(kj[c]) : 0.0) + double(a.key_pe[c * L + (L - d)]));
        score[size_t(d)] = s * scale;
        mx = std::max(mx, score[size_t(d)]);
      }
      double sum = 0, sum_masked = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t d = 1; d <= reach; ++d) {
        const double e = std::exp(score[size_t(d)] - mx), em = e * double(a.mask(h, d));
        sum += e;
        sum_masked += em;
        const int64_t j = i - d;
        if (j < 0) continue;  // a zero value
        for (int c = 0; c < dh; ++c) acc[size_t(c)] += em * double(v[j * kv_stride + kv_col + c]);
      }
      const double denom = sum_masked + (a.masked() ? kAdaptiveSpanEps * sum : 0.0);
      float* o = out + r * int64_t(a.heads) * dh + int64_t(h) * dh;
      for (int c = 0; c < dh; ++c) o[c] = denom > 0 ? float(acc[size_t(c)] / denom) : 0.0f;
    }
  }
}

}  // namespace tern
