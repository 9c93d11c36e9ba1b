// Reference kernels: plain loops with double accumulation, the yardstick the optimised paths are tested against.
// Layouts: activations are row-major [n, width]; weights as in schema/tern.fbs.
#pragma once

#include <cstdint>

#include "ops/adaptive_span.h"
#include "ops/attention_pattern.h"
#include "tern_generated.h"

namespace tern::ref {

// out[i] = table[ids[i]]; table [V, d], out [n, d]
void embedding(const float* table, int64_t d, const int32_t* ids, int64_t n, float* out);
// out[i] = x[i] + pe[pos0 + i]; table [P, d] for LEARNED, ignored for SINUSOIDAL
void position(fb::PositionKind kind, const float* table, int64_t d, int64_t pos0, int64_t n, const float* x, float* out);
// gamma [d], beta [d] or null
void layer_norm(const float* x, int64_t n, int64_t d, const float* gamma, const float* beta, float eps, float* out);
// out = x W^T + b; x [n, in], W [out, in], b [out] or null
void linear(const float* x, int64_t n, int64_t in, const float* w, const float* b, int64_t out_dim, float* out);
void activation(fb::ActivationKind kind, const float* x, int64_t count, float* out);
void add(const float* a, const float* b, int64_t count, float* out);
// Softmax attention of n queries at positions pos0.. over keys at positions 0..T-1, each query seeing the keys
// pattern.visible() allows. q [n, q_stride] (head h at columns h*dh), k, v [T, kv_stride], out [n, heads*dh].
void attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t n,
               int64_t pos0, int heads, int head_dim, float scale, const AttentionPattern& pattern, float* out);
// Adaptive span attention (ops/adaptive_span.h) of n queries at positions pos0.. over keys at positions 0..pos0+n-1;
// keys before position 0 are zero. q [n, q_stride] (head h at columns h*dh), k, v [pos0+n, kv_stride], out [n, heads*dh].
void adaptive_span_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                             int64_t n, int64_t pos0, float scale, const AdaptiveSpan& span, float* out);
// out[i] = x[i] - log(sum_j exp(x[i, j])); x, out [n, d]
void log_softmax(const float* x, int64_t n, int64_t d, float* out);

}  // namespace tern::ref
