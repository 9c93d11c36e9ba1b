// SPDX-License-Identifier: MIT
#version 450
// LINEAR: y = x W^T + b. x [n, in], W [out, in], b [out] (HAS_BIAS), y [n, y_stride].
// A weight over maxStorageBufferRange runs as one dispatch per part of whole rows (ops_linear.cpp): W and b are then
// the part's rows, out_dim its row count, and y is bound from the part's first column, y_stride the op's full out.
// Register-blocked GEMM: a workgroup of WG = (BM / TM) * (BN / TN) invocations computes a BM x BN block of y (BM
// tokens, BN outputs; workgroup x: output blocks, y: token blocks). Per BK-wide slice of the inputs it stages x
// [BM, BK] and W [BN, BK] in shared memory as vec4s along k (rows padded by one vec4), then each invocation adds
// the slice into its TM x TN sub-block of y, kept in registers: rows ty + i * (BM / TM), columns tx + j * (BN / TN),
// so neighbouring invocations write neighbouring columns. Per vec4 of k an invocation reads TM + TN vec4s of shared
// memory for TM * TN * 4 multiply-adds, and a slice costs two barriers. Accumulation is float32.
// X_VEC4 and W_VEC4 (the host sets each where in is a multiple of 4 and the data start 16-byte aligned, 8 for
// float16 W): x, W are read from global memory as vec4s (float16: two words of halves); otherwise element by element
// with the k edge checked per element. Rows past n or out and k past in are staged as zeros.
// Built four times (cmake/EmbedShaders.cmake): "linear"; "linear_f16" with WEIGHT_F16, where W is float16
// (weight_storage F16, or float16 in the file), read and widened to float, its off[2] counting halves; "linear_i8"
// and "linear_i4" with WEIGHT_I8 / WEIGHT_I4, where W is the file's int8 / int4 bytes read as words (off[2] counts
// words) with its scales at binding 5 (common/quant_weight.glsl), each element dequantised as the W tile is staged
// in shared memory, four elements from one word (the loader holds their rows and groups to multiples of 32).
// Everything else (x, the bias, y, the accumulation) stays float.
#if defined(WEIGHT_I8) || defined(WEIGHT_I4)
#define WEIGHT_QUANT
#endif
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "common/interface.glsl"
// Push constants: LinearPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform LinearPush {
  uint off[8];
  uint in_dim;
  uint out_dim;
  uint y_stride;
  uint group;  // WEIGHT_QUANT: inputs per scale (in_dim: one scale per row)
  float norm_eps;  // the rest: linear_rows.comp's fusions, unread here
  float norm_offset;
  uint norm_beta;
  float cap;
} pc;
// Tile sizes (ops_linear.cpp picks them from the device's limits): BM, BN multiples of TM, TN; BK a multiple of 4.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // (BM / TM) * (BN / TN)
layout(constant_id = 1) const bool HAS_BIAS = false;
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint BK = 16;
layout(constant_id = 5) const uint TM = 16;
layout(constant_id = 6) const uint TN = 16;
layout(constant_id = 7) const bool X_VEC4 = false;
layout(constant_id = 8) const bool W_VEC4 = false;  // float, float16 W only
// x and (float, float16) W have a second, vector view of the same binding for the vec4 loads.
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
#ifdef WEIGHT_QUANT
layout(std430, binding = 2) readonly buffer W { uint wq[]; };
#ifdef WEIGHT_I8
layout(std430, binding = 5) readonly buffer Scales { float wscale[]; };
#else
layout(std430, binding = 5) readonly buffer Scales { uint wscale[]; };
#endif
#include "common/quant_weight.glsl"
#elif defined(WEIGHT_F16)
layout(std430, binding = 2) readonly buffer W { float16_t w[]; };
layout(std430, binding = 2) readonly buffer W4 { uvec2 w4[]; };  // 4 halves, the lower address in .x's low bits
#else
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer W4 { vec4 w4[]; };
#endif
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

const uint KQ = BK / 4;  // vec4s per staged row
const uint SQ = KQ + 1;  // the row stride in vec4s: one of padding spreads rows over shared-memory banks
shared vec4 xs[BM * SQ];  // [token][k / 4]
shared vec4 ws[BN * SQ];  // [output][k / 4]

// x [row, k..k+3], k a multiple of 4, row < n.
vec4 load_x4(uint row, uint k, uint in_dim) {
  uint at = pc.off[1] + row * in_dim + k;
  if (X_VEC4) return x4[at >> 2];
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e) {
    if (k + e < in_dim) v[e] = x[at + e];
  }
  return v;
}

// W [r, k..k+3] widened to float, k a multiple of 4, r < out_dim.
vec4 load_w4(uint r, uint k, uint in_dim) {
#ifdef WEIGHT_QUANT
  return quant_weight4(pc.off[2], pc.off[5], r, k, in_dim, pc.group);
#else
  uint at = pc.off[2] + r * in_dim + k;
#ifdef WEIGHT_F16
  if (W_VEC4) {
    uvec2 h = w4[at >> 2];
    return vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y));
  }
#else
  if (W_VEC4) return w4[at >> 2];
#endif
  vec4 v = vec4(0.0);
  for (uint e = 0; e < 4; ++e) {
    if (k + e < in_dim) v[e] = float(w[at + e]);
  }
  return v;
#endif
}

void main() {
  const uint in_dim = pc.in_dim, out_dim = pc.out_dim, n = call.n;
  const uint lid = gl_LocalInvocationID.x;
  const uint tx = lid % (BN / TN), ty = lid / (BN / TN);
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i) {
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;
  }
  for (uint k0 = 0; k0 < in_dim; k0 += BK) {
    // Stage the slice: neighbouring invocations take neighbouring vec4s of a row.
    for (uint c = lid; c < BM * KQ; c += WG) {
      uint r = c / KQ, k = k0 + (c % KQ) * 4;
      vec4 v = vec4(0.0);
      if (row0 + r < n && k < in_dim) v = load_x4(row0 + r, k, in_dim);
      xs[r * SQ + c % KQ] = v;
    }
    for (uint c = lid; c < BN * KQ; c += WG) {
      uint r = c / KQ, k = k0 + (c % KQ) * 4;
      vec4 v = vec4(0.0);
      if (col0 + r < out_dim && k < in_dim) v = load_w4(col0 + r, k, in_dim);
      ws[r * SQ + c % KQ] = v;
    }
    barrier();
    for (uint q = 0; q < KQ; ++q) {
      vec4 a[TM], b[TN];
      for (uint i = 0; i < TM; ++i) a[i] = xs[(ty + i * (BM / TM)) * SQ + q];
      for (uint j = 0; j < TN; ++j) b[j] = ws[(tx + j * (BN / TN)) * SQ + q];
      for (uint i = 0; i < TM; ++i) {
        for (uint j = 0; j < TN; ++j) acc[i][j] += dot(a[i], b[j]);
      }
    }
    barrier();
  }
  for (uint i = 0; i < TM; ++i) {
    const uint row = row0 + ty + i * (BM / TM);
    if (row >= n) break;
    for (uint j = 0; j < TN; ++j) {
      const uint col = col0 + tx + j * (BN / TN);
      if (col < out_dim) y[pc.off[4] + row * pc.y_stride + col] = acc[i][j] + (HAS_BIAS ? bias[pc.off[3] + col] : 0.0);
    }
  }
}
