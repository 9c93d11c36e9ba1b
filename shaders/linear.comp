// SPDX-License-Identifier: MIT
#version 450
// LINEAR: y = x W^T + b. x [n, in], W [out, in], b [out] (HAS_BIAS), y [n, y_stride].
// A weight over maxStorageBufferRange runs as one dispatch per part of whole rows (ops_linear.cpp): W and b are then
// the part's rows, out_dim its row count, and y is bound from the part's first column, y_stride the op's full out.
// Tiled GEMM: a TILE x TILE workgroup computes a TILE x TILE block of y (workgroup x: output columns, y: tokens),
// staging TILE-wide slices of x and W in shared memory. Shared memory: 2 * TILE * TILE floats.
// Built four times (cmake/EmbedShaders.cmake): "linear"; "linear_f16" with WEIGHT_F16, where W is float16
// (weight_storage F16, or float16 in the file), read and widened to float, its off[2] counting halves; "linear_i8"
// and "linear_i4" with WEIGHT_I8 / WEIGHT_I4, where W is the file's int8 / int4 bytes read as words (off[2] counts
// words) with its scales at binding 5 (common/quant_weight.glsl), each element dequantised as the W tile is staged
// in shared memory. Everything else (x, the bias, y, the accumulation) stays float.
#if defined(WEIGHT_I8) || defined(WEIGHT_I4)
#define WEIGHT_QUANT
#endif
#ifdef WEIGHT_F16
#extension GL_EXT_shader_16bit_storage : require
#define WEIGHT_T float16_t
#else
#define WEIGHT_T float
#endif
#include "common/interface.glsl"
// Push constants: LinearPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform LinearPush {
  uint off[8];
  uint in_dim;
  uint out_dim;
  uint y_stride;
  uint group;  // WEIGHT_QUANT: inputs per scale (in_dim: one scale per row)
} pc;
layout(local_size_x_id = 0, local_size_y_id = 0) in;
layout(constant_id = 0) const uint TILE = 16;
layout(constant_id = 1) const bool HAS_BIAS = false;
layout(std430, binding = 1) readonly buffer X { float x[]; };
#ifdef WEIGHT_QUANT
layout(std430, binding = 2) readonly buffer W { uint wq[]; };
#ifdef WEIGHT_I8
layout(std430, binding = 5) readonly buffer Scales { float wscale[]; };
#else
layout(std430, binding = 5) readonly buffer Scales { uint wscale[]; };
#endif
#include "common/quant_weight.glsl"
#define W_AT(r, k) quant_weight(pc.off[2], pc.off[5], r, k, in_dim, pc.group)
#else
layout(std430, binding = 2) readonly buffer W { WEIGHT_T w[]; };
#define W_AT(r, k) float(w[pc.off[2] + (r) * in_dim + (k)])
#endif
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };
shared float xs[TILE * TILE];  // [token][k]
shared float ws[TILE * TILE];  // [output][k]

void main() {
  uint in_dim = pc.in_dim, out_dim = pc.out_dim, y_stride = pc.y_stride;
  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  uint row = gl_WorkGroupID.y * TILE + ly;   // token
  uint col = gl_WorkGroupID.x * TILE + lx;   // output feature
  uint wrow = gl_WorkGroupID.x * TILE + ly;  // the W row this invocation stages
  float acc = 0.0;
  for (uint k0 = 0; k0 < in_dim; k0 += TILE) {
    uint k = k0 + lx;
    xs[ly * TILE + lx] = (row < call.n && k < in_dim) ? x[pc.off[1] + row * in_dim + k] : 0.0;
    ws[ly * TILE + lx] = (wrow < out_dim && k < in_dim) ? W_AT(wrow, k) : 0.0;
    barrier();
    for (uint kk = 0; kk < TILE; ++kk) acc += xs[ly * TILE + kk] * ws[lx * TILE + kk];
    barrier();
  }
  if (row < call.n && col < out_dim) {
    if (HAS_BIAS) acc += bias[pc.off[3] + col];
    y[pc.off[4] + row * y_stride + col] = acc;
  }
}
