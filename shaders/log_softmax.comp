// SPDX-License-Identifier: MIT
#version 450
// LOG_SOFTMAX: y = x - log(sum_j exp(x_j)), row by row. x, y [n, d]. One workgroup per row.
// Push constants: common/row_push.glsl.
#include "common/interface.glsl"
#include "common/row_push.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };
shared float red[WG];
#include "common/reduce.glsl"

void main() {
  uint d = pc.d;
  uint lid = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < call.n; row += gl_NumWorkGroups.x) {
    uint base = pc.off[1] + row * d;
    float m = -3.402823466e38;
    for (uint j = lid; j < d; j += WG) m = max(m, x[base + j]);
    m = reduce_max(m);
    float s = 0.0;
    for (uint j = lid; j < d; j += WG) s += exp(x[base + j] - m);
    float lse = m + log(reduce_sum(s));
    for (uint j = lid; j < d; j += WG) y[pc.off[2] + row * d + j] = x[base + j] - lse;
  }
}
