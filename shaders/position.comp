// SPDX-License-Identifier: MIT
#version 450
// POSITION: y[i] = x[i] + pe[pos0 + i]. x, y [n, d].
// LEARNED: table [P, d]. SINUSOIDAL: pe[p, 2k] = sin(2 pi p f_k), pe[p, 2k+1] = cos(2 pi p f_k), f_k = 10000^(-2k/d)
// turns. A float angle would be off by ~0.1 rad a million tokens in, so the angle is taken exactly, in turns mod 1:
// p is split into base-4096 digits p = d0 + d1 4096 + d2 4096^2, and table [d/2, 3, 4] holds, per frequency and
// digit weight W, frac(W f_k / (2 pi)) (computed in double on the host) as four parts of 12 significant bits each.
// A 12-bit digit times a 12-bit part is exact in float, and so is its fract.
// Push constants: common/row_push.glsl.
#include "common/interface.glsl"
#include "common/row_push.glsl"
#include "common/math.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool LEARNED = true;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Table { float table[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    uint p = call.pos0 + i;
    float pe;
    if (LEARNED) {
      pe = table[pc.off[2] + p * d + j];
    } else {
      uint base = pc.off[2] + (j / 2) * 12;
      float digits[3] = float[3](float(p & 4095u), float((p >> 12) & 4095u), float(p >> 24));
      precise float turns = 0.0;
      for (uint w = 0; w < 3; ++w) {
        for (uint part = 0; part < 4; ++part) turns = fract(turns + fract(digits[w] * table[base + w * 4 + part]));
      }
      vec2 sc = sincos_turns(turns);
      pe = (j % 2 == 0) ? sc.x : sc.y;
    }
    y[pc.off[3] + idx] = x[pc.off[1] + idx] + pe;
  }
}
