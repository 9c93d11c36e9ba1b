// SPDX-License-Identifier: MIT
#version 450
// ADD: y = a + b over [n, d]. Push constants: common/row_push.glsl.
#include "common/interface.glsl"
#include "common/row_push.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  GRID_STRIDE(idx, call.n * d, 256) { y[pc.off[3] + idx] = a[pc.off[1] + idx] + b[pc.off[2] + idx]; }
}
