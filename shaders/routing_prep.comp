// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (Routing), step 1 of runtime/src/vulkan/ops_routing.cpp: the normalised query and key of every position
// and routing head (layer norm without gain or bias), in float32 with the arithmetic of ops/routing.cpp's
// routing_normalize (sums in column order, each product rounded before it is added: `precise`, and routing.cpp is built
// with -ffp-contract=off), so that the cluster
// scores and with them the members match the CPU path's.
//   qkv [n, row] (q of head h at q_col + h*HEAD_DIM, its key at k_col + g*HEAD_DIM for its key/value head
//   g = h / (heads / kv_heads): ops/head_layout.h);
//   xn [Hr, 2, max_batch, HEAD_DIM] (queries, then keys).
// Push constants: common/routing.glsl.
#include "common/interface.glsl"
#include "common/routing.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) writeonly buffer Xn { float xn[]; };

void main() {
  uint heads = pc.heads, local_heads = pc.local_heads, max_batch = pc.max_batch;
  float eps = pc.norm_eps;
  uint routing_heads = heads - local_heads;
  // One invocation per (position, routing head, query or key).
  GRID_STRIDE(idx, call.n * routing_heads * 2, 64) {
    uint i = idx % call.n, rest = idx / call.n;
    uint which = rest % 2, r = rest / 2;
    uint h = local_heads + r;
    uint src = pc.off[1] + i * pc.row + (which == 0u ? pc.q_col + h * HEAD_DIM : pc.k_col + h / (heads / pc.kv_heads) * HEAD_DIM);
    precise float mean = 0.0;
    for (uint c = 0; c < HEAD_DIM; ++c) mean += qkv[src + c];
    mean /= float(HEAD_DIM);
    precise float var = 0.0;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      precise float d = qkv[src + c] - mean;
      var += d * d;
    }
    precise float rs = 1.0 / sqrt(var / float(HEAD_DIM) + eps);
    uint dst = pc.off[2] + ((r * 2 + which) * max_batch + i) * HEAD_DIM;
    for (uint c = 0; c < HEAD_DIM; ++c) {
      precise float d = qkv[src + c] - mean;
      xn[dst + c] = d * rs;
    }
  }
}
