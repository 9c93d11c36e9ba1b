// SPDX-License-Identifier: MIT
#version 450
// ATTENTION with a memory, step 2: qkv = norm(ctx) W^T (+ b) for every row of ctx. One workgroup a row (rows stride by
// the workgroup count): the row, layer-normalised when NORM (pre-LN Transformer-XL), staged in shared memory.
//   ctx [rows, D], W [width, D], b [width] (HAS_BIAS), gamma, beta [D] (NORM, HAS_BETA), qkv [rows, width]
// rows = prefix_rows() + n, width = qkv_width. Push constants: common/memory_rows.glsl.
// Shared memory: (D + WG) floats.
#include "common/interface.glsl"
#include "common/memory_rows.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint D = 32;
layout(constant_id = 2) const bool NORM = false;
layout(constant_id = 3) const bool HAS_BETA = false;
layout(constant_id = 4) const bool HAS_BIAS = false;
layout(std430, binding = 1) readonly buffer Ctx { float ctx[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, binding = 4) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 5) readonly buffer Beta { float beta[]; };
layout(std430, binding = 6) writeonly buffer Qkv { float qkv[]; };
shared float xs[D];
shared float red[WG];
#include "common/reduce.glsl"

void main() {
  uint width = pc.qkv_width;
  float eps = pc.norm_eps;
  uint lid = gl_LocalInvocationID.x;
  uint rows = prefix_rows() + call.n;
  for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x) {
    for (uint c = lid; c < D; c += WG) xs[c] = ctx[pc.off[1] + row * D + c];
    barrier();
    if (NORM) {
      float s = 0.0;
      for (uint c = lid; c < D; c += WG) s += xs[c];
      float mean = reduce_sum(s) / float(D);
      float v = 0.0;
      for (uint c = lid; c < D; c += WG) v += (xs[c] - mean) * (xs[c] - mean);
      float inv = inversesqrt(reduce_sum(v) / float(D) + eps);
      for (uint c = lid; c < D; c += WG) {
        float y = (xs[c] - mean) * inv * gamma[pc.off[4] + c];
        if (HAS_BETA) y += beta[pc.off[5] + c];
        xs[c] = y;
      }
      barrier();
    }
    for (uint o = lid; o < width; o += WG) {
      float acc = HAS_BIAS ? bias[pc.off[3] + o] : 0.0;
      for (uint c = 0; c < D; ++c) acc += xs[c] * w[pc.off[2] + o * D + c];
      qkv[pc.off[6] + row * width + o] = acc;
    }
    barrier();
  }
}
