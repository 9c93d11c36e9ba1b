// SPDX-License-Identifier: MIT
#version 450
// LSH attention, a call after the first (runtime/src/ops/lsh.h, "Continuing a sequence"; the CPU's LshCache::step):
// what lsh_step reads of the call's own positions, put into the cache before any of them steps (a position's window
// may hold any earlier one):
//   - each call position's qk | v into the rows;
//   - its bucket per round: when the cache is hashed at the call's start, bucket(qk) + r * stride (lsh_stride's
//     word); when it is not, and the sequence reaches a chunk in this call, HF hashes every position so far at that
//     step (offsets r * buckets) and every later position of the call alike, so positions 0..pos0+n-1 are all hashed
//     here; otherwise 0 (an unhashed step reads none).
// The hashed flag (state[0]) is the call's start: lsh_hashed moves it after the steps.
//   qkv [n, row] (qk at k_col, v at v_col); rotations, factors as lsh_hash; state (uint words) as lsh_store;
//   scratch as lsh_step.
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(constant_id = 1) const bool USE_FMA = true;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Rot { float rot[]; };
layout(std430, binding = 3) readonly buffer Factors { float factors[]; };
layout(std430, binding = 4) buffer State { uint st[]; };
layout(std430, binding = 5) readonly buffer Scratch { uint sc[]; };
float lsh_x[HEAD_DIM];
#include "common/lsh_bucket.glsl"

void main() {
  uint heads = pc.heads, nh = pc.hashes, cap = pc.capacity, n = call.n, pos0 = call.pos0;
  if (pos0 == 0u) return;
  uint s0 = pc.off[4], b0 = s0 + 2u, r0 = b0 + heads * nh * cap;
  bool hashed = st[s0] != 0u;
  bool rehash = !hashed && pos0 + n >= pc.chunk;
  uint first = rehash ? 0u : pos0, count = pos0 + n - first;
  uint stride = hashed ? sc[pc.off[5]] : pc.n_buckets;
  GRID_STRIDE(idx, n * heads, 64) {
    uint i = idx % n, h = idx / n;
    uint src = pc.off[1] + i * pc.row + h * HEAD_DIM, dst = r0 + (h * cap + pos0 + i) * 2u * HEAD_DIM;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      st[dst + c] = floatBitsToUint(qkv[src + pc.k_col + c]);
      st[dst + HEAD_DIM + c] = floatBitsToUint(qkv[src + pc.v_col + c]);
    }
  }
  GRID_STRIDE(idx, heads * nh * count, 64) {
    uint j = first + idx % count, hr = idx / count, h = hr / nh, r = hr % nh;
    uint b = 0u;
    if (hashed || rehash) {
      // A call position's qk from the call (its row is being written above), an earlier one's from the cache.
      for (uint c = 0; c < HEAD_DIM; ++c) {
        lsh_x[c] = j >= pos0 ? qkv[pc.off[1] + (j - pos0) * pc.row + pc.k_col + h * HEAD_DIM + c]
                             : uintBitsToFloat(st[r0 + (h * cap + j) * 2u * HEAD_DIM + c]);
      }
      b = lsh_bucket(h, r, pc.off[2], pc.off[3]) + r * stride;
    }
    st[b0 + (h * nh + r) * cap + j] = b;
  }
}
