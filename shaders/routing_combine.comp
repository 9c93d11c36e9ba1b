// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (Routing), step 5: each position's routing-head output, the sum of its clusters' outputs (clusters in
// ascending order, as the CPU path adds them) divided by (the number of those clusters + count_eps); zeros for a
// position in no cluster.
//   slot_of [Hr, K, max_batch] (-1: not a member); outputs [Hr, K, max_w, HEAD_DIM]; out [n, inner].
// Push constants: common/routing.glsl.
#include "common/interface.glsl"
#include "common/routing.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer SlotOf { int slot_of[]; };
layout(std430, binding = 2) readonly buffer Outputs { float outputs[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };

void main() {
  uint heads = pc.heads, local_heads = pc.local_heads, clusters = pc.clusters;
  uint max_batch = pc.max_batch, max_w = pc.max_w;
  float count_eps = pc.count_eps;
  uint inner = heads * HEAD_DIM, routing_heads = heads - local_heads;
  GRID_STRIDE(idx, call.n * routing_heads * HEAD_DIM, 64) {
    uint d = idx % HEAD_DIM, rest = idx / HEAD_DIM;
    uint i = rest % call.n, r = rest / call.n;
    float sum = 0.0, count = 0.0;
    for (uint c = 0; c < clusters; ++c) {
      int slot = slot_of[pc.off[1] + (r * clusters + c) * max_batch + i];
      if (slot < 0) continue;
      sum += outputs[pc.off[2] + ((r * clusters + c) * max_w + uint(slot)) * HEAD_DIM + d];
      count += 1.0;
    }
    y[pc.off[3] + i * inner + (local_heads + r) * HEAD_DIM + d] = sum * (1.0 / (count + count_eps));
  }
}
