// SPDX-License-Identifier: MIT
#version 450
// LSH attention, a call after the first (runtime/src/ops/lsh.h, "Continuing a sequence"): the round offset of the
// call's new buckets, as the CPU's LshCache::step picks it: buckets + 1 when the padding bucket of a padded first
// call shows in the cache (some cached bucket passes hashes * buckets - 1; only the last round's can), else buckets.
// One workgroup reduces the last round's buckets of every head over positions 0..pos0-1 into the step scratch's
// word 0, which lsh_step_store reads.
//   state (uint words) as lsh_store; scratch (uint words) as lsh_step.
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer State { uint st[]; };
layout(std430, binding = 2) writeonly buffer Scratch { uint sc[]; };
shared uint most[256];

void main() {
  uint t = gl_LocalInvocationID.x;
  uint heads = pc.heads, nh = pc.hashes, cap = pc.capacity, pos0 = call.pos0;
  uint s0 = pc.off[1], b0 = s0 + 2u;
  uint m = 0u;
  if (st[s0] != 0u) {  // hashed: every cached position has its buckets
    for (uint idx = t; idx < heads * pos0; idx += 256u) {
      uint h = idx / pos0, j = idx % pos0;
      m = max(m, st[b0 + (h * nh + nh - 1u) * cap + j]);
    }
  }
  most[t] = m;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1u) {
    if (t < s) most[t] = max(most[t], most[t + s]);
    barrier();
  }
  if (t == 0u) sc[pc.off[2]] = most[0] > nh * pc.n_buckets - 1u ? pc.n_buckets + 1u : pc.n_buckets;
}
