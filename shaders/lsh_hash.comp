#version 450
// LSH attention, step 1 (runtime/src/ops/lsh.h): per head h and position j, the normalised key
//   keys[h, j] = qk_j * rsqrt(mean(qk_j^2) + eps) * scale
// and, when the call is chunked, the bucket of every round r: x = qk_j R[h, :, r, :]; per bucket factor f (f/2
// columns each, in order) the first maximum of [x | -x], mixed in radix order.
//   qkv [n, 2*inner] (qk | v); rotations [heads, HEAD_DIM, hashes, rot_half]; factors [n_factors] (as floats);
//   keys [heads, n, HEAD_DIM]; buckets [heads, hashes, n] (uint).
// The rotated columns are summed in the order the CPU path sums them, with fused multiply-adds (USE_FMA) where the
// CPU build contracts them, so both backends put a position in the same bucket.
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

void main() {
  uint heads = pc.heads, hashes = pc.hashes;
  uint n_factors = pc.n_factors, rot_half = pc.rot_half;
  float eps = pc.key_norm_eps, scale = pc.scale;
  uint n = call.n, inner = heads * HEAD_DIM;
  bool chunked = lsh_chunked(n);
  GRID_STRIDE(idx, n * heads, 64) {
    uint j = idx % n, h = idx / n;
    float x[HEAD_DIM];
    float ms = 0.0;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      x[c] = qkv[pc.off[1] + j * 2u * inner + h * HEAD_DIM + c];
      ms += x[c] * x[c];
    }
    float r = 1.0 / sqrt(ms / float(HEAD_DIM) + eps);
    for (uint c = 0; c < HEAD_DIM; ++c) keys[pc.off[4] + (h * n + j) * HEAD_DIM + c] = x[c] * r * scale;
    if (!chunked) continue;
    for (uint rnd = 0; rnd < hashes; ++rnd) {
      // R[h, c, rnd, k] = rot[((h * HEAD_DIM + c) * hashes + rnd) * rot_half + k]
      uint base = pc.off[2] + (h * HEAD_DIM * hashes + rnd) * rot_half;
      uint stride = hashes * rot_half;
      uint b = 0, radix = 1, offset = 0;
      for (uint fi = 0; fi < n_factors; ++fi) {
        uint f = uint(factors[pc.off[3] + fi]), half_f = f / 2u;
        float vmax = 0.0, vmin = 0.0;
        uint tmax = 0, tmin = 0;
        for (uint t = 0; t < half_f; ++t) {
          precise float acc = 0.0;
          uint at = base + offset + t;
          for (uint c = 0; c < HEAD_DIM; ++c) {
            if (USE_FMA) {
              acc = fma(x[c], rot[at + c * stride], acc);
            } else {
              precise float prod = x[c] * rot[at + c * stride];
              acc = acc + prod;
            }
          }
          if (t == 0u || acc > vmax) { vmax = acc; tmax = t; }
          if (t == 0u || acc < vmin) { vmin = acc; tmin = t; }
        }
        // argmax over [x | -x], first maximum: a negated column wins only when strictly larger.
        uint best = (-vmin > vmax) ? half_f + tmin : tmax;
        b += best * radix;
        radix *= f;
        offset += half_f;
      }
      buckets[pc.off[5] + (h * hashes + rnd) * n + j] = b;
    }
  }
}
