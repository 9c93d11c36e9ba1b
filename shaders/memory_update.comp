// SPDX-License-Identifier: MIT
#version 450
// ATTENTION with a memory, step 4: the state after the call, from ctx (memory_concat.comp) alone.
//   MODE 0 RelativeXL: state [M, d] = the last M rows of ctx [M + n, d].
//   MODE 1 CONV, 2 MEAN, 3 MAX (Compressive, ops/compressive.h): with mem ++ h = ctx rows |cmem|.., whole groups of
//   rate rows beyond mem_len leave mem; each is compressed (CONV: conv_w [d, rate*d] times the group row after row,
//   + conv_b [d] when HAS_BIAS; MEAN, MAX over the rows) and cmem keeps the last C rows of cmem ++ compressed.
//   state [C + M + rate - 1, d]: cmem rows 0.., mem rows C...
// Push constants: common/memory_rows.glsl.
#include "common/interface.glsl"
#include "common/memory_rows.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const int MODE = 0;
layout(constant_id = 1) const bool HAS_BIAS = false;
layout(std430, binding = 1) readonly buffer Ctx { float ctx[]; };
layout(std430, binding = 2) readonly buffer ConvW { float conv_w[]; };
layout(std430, binding = 3) readonly buffer ConvB { float conv_b[]; };
layout(std430, binding = 4) writeonly buffer State { float state[]; };

void main() {
  uint d = pc.d;
  uint M = pc.mem_len, C = pc.cmem_len, rate = pc.rate;
  if (MODE == 0) {
    GRID_STRIDE(idx, M * d, 256) state[pc.off[4] + idx] = ctx[pc.off[1] + call.n * d + idx];
    return;
  }
  uint mem_n = mem_rows(call.pos0), cmem_n = cmem_rows(call.pos0);
  uint total = mem_n + call.n;
  uint e = total > M ? (total - M) / rate * rate : 0;
  uint g = e / rate, count = min(g, C), g0 = g - count;
  uint cmem_new = min(C, cmem_n + count), drop = cmem_n + count - cmem_new;
  uint mem_new = total - e;
  GRID_STRIDE(idx, (C + M + rate - 1) * d, 256) {
    uint r = idx / d, c = idx % d;
    if (r < C) {
      if (r >= cmem_new) continue;
      uint s = drop + r;
      float v;
      if (s < cmem_n) {
        v = ctx[pc.off[1] + s * d + c];
      } else {
        uint base = pc.off[1] + (cmem_n + (g0 + s - cmem_n) * rate) * d;  // the group's first row
        if (MODE == 1) {
          v = HAS_BIAS ? conv_b[pc.off[3] + c] : 0.0;
          uint wb = pc.off[2] + c * rate * d;
          for (uint t = 0; t < rate * d; ++t) v += conv_w[wb + t] * ctx[base + t];
        } else if (MODE == 2) {
          v = 0.0;
          for (uint t = 0; t < rate; ++t) v += ctx[base + t * d + c];
          v /= float(rate);
        } else {
          v = ctx[base + c];
          for (uint t = 1; t < rate; ++t) v = max(v, ctx[base + t * d + c]);
        }
      }
      state[pc.off[4] + idx] = v;
    } else {
      uint rm = r - C;
      if (rm >= mem_new) continue;
      state[pc.off[4] + idx] = ctx[pc.off[1] + (cmem_n + e + rm) * d + c];
    }
  }
}
