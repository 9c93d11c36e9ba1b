// SPDX-License-Identifier: MIT
#version 450
// LSH attention, step 4 (runtime/src/ops/lsh.h): the rounds of each query combined by a softmax over their
// log-sum-exps, in float32 as HF: M = max_r lse_r, L = log(sum_r exp(lse_r - M)) + M, out = sum_r exp(lse_r - L) out_r.
// One round (hashes 1, or an unchunked call): out = out_0.
//   outs [heads, rounds, n, HEAD_DIM], lses [heads, rounds, n]; out [n, heads * HEAD_DIM].
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Outs { float outs[]; };
layout(std430, binding = 2) readonly buffer Lses { float lses[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint heads = pc.heads, hashes = pc.hashes;
  uint n = call.n, inner = heads * HEAD_DIM;
  uint rounds = lsh_chunked(n) ? hashes : 1u;
  GRID_STRIDE(idx, n * inner, 256) {
    uint i = idx / inner, h = (idx % inner) / HEAD_DIM, e = idx % HEAD_DIM;
    uint base = h * rounds * n + i;  // (h, r = 0, i); round r at base + r * n
    float v;
    if (rounds == 1u) {
      v = outs[pc.off[1] + base * HEAD_DIM + e];
    } else {
      float mx = -3.402823466e38;
      for (uint r = 0; r < rounds; ++r) mx = max(mx, lses[pc.off[2] + base + r * n]);
      float sum = 0.0;
      for (uint r = 0; r < rounds; ++r) sum += exp(lses[pc.off[2] + base + r * n] - mx);
      float total = log(sum) + mx;
      v = 0.0;
      for (uint r = 0; r < rounds; ++r) {
        v += outs[pc.off[1] + (base + r * n) * HEAD_DIM + e] * exp(lses[pc.off[2] + base + r * n] - total);
      }
    }
    y[pc.off[3] + idx] = v;
  }
}
