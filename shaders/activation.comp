#version 450
// ACTIVATION: y = f(x) elementwise over [n, d]. KIND: 0 RELU, 1 GELU_ERF, 2 GELU_TANH (schema ActivationKind).
// Push constants: common/row_push.glsl.
#include "common/interface.glsl"
#include "common/row_push.glsl"
#include "common/math.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int KIND = 0;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  GRID_STRIDE(idx, call.n * d, 256) {
    float v = x[pc.off[1] + idx];
    float r;
    if (KIND == 0) {
      r = max(v, 0.0);
    } else if (KIND == 1) {
      r = 0.5 * v * (1.0 + erf_as(v * 0.70710678118654752));
    } else {
      r = 0.5 * v * (1.0 + tanh_finite(0.79788456080286536 * (v + 0.044715 * v * v * v)));
    }
    y[pc.off[2] + idx] = r;
  }
}
