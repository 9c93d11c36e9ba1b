// SPDX-License-Identifier: MIT
// The activation functions of ACTIVATION and GATED_ACTIVATION (schema ActivationKind), with the CPU path's formulas.
// Needs common/math.glsl. kind: 0 RELU, 1 GELU_ERF, 2 GELU_TANH, 3 SILU, 4 SOFTCAP (cap * tanh(v / cap), cap > 0).
float activate(int kind, float v, float cap) {
  if (kind == 0) return max(v, 0.0);
  if (kind == 1) return 0.5 * v * (1.0 + erf_as(v * 0.70710678118654752));
  if (kind == 2) return 0.5 * v * (1.0 + tanh_finite(0.79788456080286536 * (v + 0.044715 * v * v * v)));
  if (kind == 3) return v / (1.0 + exp_finite(-v));
  return cap * tanh_finite(v / cap);
}
