// SPDX-License-Identifier: MIT
#version 450
// POSITION of kind AXIAL (Reformer): y[i] = x[i] + [rows[p / s1] | cols[p % s1]], p = pos0 + i.
// x, y [n, d0 + d1]; rows [s0, d0]; cols [s1, d1].
#include "common/interface.glsl"
// Push constants: AxialPositionPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform AxialPositionPush {
  uint off[8];
  uint d0;
  uint d1;
  uint s1;
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Rows { float rows[]; };
layout(std430, binding = 3) readonly buffer Cols { float cols[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

void main() {
  uint d0 = pc.d0, d1 = pc.d1, s1 = pc.s1, d = d0 + d1;
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    uint p = call.pos0 + i;
    float pe = j < d0 ? rows[pc.off[2] + (p / s1) * d0 + j] : cols[pc.off[3] + (p % s1) * d1 + (j - d0)];
    y[pc.off[4] + idx] = x[pc.off[1] + idx] + pe;
  }
}
