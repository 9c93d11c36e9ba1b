// SPDX-License-Identifier: MIT
#version 450
// GATED_ACTIVATION: y[i, j] = act(gate[i, j]) * up[i, j] over [n, F], x [n, 2F] = gate | up (SwiGLU with SILU, GeGLU
// with GELU_TANH). KIND: 0 RELU, 1 GELU_ERF, 2 GELU_TANH, 3 SILU (common/activation.glsl), as the CPU path: the
// activation in float32, then the product.
// Push constants: common/row_push.glsl, d = F.
#include "common/interface.glsl"
#include "common/row_push.glsl"
#include "common/math.glsl"
#include "common/activation.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int KIND = 0;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
  uint f = pc.d;
  GRID_STRIDE(idx, call.n * f, 256) {
    uint i = idx / f, j = idx % f;
    uint gate = pc.off[1] + i * 2 * f + j;
    precise float r = activate(KIND, x[gate], 0.0) * x[gate + f];
    y[pc.off[2] + idx] = r;
  }
}
