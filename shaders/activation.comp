// SPDX-License-Identifier: MIT
#version 450
// ACTIVATION: y = f(x) elementwise over [n, d]. KIND: 0 RELU, 1 GELU_ERF, 2 GELU_TANH, 3 SILU, 4 SOFTCAP (schema
// ActivationKind; common/activation.glsl).
#include "common/interface.glsl"
// Push constants: ActivationPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform ActivationPush {
  uint off[8];
  uint d;
  float cap;  // SOFTCAP: cap * tanh(x / cap); unread otherwise
} pc;
#include "common/math.glsl"
#include "common/activation.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int KIND = 0;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  float cap = pc.cap;
  GRID_STRIDE(idx, call.n * d, 256) y[pc.off[2] + idx] = activate(KIND, x[pc.off[1] + idx], cap);
}
