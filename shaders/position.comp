#version 450
// POSITION: y[i] = x[i] + pe[pos0 + i]. x, y [n, d].
// LEARNED: table [P, d]. SINUSOIDAL: table [d/2, 2] holds each frequency f_k = 10000^(-2k/d) in turns, f/(2 pi),
// split into a high and a low float (computed in double on the host), so the angle keeps its precision at large
// positions: pe[p, 2k] = sin(2 pi p f), pe[p, 2k+1] = cos(2 pi p f). arg: d.
#include "common/interface.glsl"
#include "common/math.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool LEARNED = true;
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Table { float table[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint d = uint(pc.arg[0]);
  GRID_STRIDE(idx, call.n * d, 256) {
    uint i = idx / d, j = idx % d;
    uint p = call.pos0 + i;
    float pe;
    if (LEARNED) {
      pe = table[pc.off[2] + p * d + j];
    } else {
      uint k = j / 2;
      float hi = table[pc.off[2] + 2 * k], lo = table[pc.off[2] + 2 * k + 1];
      float pf = float(p);  // exact below 2^24
      precise float whole = pf * hi;
      precise float err = fma(pf, hi, -whole);  // the rounding error of the product, exactly
      float turns = fract(whole) + (err + pf * lo);
      vec2 sc = sincos_turns(turns);
      pe = (j % 2 == 0) ? sc.x : sc.y;
    }
    y[pc.off[3] + idx] = x[pc.off[1] + idx] + pe;
  }
}
