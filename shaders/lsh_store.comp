// SPDX-License-Identifier: MIT
#version 450
// LSH attention, after a first call of n positions (runtime/src/ops/lsh.h, "Continuing a sequence"; the CPU's
// cpu/lsh_cache.cpp store_rows / store_first_buckets): the cache a later call continues from.
//   qkv [n, row] (qk | v at k_col, v_col); raw buckets [heads, hashes, n] from lsh_hash (when the call was chunked);
//   state (uint words): [0] hashed, [1] 0, buckets [heads, hashes, capacity], rows [heads, capacity, 2*HEAD_DIM]
//   (float bits). A chunked call's buckets are stored with Hugging Face's round offsets: r * buckets, or
//   r * (buckets + 1) when the call was padded (HF counts the padding bucket); an unchunked call stores none (zeros,
//   as the CPU saves them) and is not hashed.
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Raw { uint raw[]; };
layout(std430, binding = 3) writeonly buffer State { uint st[]; };

void main() {
  uint heads = pc.heads, hashes = pc.hashes, cap = pc.capacity;
  uint n = call.n;
  bool chunked = lsh_chunked(n);
  uint stride = pc.n_buckets + (lsh_padded(n) > n ? 1u : 0u);
  uint s0 = pc.off[3], b0 = s0 + 2u, r0 = b0 + heads * hashes * cap;
  if (gl_GlobalInvocationID.x == 0u) {
    st[s0] = chunked ? 1u : 0u;
    st[s0 + 1u] = 0u;
  }
  GRID_STRIDE(idx, n * heads, 64) {
    uint j = idx % n, h = idx / n;
    uint src = pc.off[1] + j * pc.row + h * HEAD_DIM, dst = r0 + (h * cap + j) * 2u * HEAD_DIM;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      st[dst + c] = floatBitsToUint(qkv[src + pc.k_col + c]);
      st[dst + HEAD_DIM + c] = floatBitsToUint(qkv[src + pc.v_col + c]);
    }
    for (uint r = 0; r < hashes; ++r) {
      st[b0 + (h * hashes + r) * cap + j] = chunked ? raw[pc.off[2] + (h * hashes + r) * n + j] + r * stride : 0u;
    }
  }
}
