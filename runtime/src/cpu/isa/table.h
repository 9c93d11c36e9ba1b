// SPDX-License-Identifier: MIT
// The CPU kernels' hot loops as one table of function pointers. cpu/isa/kernels.cpp is compiled once per
// instruction-set variant (cmake/CpuIsa.cmake), each defining tern::cpu::isa_<name>::kKernels; cpu/isa.h picks one
// at run time. The kernels (cpu/*.cpp) keep everything else: threads, patterns, gathering keys, state.
//
// Every function is a leaf over plain pointers: no callbacks, no std:: types, so that nothing a variant compiles
// (an inline function, a template instantiation) is shared with code of another variant.
#pragma once

#include <cstdint>

namespace tern::cpu {

// Keys in one transposed key block of the windowed attention kernel (cpu/attention.cpp).
constexpr int64_t kAttentionKeyBlock = 64;
// Keys per register block of LSH scores: a window of keys (cpu/attention_lsh.cpp) is a whole number of them.
constexpr int64_t kLshKeyBlock = 64;

// A query row's softmax over its masked scores (LSH attention): max score and log-sum-exp, both float32.
struct RowSoftmax {
  float m, lse;
};

struct IsaKernels {
  const char* name;  // "baseline", "avx2", "avx512" (x86-64), "native" (TERN_NATIVE builds)

  // Row-wise ops (cpu/simple_ops.cpp). x, out [rows, d].
  void (*layer_norm)(const float* x, int64_t rows, int64_t d, const float* gamma, const float* beta_or_null,
                     float eps, float* out);
  void (*relu)(const float* x, int64_t count, float* out);
  void (*gelu_erf)(const float* x, int64_t count, float* out);
  void (*gelu_tanh)(const float* x, int64_t count, float* out);
  void (*silu)(const float* x, int64_t count, float* out);  // x / (1 + exp(-x)), exp to ~2e-7 (fast_math.inc)
  void (*add)(const float* a, const float* b, int64_t count, float* out);

  // float16 activations (cpu/half_rows.cpp), rounded to nearest even as format/half.h.
  void (*halves_to_floats)(const uint16_t* in, int64_t count, float* out);
  void (*floats_to_halves)(const float* in, int64_t count, uint16_t* out);
  void (*add_into_halves)(uint16_t* x, const float* y, int64_t count);  // x += y, rounded once per element

  // q · k over dh floats, with eight partial sums.
  float (*dot)(const float* q, const float* k, int dh);

  // Windowed attention (cpu/attention.cpp), online softmax per query row: running max m, sum l, output acc [dh].
  // `rows` query rows q [rows, dh] (scaled) against one transposed key block kt [dh, kAttentionKeyBlock]: row r
  // sees the block's keys [lo[r], hi[r]) (none when lo[r] >= hi[r]); values[k] is key k's value row, read for the
  // keys some row sees. m, l [rows], acc [rows, dh].
  // softcap > 0 (Gemma 2's attention-logit soft-capping): every score becomes softcap * tanh(score / softcap)
  // before the softmax; 0 leaves the scores as they are.
  void (*attend_tile)(const float* q, int64_t rows, const float* kt, const float* const* values, const int64_t* lo,
                      const int64_t* hi, int dh, float* m, float* l, float* acc, float softcap);
  // `rows` query rows that see the same keys (the query heads of one KV head) against `count` keys given by their
  // rows (count <= kAttentionKeyBlock), read in place: row r's q [dh] at q + r * row_stride * dh, its m and l at
  // m, l + r * row_stride, its acc [dh] at acc + r * row_stride * dh. Each row computes what it would alone.
  void (*attend_keys)(const float* q, int64_t rows, int64_t row_stride, const float* const* keys,
                      const float* const* values, int64_t count, int dh, float* m, float* l, float* acc, float softcap);
  // The same two over float16 key and value rows (IEEE half bits; tern_kv_storage F16), widened in registers: the
  // same sums in the same order as attend_tile / attend_keys given the widened rows (equal to a float32 ulp or so:
  // the compiler may fuse a multiply-add in one and not in the other). kt stays float32 (the
  // caller widens keys as it transposes them, once per block of query rows).
  void (*attend_tile_f16)(const float* q, int64_t rows, const float* kt, const uint16_t* const* values,
                          const int64_t* lo, const int64_t* hi, int dh, float* m, float* l, float* acc,
                          float softcap);
  void (*attend_keys_f16)(const float* q, int64_t rows, int64_t row_stride, const uint16_t* const* keys,
                          const uint16_t* const* values, int64_t count, int dh, float* m, float* l, float* acc,
                          float softcap);

  // LSH attention (cpu/attention_lsh.cpp). Query position i against the first `count` columns of a window of keys
  // kt [dh, W] at positions wpos[]: masked scores (later positions never seen, itself scored self_mask) left in
  // s [count] as exp(s - m), 0 where masked.
  RowSoftmax (*lsh_softmax_row)(const float* q, const float* kt, int64_t W, const int32_t* wpos, int64_t count, int dh,
                                int64_t i, float self_mask, float* s);
  // out [dh] = sum_w s[w] * scale * values[wpos[w] * stride ..] over the `count` keys.
  void (*lsh_weigh_values)(const float* s, const int32_t* wpos, int64_t count, float scale, const float* values,
                           int64_t stride, int dh, float* out);

  // Routing attention (cpu/attention_routing.cpp): softmax of q * scale over the first `visible` keys of a tile,
  // keys kt [dh, K] transposed and values [*, dh] as rows, into o [dh] (zeros when none is visible); s is scratch.
  void (*routing_attend)(const float* kt, int64_t K, const float* values, int dh, const float* q, float scale,
                         int64_t visible, float* s, float* o);

  // Adaptive span (cpu/attention_adaptive_span.cpp): online update of one query row with `count` keys in ascending
  // position, the first at distance d0 (the others at d0-1, d0-2, ...), scores q · (k + pe[d - 1]); mask[d-1] = m(d);
  // a null key or value is a zero vector; running max mx, sums sum and sum_m, output acc [dh]; s scratch.
  void (*span_update_row)(const float* q, int dh, const float* const* keys, const float* const* values, int64_t count,
                          int64_t d0, const float* pe, const float* mask, float* s, float* mx, float* sum,
                          float* sum_m, float* acc);

  // Transformer-XL (cpu/attention_relative_xl.cpp): online update of one query row with `count` keys; key t's row
  // k = kv + t * kv_stride, value k + v_offset, relative position p = pos[t], score
  // q · (k + r[p * r_stride ..]) + uk[t * uk_stride] + vr[p * vr_stride].
  void (*xl_update_row)(const float* q, int dh, const float* kv, int64_t kv_stride, int64_t v_offset, const float* r,
                        int64_t r_stride, const float* uk, int64_t uk_stride, const float* vr, int64_t vr_stride,
                        const int64_t* pos, int64_t count, float* s, float* mx, float* l, float* acc);

  // Compressive attention (cpu/attention_compressive.cpp): online update of one query row with `count` keys; key t's
  // row k = kv + t * kv_stride, value k + v_offset, score q · k.
  void (*strided_update_row)(const float* q, int dh, const float* kv, int64_t kv_stride, int64_t v_offset,
                             int64_t count, float* s, float* mx, float* l, float* acc);

  // Compressed weights (cpu/matrix.cpp; schema/tern.fbs, Tensor, and format/dequantize.cpp define the values).
  // Activations for I8 / I4 weights: x [rows, in] (in a multiple of 32) -> q [rows, in] int8 and s [rows, in / 32]:
  // per block of 32, s = max|x| / 127 and q = x * (127 / max|x|) rounded to nearest, ties to even, so |q| <= 127
  // (q = 0, s = 0 for a block whose max|x| is below 2^-100, zeros included). Bit-identical in every variant.
  void (*quantize_rows_q8)(const float* x, int64_t rows, int64_t in, int8_t* q, float* s);
  // y[r * y_stride + o] = sum over groups g of ws[o * (in / group) + g] *
  //     (sum over blocks b in g of s[r * (in / 32) + b] * dot_int(w[o, block b], q[r, block b])) (+ bias[o])
  // for r < rows, o in [o0, o1); w [out, in] int8 row-major (row o at w + o * in); ws: F32 scales; group: a multiple
  // of 32 dividing in (in for one scale per row). dot_int is the exact int32 dot product of 32 int8 pairs; q as
  // quantize_rows_q8 gives it (|q| <= 127).
  void (*linear_i8)(const int8_t* w, const float* ws, int64_t in, int64_t group, const int8_t* q, const float* s,
                    int64_t rows, const float* bias_or_null, int64_t o0, int64_t o1, float* y, int64_t y_stride);
  // The same for I4 weights: row o at w + o * in / 2, in blocks of 32 elements of 16 bytes: byte k holds element k
  // in its low nibble and element k + 16 in its high nibble, nibble u meaning q = u - 8; ws: float16 scales (IEEE
  // half bits).
  void (*linear_i4)(const uint8_t* w, const uint16_t* ws, int64_t in, int64_t group, const int8_t* q, const float* s,
                    int64_t rows, const float* bias_or_null, int64_t o0, int64_t o1, float* y, int64_t y_stride);
  // F16 weights w [out, in] (IEEE half bits) against float32 activations x [rows, in]:
  // y[r * y_stride + o] = x[r] · w[o] (+ bias[o]), for r < rows, o in [o0, o1).
  void (*linear_f16)(const uint16_t* w, int64_t in, const float* x, int64_t rows, const float* bias_or_null,
                     int64_t o0, int64_t o1, float* y, int64_t y_stride);
  // I8 and I4 matrices packed once per model for prefill (cpu/packed_weights.h, cpu/isa/quant_gemm.inc): panels of
  // qgemm_nr outputs (16 for avx512, 8 elsewhere), qgemm_panel_bytes(in, group, weight_bits) bytes each (8 for I8, 4
  // for I4), laid out for the variant's int8 dot product. Calls of qgemm_min_rows_i8 / _i4 rows or more take them; fewer rows, the in-place
  // kernels (INT64_MAX: never, and nothing is packed).
  int64_t qgemm_nr;
  int64_t qgemm_min_rows_i8, qgemm_min_rows_i4;
  uint64_t (*qgemm_panel_bytes)(int64_t in, int64_t group, int weight_bits);
  // W [rows, in] as linear_i8 / linear_i4 read it, its scales and bias [rows] (or null) -> ceil(rows / qgemm_nr)
  // panels at `panels` (64-byte aligned), zero past the last row.
  void (*pack_i8_panels)(const int8_t* w, const float* ws, const float* bias_or_null, int64_t rows, int64_t in,
                         int64_t group, uint8_t* panels);
  void (*pack_i4_panels)(const uint8_t* w, const uint16_t* ws, const float* bias_or_null, int64_t rows, int64_t in,
                         int64_t group, uint8_t* panels);
  // Activations from quantize_rows_q8, q [rows, in] -> sums [rows, in / 32]: each block's sum, which the avx512
  // panels (unsigned weights) take back from their dot products; the other variants write nothing (nor read it).
  void (*qgemm_activation_sums)(const int8_t* q, int64_t rows, int64_t in, int32_t* sums);
  // y[r * y_stride + c] = the sum linear_i8 / linear_i4 define for output c (bias included) for r < n and c in
  // [p0 * qgemm_nr, min(p1 * qgemm_nr, rows)): q [n, in] and s [n, in / 32] from quantize_rows_q8, sums [n, in / 32]
  // from qgemm_activation_sums. The same quantised products and scales as the in-place kernels; only the order of
  // the float sums differs.
  void (*qgemm_panels)(const uint8_t* panels, int64_t in, int64_t group, int weight_bits, int64_t rows, const int8_t* q,
                       const float* s, const int32_t* sums, int64_t n, int64_t p0, int64_t p1, float* y,
                       int64_t y_stride);

  // Float32 weights (cpu/matrix.cpp), packed once per model (cpu/packed_weights.h) into panels of gemm_nr output
  // columns, a property of the variant (16 to 32 on x86-64, 8 elsewhere), fixed for the process.
  int64_t gemm_nr;
  // W [rows, in] row-major -> panels [ceil(rows / gemm_nr)][in][gemm_nr] (panel p, input k, lane j = W[p * gemm_nr
  // + j, k], 0 past the last row); bias [rows] or null -> bias_out [ceil(rows / gemm_nr) * gemm_nr], zero-padded.
  void (*pack_f32_panels)(const float* w, const float* bias_or_null, int64_t rows, int64_t in, float* panels,
                          float* bias_out);
  // y[r * y_stride + c] = x[r] . W[c] (+ bias[c]) for r < n, c in [p0 * gemm_nr, min(p1 * gemm_nr, rows)): x [n, in],
  // panels and the padded bias (or null) as pack_f32_panels wrote them. Each element is summed over k in order
  // from 0, then the bias added: the same result whichever rows and panels a call is given.
  void (*gemm_f32_panels)(const float* panels, const float* bias_or_null, int64_t in, int64_t rows, const float* x,
                          int64_t n, int64_t p0, int64_t p1, float* y, int64_t y_stride);
};

}  // namespace tern::cpu
