// SPDX-License-Identifier: MIT
#version 450
// LSH attention, step 1 (runtime/src/ops/lsh.h): per head h and position j, the normalised key
//   keys[h, j] = qk_j * rsqrt(mean(qk_j^2) + eps) * scale
// and, when the call is chunked, the bucket of every round r: x = qk_j R[h, :, r, :]; per bucket factor f (f/2
// columns each, in order) the first maximum of [x | -x], mixed in radix order.
//   qkv [n, row] (qk | v, qk at k_col); rotations [heads, HEAD_DIM, hashes, rot_half]; factors [n_factors] (as floats);
//   keys [heads, n, HEAD_DIM]; buckets [heads, hashes, n] (uint).
// The rotated columns are summed as common/lsh_bucket.glsl says, so both backends put a position in the same bucket.
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(constant_id = 1) const bool USE_FMA = true;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Rot { float rot[]; };
layout(std430, binding = 3) readonly buffer Factors { float factors[]; };
layout(std430, binding = 4) writeonly buffer Keys { float keys[]; };
layout(std430, binding = 5) writeonly buffer Buckets { uint buckets[]; };
float lsh_x[HEAD_DIM];
#include "common/lsh_bucket.glsl"

void main() {
  uint heads = pc.heads, hashes = pc.hashes;
  float eps = pc.key_norm_eps, scale = pc.scale;
  uint n = call.n;
  bool chunked = lsh_chunked(n);
  GRID_STRIDE(idx, n * heads, 64) {
    uint j = idx % n, h = idx / n;
    float ms = 0.0;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      lsh_x[c] = qkv[pc.off[1] + j * pc.row + pc.k_col + h * HEAD_DIM + c];
      ms += lsh_x[c] * lsh_x[c];
    }
    float r = 1.0 / sqrt(ms / float(HEAD_DIM) + eps);
    for (uint c = 0; c < HEAD_DIM; ++c) keys[pc.off[4] + (h * n + j) * HEAD_DIM + c] = lsh_x[c] * r * scale;
    if (!chunked) continue;
    for (uint rnd = 0; rnd < hashes; ++rnd) {
      uint b = lsh_bucket(h, rnd, pc.off[2], pc.off[3]);
      buckets[pc.off[5] + (h * hashes + rnd) * n + j] = b;
    }
  }
}
