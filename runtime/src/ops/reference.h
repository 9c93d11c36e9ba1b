// SPDX-License-Identifier: MIT
// Reference kernels: plain loops with double accumulation, the yardstick the optimised paths are tested against.
// Layouts: activations are row-major [n, width]; weights as in schema/tern.fbs.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/adaptive.h"
#include "ops/adaptive_span.h"
#include "ops/attention_pattern.h"
#include "ops/compressive.h"
#include "ops/relative_xl.h"
#include "ops/rotary.h"
#include "tern_generated.h"

namespace tern::ref {

// out[i] = table[ids[i]] * scale; table [V, d], out [n, d]
void embedding(const float* table, int64_t d, const int32_t* ids, int64_t n, float* out, float scale = 1.0f);
// out[i] = x[i] + pe[pos0 + i]; table [P, d] for LEARNED, ignored for SINUSOIDAL
void position(fb::PositionKind kind, const float* table, int64_t d, int64_t pos0, int64_t n, const float* x, float* out);
// gamma [d], beta [d] or null
void layer_norm(const float* x, int64_t n, int64_t d, const float* gamma, const float* beta, float eps, float* out);
// out = x W^T + b; x [n, in], W [out, in], b [out] or null
void linear(const float* x, int64_t n, int64_t in, const float* w, const float* b, int64_t out_dim, float* out);
// cap: SOFTCAP's (ActivationParams.cap), unused by the other kinds
void activation(fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap = 0.0f);
// out [n, F] = act(gate) * up of x [n, 2F] = gate | up
void gated_activation(fb::ActivationKind kind, const float* x, int64_t n, int64_t f, float* out);
// RMS_NORM (schema/tern.fbs): gain [c]; group 0 means c; columns c..width-1 copied
void rms_norm(const float* x, int64_t n, int64_t width, const float* gain, int64_t c, int64_t group,
              float weight_offset, float eps, float* out);
// ROTARY (ops/rotary.h) on rows [n, width] at positions pos0..; call_end: the call's last position + 1
void rotary(const Rotary& r, const float* x, int64_t width, int64_t n, int64_t pos0, int64_t call_end, float* out);
void add(const float* a, const float* b, int64_t count, float* out);
// Softmax attention of n queries at positions pos0.. over keys at positions 0..T-1, each query seeing the keys
// pattern.visible() allows. q [n, q_stride] (head h at columns h*dh), k, v [T, kv_stride] (key/value head g at
// columns g*dh; query head h reads g = h / (heads / kv_heads); kv_heads 0 means heads), out [n, heads*dh].
// softcap > 0: each scaled score becomes softcap * tanh(score / softcap).
void attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, int64_t n,
               int64_t pos0, int heads, int head_dim, float scale, const AttentionPattern& pattern, float* out,
               int kv_heads = 0, float softcap = 0.0f);
// Adaptive span attention (ops/adaptive_span.h) of n queries at positions pos0.. over keys at positions 0..pos0+n-1;
// keys before position 0 are zero. q [n, q_stride] (head h at columns h*dh), k, v [pos0+n, kv_stride] (key/value head g
// at columns g*dh; query head h reads g = h / (heads / kv_heads)), out [n, heads*dh].
void adaptive_span_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                             int64_t n, int64_t pos0, float scale, const AdaptiveSpan& span, float* out);
// Transformer-XL relative attention (ops/relative_xl.h) of one call: h [n, d], memory [M, d] (updated in place to
// the last M rows of [memory; h]), out [n, heads*dh].
void relative_xl_attention(const float* h, int64_t n, float* memory, const RelativeXL& xl, float* out);
// Compressive memory attention (ops/compressive.h) of one call: a [n, d], memory updated, out [n, heads*dh].
void compressive_attention(const float* a, int64_t n, CompressiveMemory& memory, const Compressive& c, float* out);
// Adaptive input (ops/adaptive.h): ids [n] -> out [n, d]. Ids are assumed in range.
void adaptive_embedding(const int32_t* ids, int64_t n, const AdaptiveInput& spec, float* out);
// Projected adaptive log-softmax (ops/adaptive.h): x [n, d] -> out [n, V] log-probabilities.
void adaptive_log_softmax(const float* x, int64_t n, const AdaptiveSoftmax& spec, float* out);
// out[i] = [a[i] | b[i]]; a [n, da], b [n, db], out [n, da + db]
void concat(const float* a, int64_t da, const float* b, int64_t db, int64_t n, float* out);
// AXIAL positions: out[i] = x[i] + [rows[p / s1] | cols[p % s1]], p = pos0 + i; rows [s0, d0], cols [s1, d1]
void axial_position(const float* rows, int64_t d0, const float* cols, int64_t s1, int64_t d1, int64_t pos0, int64_t n,
                    const float* x, float* out);
// out[i] = x[i] - log(sum_j exp(x[i, j])); x, out [n, d]
void log_softmax(const float* x, int64_t n, int64_t d, float* out);

}  // namespace tern::ref
