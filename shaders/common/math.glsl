// SPDX-License-Identifier: MIT
// Float helpers with known accuracy: Vulkan only bounds sin/cos to 2^-11 absolute and has no erf.

// exp clamped to finite results.
float exp_finite(float x) { return exp(clamp(x, -87.3, 88.3)); }

// Abramowitz & Stegun 7.1.26, 1.5e-7 absolute, as the CPU path (runtime/src/cpu/fast_math.h).
float erf_as(float x) {
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(x) * (1.0 - poly * exp_finite(-a * a));
}

float tanh_finite(float x) { return 1.0 - 2.0 / (exp_finite(2.0 * x) + 1.0); }

// sin and cos of 2*pi*t for t in turns, to ~1e-7: quarter-turn reduction, then Taylor series on [-pi/4, pi/4].
vec2 sincos_turns(float t) {
  t = t - floor(t);                 // [0, 1)
  float q = floor(t * 4.0 + 0.5);   // nearest quarter
  float x = (t - q * 0.25) * 6.28318530717958647;  // [-pi/4, pi/4]
  float x2 = x * x;
  float s = x * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 120.0 + x2 * (-1.0 / 5040.0 + x2 * (1.0 / 362880.0)))));
  float c = 1.0 + x2 * (-0.5 + x2 * (1.0 / 24.0 + x2 * (-1.0 / 720.0 + x2 * (1.0 / 40320.0 + x2 * (-1.0 / 3628800.0)))));
  int quadrant = int(q) & 3;
  if (quadrant == 0) return vec2(s, c);
  if (quadrant == 1) return vec2(c, -s);
  if (quadrant == 2) return vec2(-s, -c);
  return vec2(-c, s);
}
