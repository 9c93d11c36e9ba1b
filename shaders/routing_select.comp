// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (Routing), step 3: per cluster, its w = min(window, n) members, as ops/routing.cpp's routing_top picks
// them: the w largest scores, equal scores to the lower position. Each position's rank (the positions ahead of it in
// that order) is counted against score tiles in shared memory; positions with rank < w are members, written in
// position order by a workgroup prefix sum. For queries also slot_of[i]: the member's index, -1 for non-members.
// One workgroup per (cluster, query or key, routing head), taken in grid-stride order.
//   scores [Hr, 2, K, max_batch]; members [Hr, 2, K, max_w] (positions ascending); slot_of [Hr, K, max_batch].
// Push constants: common/routing.glsl.
#include "common/interface.glsl"
#include "common/routing.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Scores { float scores[]; };
layout(std430, binding = 2) writeonly buffer Members { int members[]; };
layout(std430, binding = 3) writeonly buffer SlotOf { int slot_of[]; };
shared float tile[256];
shared uint scan[256];

void main() {
  uint routing_heads = pc.routing_heads, clusters = pc.clusters, max_batch = pc.max_batch;
  uint max_w = pc.max_w;
  uint n = call.n;
  uint w = min(pc.window, n);
  uint t = gl_LocalInvocationID.x;
  for (uint item = gl_WorkGroupID.x; item < clusters * 2 * routing_heads; item += gl_NumWorkGroups.x) {
    uint c = item % clusters, rest = item / clusters;
    uint which = rest % 2, r = rest / 2;
    uint row = pc.off[1] + ((r * 2 + which) * clusters + c) * max_batch;
    uint out_row = pc.off[2] + ((r * 2 + which) * clusters + c) * max_w;
    uint slot_row = pc.off[3] + (r * clusters + c) * max_batch;
    uint taken = 0;  // members at positions before this chunk
    for (uint base = 0; base < n; base += 256) {
      uint i = base + t;
      float mine = i < n ? scores[row + i] : 0.0;
      uint rank = 0;
      for (uint j0 = 0; j0 < n; j0 += 256) {
        tile[t] = j0 + t < n ? scores[row + j0 + t] : 0.0;
        barrier();
        uint count = min(256u, n - j0);
        for (uint k = 0; k < count; ++k) {
          float s = tile[k];
          uint j = j0 + k;
          rank += (s > mine || (s == mine && j < i)) ? 1u : 0u;
        }
        barrier();
      }
      uint member = (i < n && rank < w) ? 1u : 0u;
      // Inclusive prefix sum of the member flags over the chunk.
      scan[t] = member;
      barrier();
      for (uint s = 1; s < 256; s <<= 1) {
        uint add = t >= s ? scan[t - s] : 0u;
        barrier();
        scan[t] += add;
        barrier();
      }
      uint slot = taken + scan[t] - member;
      if (member == 1u) members[out_row + slot] = int(i);
      if (which == 0u && i < n) slot_of[slot_row + i] = member == 1u ? int(slot) : -1;
      taken += scan[255];
      barrier();
    }
  }
}
